//! How a layer learns, from its values on the host: the spread of its weights or gradients
//! (a histogram, and TensorBoard's "distribution" bands of percentiles), the size of a step's
//! update against the weights, and the share of its ReLU units that never fire on a batch.

use serde::{Deserialize, Serialize};

/// TensorBoard's distribution bands: the values at these basis points of the sorted values
/// (the minimum, ±1.5σ, ±1σ, ±0.5σ of a normal, the median, and the maximum).
pub const BAND_BASIS_POINTS: [u32; 9] = [0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10_000];

/// Bins of a histogram.
pub const BINS: usize = 30;

/// The values at [`BAND_BASIS_POINTS`], interpolated linearly between neighbours as numpy's
/// `percentile` does; none for no values. Values that are not numbers sort last.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bands(#[serde(with = "crate::json_float::array")] pub [f32; 9]);

impl Bands {
    pub fn of(values: &[f32]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let last = (values.len() - 1) as f64;
        let places = BAND_BASIS_POINTS.map(|bp| last * f64::from(bp) / 10_000.0);
        // The values of the ranks the bands fall between, found by selection, not a sort:
        // each selection leaves the ranks above it to the right, where the next one looks.
        let mut ranks: Vec<usize> = places
            .iter()
            .flat_map(|at| [at.floor() as usize, at.ceil() as usize])
            .collect();
        // Two bands between the same two neighbours give their ranks out of order.
        ranks.sort_unstable();
        ranks.dedup();
        let mut values = values.to_vec();
        let mut start = 0;
        let mut at_rank = Vec::with_capacity(ranks.len());
        for &rank in &ranks {
            let (_, value, _) =
                values[start..].select_nth_unstable_by(rank - start, f32::total_cmp);
            at_rank.push((rank, *value));
            start = rank;
        }
        let value = |rank: usize| {
            let found = at_rank.iter().find(|(r, _)| *r == rank);
            f64::from(found.map_or(f32::NAN, |(_, v)| *v))
        };
        Some(Self(places.map(|at| {
            let (low, high) = (value(at.floor() as usize), value(at.ceil() as usize));
            (low + (high - low) * (at - at.floor())) as f32
        })))
    }
}

/// Counts of values in [`BINS`] equal bins from the smallest value to the largest, both
/// included; a value that is not finite is counted apart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub min: f32,
    pub max: f32,
    pub counts: Vec<u64>,
    pub not_finite: u64,
}

impl Histogram {
    pub fn of(values: &[f32]) -> Self {
        let finite = || values.iter().copied().filter(|v| v.is_finite());
        let min = finite().fold(f32::INFINITY, f32::min);
        let max = finite().fold(f32::NEG_INFINITY, f32::max);
        let mut counts = vec![0; BINS];
        let width = f64::from(max) - f64::from(min);
        for v in finite() {
            let bin = match width > 0.0 {
                true => ((f64::from(v) - f64::from(min)) / width * BINS as f64) as usize,
                false => 0,
            };
            counts[bin.min(BINS - 1)] += 1;
        }
        let not_finite = values.len() as u64 - counts.iter().sum::<u64>();
        match min <= max {
            true => Self {
                min,
                max,
                counts,
                not_finite,
            },
            false => Self {
                min: 0.0,
                max: 0.0,
                counts,
                not_finite,
            },
        }
    }

    /// Every value counted: the finite ones in a bin, the others apart.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.not_finite
    }
}

/// ‖after − before‖ / ‖before‖: how far a step moved a layer's weights, against their size
/// (about 10⁻³ a step when the learning rate is right); none for weights all zero or of other
/// lengths.
pub fn update_ratio(before: &[f32], after: &[f32]) -> Option<f64> {
    if before.len() != after.len() {
        return None;
    }
    let (mut moved, mut size) = (0.0, 0.0);
    for (b, a) in before.iter().zip(after) {
        let (b, a) = (f64::from(*b), f64::from(*a));
        moved += (a - b) * (a - b);
        size += b * b;
    }
    (size > 0.0).then(|| (moved / size).sqrt())
}

/// Of a ReLU layer's outputs for a batch, `[batch, units…]` flattened with `per_sample` values
/// a sample, the share of units that are zero for every sample: units that learn nothing from
/// it. None for no samples.
pub fn dead_share(outputs: &[f32], per_sample: usize) -> Option<f64> {
    if per_sample == 0 || outputs.is_empty() || !outputs.len().is_multiple_of(per_sample) {
        return None;
    }
    let mut fired = vec![false; per_sample];
    for sample in outputs.chunks(per_sample) {
        for (f, v) in fired.iter_mut().zip(sample) {
            *f |= *v > 0.0;
        }
    }
    let dead = fired.iter().filter(|f| !**f).count();
    Some(dead as f64 / per_sample as f64)
}

