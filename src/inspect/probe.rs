//! A logged step's learning figures, gathered on the device where the step left its weights
//! and gradients, and read back in one transfer: each layer's parameters and gradient (for
//! their spread), the two sums its update ratio needs, and its units' largest outputs on the
//! batch (for the dead ones).

use burn::prelude::*;

use super::learning::{LayerLearning, LearningReport, Spread, dead_share};
use crate::model::{LAYERS, LayerOutputs, Net};
use crate::readback::{ReadbackError, read_values};

/// What one layer's figures take of the values read.
struct Lengths {
    weights: usize,
    gradients: usize,
    /// ‖after − before‖² and ‖before‖², when the layer is not frozen.
    norms: usize,
    largest: usize,
}

/// The figures of one step, on the device until [`LearningProbe::read`].
pub struct LearningProbe {
    epoch: usize,
    step: usize,
    lengths: Vec<Lengths>,
    /// Every layer's parts, one after the other.
    values: Tensor<1>,
}

impl LearningProbe {
    /// The figures of step `step` of `epoch`, which took `before` to `after` with `gradients`
    /// (by layer, as [`Net::layer_gradients`] gives them), on a batch that gave `outputs`;
    /// `frozen` says of each layer whether the step left it as it was.
    pub fn gather(
        (epoch, step): (usize, usize),
        (before, after): (&Net, &Net),
        gradients: [Option<Tensor<1>>; 4],
        frozen: [bool; 4],
        outputs: &LayerOutputs,
    ) -> Self {
        let before = before.valid().layer_parameters();
        let after = after.valid().layer_parameters();
        let largest = outputs.largest_by_unit();
        let mut parts = Vec::new();
        let mut lengths = Vec::new();
        let layers = before.into_iter().zip(after).zip(gradients).zip(largest);
        for ((((before, after), gradient), largest), frozen) in layers.zip(frozen) {
            let weights = after.dims()[0];
            parts.push(after.clone());
            let gradients = gradient.map_or(0, |gradient| {
                parts.push(gradient);
                weights
            });
            let norms = match frozen {
                true => 0,
                false => {
                    let moved = (after - before.clone()).powi_scalar(2).sum();
                    parts.extend([moved, before.powi_scalar(2).sum()]);
                    2
                }
            };
            let largest = largest.map_or(0, |largest| {
                let units = largest.dims()[0];
                parts.push(largest);
                units
            });
            lengths.push(Lengths {
                weights,
                gradients,
                norms,
                largest,
            });
        }
        Self {
            epoch,
            step,
            lengths,
            values: Tensor::cat(parts, 0),
        }
    }

    /// The figures read back and worked out on the host.
    pub async fn read(self) -> Result<LearningReport, ReadbackError> {
        let values = read_values::<f32, 1, _>(self.values).await?;
        let mut rest = values.as_slice();
        let mut take = |len: usize| {
            let (part, after) = rest.split_at(len);
            rest = after;
            part
        };
        let layers = LAYERS.iter().zip(&self.lengths).map(|(name, lengths)| {
            let weights = Spread::of(take(lengths.weights));
            let gradients = Spread::of(take(lengths.gradients));
            let update_ratio = match take(lengths.norms) {
                [moved, size] if *size > 0.0 => Some((f64::from(*moved) / f64::from(*size)).sqrt()),
                _ => None,
            };
            let largest = take(lengths.largest);
            LayerLearning {
                name: name.to_string(),
                weights,
                gradients,
                update_ratio,
                dead_share: dead_share(largest, largest.len()),
            }
        });
        Ok(LearningReport {
            epoch: self.epoch,
            step: self.step,
            layers: layers.collect(),
        })
    }
}
