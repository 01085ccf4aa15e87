//! Warnings from the learning figures, where they mean something: a layer whose updates stay
//! far from a thousandth of its weights for many log lines (the learning rate is likely too
//! high or too low for it), or a layer most of whose units never fire.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::learning::LearningReport;

/// The update ratio a well-set learning rate gives, about.
pub const GOOD_RATIO: f64 = 1e-3;
/// A ratio this many times above or below [`GOOD_RATIO`] is far from it.
const FAR: f64 = 10.0;
/// Log lines in a row a ratio must stay far for a warning.
pub const FAR_FOR: usize = 5;
/// Past this share of dead units, a layer is said to be mostly dead.
const MOSTLY_DEAD: f64 = 0.5;

/// What the log says of a layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LearningWarning {
    /// The step of the log line that gave it.
    pub step: usize,
    pub layer: String,
    pub concern: Concern,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Concern {
    /// The update ratio was `ratio` at the last of `log_lines` log lines in a row all far
    /// from [`GOOD_RATIO`] on the same side.
    UpdateRatio { ratio: f64, log_lines: usize },
    /// `share` of the layer's units never fired on the batch.
    Dead { share: f64 },
}

impl fmt::Display for LearningWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let layer = &self.layer;
        match self.concern {
            Concern::UpdateRatio { ratio, log_lines } => {
                let (side, rate) = match ratio > GOOD_RATIO {
                    true => ("above", "high"),
                    false => ("below", "low"),
                };
                write!(
                    f,
                    "Warning: {layer}'s updates have been far {side} a thousandth of its \
                     weights for {log_lines} log lines (now {ratio:.1e}): the learning rate may \
                     be too {rate} for it"
                )
            }
            Concern::Dead { share } => write!(
                f,
                "Warning: {:.0}% of {layer}'s units never fired on the batch at step {}: they \
                 are dead and learn nothing",
                share * 100.0,
                self.step
            ),
        }
    }
}

/// Which side of [`GOOD_RATIO`] a ratio is far on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Above,
    Below,
}

fn far_side(ratio: f64) -> Option<Side> {
    match ratio {
        r if r > GOOD_RATIO * FAR => Some(Side::Above),
        r if r < GOOD_RATIO / FAR => Some(Side::Below),
        _ => None,
    }
}

/// Log lines in a row whose update ratio was far from [`GOOD_RATIO`] on one side.
#[derive(Clone, Copy)]
struct FarStretch {
    side: Side,
    log_lines: usize,
    /// Whether it was warned of already.
    said: bool,
}

/// What the watch remembers of one layer.
#[derive(Default)]
struct LayerWatch {
    far: Option<FarStretch>,
    /// Whether the layer's being mostly dead was warned of, since it last was not.
    dead_said: bool,
}

/// Watches a run's learning reports and warns once of each stretch of trouble: again only
/// after the layer has come back.
#[derive(Default)]
pub struct LearningWatch {
    layers: HashMap<String, LayerWatch>,
}

impl LearningWatch {
    /// The warnings `report` gives, after those it came after.
    pub fn observe(&mut self, report: &LearningReport) -> Vec<LearningWarning> {
        let mut warnings = Vec::new();
        for layer in &report.layers {
            let watch = self.layers.entry(layer.name.clone()).or_default();
            let warn = |concern| LearningWarning {
                step: report.step,
                layer: layer.name.clone(),
                concern,
            };
            let side = layer.update_ratio.and_then(far_side);
            watch.far = match (side, watch.far) {
                (Some(side), Some(far)) if side == far.side => Some(FarStretch {
                    log_lines: far.log_lines + 1,
                    ..far
                }),
                (Some(side), _) => Some(FarStretch {
                    side,
                    log_lines: 1,
                    said: false,
                }),
                (None, _) => None,
            };
            if let Some(far) = &mut watch.far
                && far.log_lines >= FAR_FOR
                && !far.said
            {
                far.said = true;
                let ratio = layer.update_ratio.unwrap_or_default();
                let log_lines = far.log_lines;
                warnings.push(warn(Concern::UpdateRatio { ratio, log_lines }));
            }
            match layer.dead_share {
                Some(share) if share > MOSTLY_DEAD && !watch.dead_said => {
                    watch.dead_said = true;
                    warnings.push(warn(Concern::Dead { share }));
                }
                Some(share) if share <= MOSTLY_DEAD => watch.dead_said = false,
                _ => {}
            }
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::learning::LayerLearning;

    fn report(step: usize, ratio: f64, dead: f64) -> LearningReport {
        LearningReport {
            epoch: 1,
            step,
            layers: vec![LayerLearning {
                name: "fc1".into(),
                weights: None,
                gradients: None,
                update_ratio: Some(ratio),
                dead_share: Some(dead),
            }],
        }
    }

    #[test]
    fn warns_once_of_each_stretch() {
        let mut watch = LearningWatch::default();
        let mut said = Vec::new();
        // Four far lines, one good one: no warning. Then far above for five: one.
        let ratios = [0.2, 0.2, 0.2, 0.2, 1e-3, 0.2, 0.3, 0.2, 0.2, 0.05, 0.2, 0.2];
        for (i, ratio) in ratios.into_iter().enumerate() {
            said.extend(watch.observe(&report(100 * i, ratio, 0.1)));
        }
        assert_eq!(said.len(), 1, "{said:?}");
        assert_eq!(said[0].step, 900);
        assert_eq!(
            said[0].to_string(),
            "Warning: fc1's updates have been far above a thousandth of its weights for 5 log \
             lines (now 5.0e-2): the learning rate may be too high for it"
        );
        // From far above to far below starts a new stretch, said after five lines.
        let below: Vec<_> = (0..5)
            .flat_map(|i| watch.observe(&report(2000 + i, 1e-6, 0.1)))
            .collect();
        assert_eq!(below.len(), 1, "{below:?}");
        assert!(below[0].to_string().contains("too low"), "{}", below[0]);
        // Mostly dead: said once until it recovers.
        let dead: Vec<_> = [0.7, 0.8, 0.3, 0.6]
            .into_iter()
            .enumerate()
            .flat_map(|(i, dead)| watch.observe(&report(3000 + i, 1e-3, dead)))
            .collect();
        let steps: Vec<_> = dead.iter().map(|w| w.step).collect();
        assert_eq!(steps, [3000, 3003]);
        assert_eq!(
            dead[0].to_string(),
            "Warning: 70% of fc1's units never fired on the batch at step 3000: they are dead \
             and learn nothing"
        );
    }
}