/// How one layer learns at a logged step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerLearning {
    /// As [`crate::model::LAYERS`] names it.
    pub name: String,
    /// Its parameters, weight and bias, after the step.
    pub weights: Option<Spread>,
    /// The gradient the step took (a frozen layer's too, which the step does not apply).
    pub gradients: Option<Spread>,
    /// [`update_ratio`] of the step; none for a layer that is frozen or all zero.
    pub update_ratio: Option<f64>,
    /// [`dead_share`] of its units on the step's batch; none for a layer without a ReLU.
    pub dead_share: Option<f64>,
}

/// The spread of a layer's values: its histogram and its percentile bands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub bands: Bands,
    pub histogram: Histogram,
}

impl Spread {
    /// None for no values.
    pub fn of(values: &[f32]) -> Option<Self> {
        Some(Self {
            bands: Bands::of(values)?,
            histogram: Histogram::of(values),
        })
    }
}

/// How every layer learns at a logged step: taken after the step, on its batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LearningReport {
    pub epoch: usize,
    /// Steps since the start of the run, this one included.
    pub step: usize,
    pub layers: Vec<LayerLearning>,
}

impl LearningReport {
    /// The layer named `name`.
    pub fn layer(&self, name: &str) -> Option<&LayerLearning> {
        self.layers.iter().find(|layer| layer.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_are_numpys_percentiles() {
        // np.percentile(np.arange(11.0) ** 2, [0, 6.68, 15.87, 30.85, 50, 69.15, 84.13, 93.32, 100])
        let values: Vec<f32> = (0..11).rev().map(|i| (i * i) as f32).collect();
        let numpy = [
            0.0, 0.668, 2.761, 9.595, 25.0, 47.895, 71.021, 87.308, 100.0,
        ];
        let Bands(found) = Bands::of(&values).unwrap();
        for (f, n) in found.iter().zip(numpy) {
            assert!((f - n).abs() < 1e-3, "{found:?}");
        }
        // On many values, the selection gives the sorted values' interpolation.
        let many: Vec<f32> = (0..10_007_u64)
            .map(|i| ((i * 7919) % 10_007) as f32 * 0.5)
            .collect();
        let Bands(found) = Bands::of(&many).unwrap();
        let mut sorted = many.clone();
        sorted.sort_by(f32::total_cmp);
        for (f, bp) in found.iter().zip(BAND_BASIS_POINTS) {
            let at = 10_006.0 * f64::from(bp) / 10_000.0;
            let (low, high) = (sorted[at.floor() as usize], sorted[at.ceil() as usize]);
            let expected = f64::from(low) + f64::from(high - low) * (at - at.floor());
            assert!(
                (f64::from(*f) - expected).abs() < 1e-3,
                "{bp}: {f} against {expected}"
            );
        }
        assert_eq!(Bands::of(&[]), None);
        assert_eq!(Bands::of(&[2.5]), Some(Bands([2.5; 9])));
        // Few values: several bands between the same two.
        let Bands(three) = Bands::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((three[0], three[4], three[8]), (1.0, 2.0, 3.0));
        assert!((three[1] - 1.1336).abs() < 1e-4, "{three:?}");
    }

    #[test]
    fn a_histogram_counts_every_value_once() {
        let values: Vec<f32> = (0..431_080_u64)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let histogram = Histogram::of(&values);
        assert_eq!(histogram.total(), values.len() as u64);
        assert_eq!(histogram.not_finite, 0);
        assert_eq!((histogram.min, histogram.max), (-0.5, 0.499));
        // Equal bins of an even spread hold nearly equal counts.
        let (least, most) = (histogram.counts.iter().min(), histogram.counts.iter().max());
        assert!(
            most.unwrap() - least.unwrap() < values.len() as u64 / 200,
            "{histogram:?}"
        );
        let odd = Histogram::of(&[1.0, f32::NAN, 1.0, f32::INFINITY]);
        assert_eq!((odd.counts[0], odd.not_finite, odd.total()), (2, 2, 4));
        assert_eq!(Histogram::of(&[]).total(), 0);
    }

    #[test]
    fn the_update_ratio_and_dead_units() {
        let before = [3.0, 4.0];
        assert_eq!(update_ratio(&before, &[3.0, 4.0]), Some(0.0));
        // Moved by (0.003, 0.004): 0.005 against 5.
        let ratio = update_ratio(&before, &[3.003, 4.004]).unwrap();
        assert!((ratio - 1e-3).abs() < 1e-7, "{ratio}");
        assert_eq!(update_ratio(&[0.0], &[1.0]), None);
        assert_eq!(update_ratio(&[1.0], &[1.0, 2.0]), None);
        // Three samples of four units: the second and fourth never fire.
        let outputs = [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0, 0.1, 0.0, 0.0, 0.0];
        assert_eq!(dead_share(&outputs, 4), Some(0.5));
        assert_eq!(dead_share(&[], 4), None);
        assert_eq!(dead_share(&outputs, 5), None);
    }
}
