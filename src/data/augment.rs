//! Random affine transforms of training images (rotation, scale, slant, shift), so that a
//! model learns digits as people draw them. Each batch's transforms are drawn from the run's
//! seed and the step's number alone, so a resumed run draws the same ones; they are applied
//! where the batch is: on a GPU over the resident training set, with only six numbers an image
//! uploaded, and on the CPU to the batch the batcher built.

use std::f64::consts::PI;

use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::ops::GridSampleOptions;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::config::AugmentConfig;
use crate::data::batcher::{PIXEL_MEAN, PIXEL_STD};
use crate::data::idx::{IMAGE_PIXELS, IMAGE_SIDE};

/// The seed's stream for the transforms, apart from the shuffles and the hold-out.
const AUGMENT_STREAM: u64 = 0x6175_676d_656e_7421;
/// A blank pixel, normalised: what a transform brings in from outside the frame.
const BACKGROUND: f32 = -PIXEL_MEAN / PIXEL_STD;

/// One image's transform, about the image's centre: scaled, then slanted, then turned, then
/// moved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Affine {
    /// Degrees, clockwise on the screen.
    pub rotation: f64,
    /// The size's factor.
    pub scale: f64,
    /// Degrees of slant: rows lower down move right.
    pub shear: f64,
    /// Pixels right and down.
    pub shift: [f64; 2],
}

impl Affine {
    pub const IDENTITY: Self = Self {
        rotation: 0.0,
        scale: 1.0,
        shear: 0.0,
        shift: [0.0, 0.0],
    };

    /// A transform drawn evenly within `ranges`, either way.
    fn draw(ranges: &AugmentConfig, rng: &mut StdRng) -> Self {
        let mut within = |bound: f64| rng.random_range(-bound..=bound);
        Self {
            rotation: within(ranges.rotation),
            scale: 1.0 + within(ranges.scale),
            shear: within(ranges.shear),
            shift: [within(ranges.shift), within(ranges.shift)],
        }
    }

    /// Where each output pixel reads from, in `grid_sample`'s coordinates (−1 to 1 across the
    /// frame): (x, y) reads from (a·x + b·y + c, d·x + e·y + f), given as the 3×2 matrix
    /// `[a, d, b, e, c, f]` that the row (x, y, 1) multiplies. The inverse of the transform
    /// M = scale · R(rotation) · S(shear), moved by the shift.
    fn sampling(&self) -> [f32; 6] {
        let (sin, cos) = (self.rotation * PI / 180.0).sin_cos();
        let slant = (self.shear * PI / 180.0).tan();
        // S⁻¹ · R⁻¹ / scale.
        let [a, b, d, e] =
            [cos + slant * sin, sin - slant * cos, -sin, cos].map(|m| m / self.scale);
        // A shift of one pixel is 2/28 in grid coordinates.
        let [dx, dy] = self.shift.map(|s| 2.0 * s / IMAGE_SIDE as f64);
        let (c, f) = (-(a * dx + b * dy), -(d * dx + e * dy));
        [a, d, b, e, c, f].map(|v| v as f32)
    }
}

/// The transforms of the `n` images of the run's step `step` (counted from 0), as `seed` draws
/// them: the same whenever they are drawn.
pub fn draws(ranges: &AugmentConfig, seed: u64, step: usize, n: usize) -> Vec<Affine> {
    let key = seed ^ AUGMENT_STREAM ^ (step as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut rng = StdRng::seed_from_u64(key);
    (0..n).map(|_| Affine::draw(ranges, &mut rng)).collect()
}

/// Applies a run's augmentation to its batches on one device.
pub struct Augmenter {
    ranges: AugmentConfig,
    seed: u64,
    /// [1, 784, 3]: every output pixel's centre in `grid_sample`'s coordinates, as (x, y, 1).
    grid: Tensor<3>,
}

impl Augmenter {
    /// The augmentation `ranges` describe, drawn from `seed`, for batches on `device`; none when
    /// it is off.
    pub fn new(ranges: &AugmentConfig, seed: u64, device: &Device) -> Option<Self> {
        if !ranges.on {
            return None;
        }
        let device = device.clone().inner();
        let centre = |i: usize| ((2 * i + 1) as f32 / IMAGE_SIDE as f32) - 1.0;
        let values: Vec<f32> = (0..IMAGE_PIXELS)
            .flat_map(|p| [centre(p % IMAGE_SIDE), centre(p / IMAGE_SIDE), 1.0])
            .collect();
        let grid = Tensor::from_data(TensorData::new(values, [1, IMAGE_PIXELS, 3]), &device);
        Some(Self {
            ranges: ranges.clone(),
            seed,
            grid,
        })
    }

    /// `images` [n, 1, 28, 28], normalised, under the transforms drawn for the run's step
    /// `step`.
    pub fn apply(&self, images: Tensor<4>, step: usize) -> Tensor<4> {
        let n = images.dims()[0];
        self.apply_part(images, step, 0, n)
    }

    /// `images` [n, 1, 28, 28], normalised: the samples from `offset` on of the run's step
    /// `step`, whose batch holds `batch`, under their transforms. Each sample's transform is
    /// its place in the batch's, however the batch is split over devices.
    pub fn apply_part(
        &self,
        images: Tensor<4>,
        step: usize,
        offset: usize,
        batch: usize,
    ) -> Tensor<4> {
        let n = images.dims()[0];
        let all = draws(&self.ranges, self.seed, step, batch);
        self.transform(images, &all[offset..offset + n])
    }

    /// `images` [n, 1, 28, 28], normalised, each under its transform: bilinear, blank beyond
    /// the frame. Computed off the autodiff graph: the images are its input, not a result.
    pub fn transform(&self, images: Tensor<4>, transforms: &[Affine]) -> Tensor<4> {
        let autodiff = images.is_autodiff();
        let images = images.inner();
        let device = images.device();
        let n = transforms.len();
        // The grid comes out of one matmul laid out as `grid_sample` reads it.
        let values: Vec<f32> = transforms.iter().flat_map(Affine::sampling).collect();
        let theta = Tensor::<3>::from_data(TensorData::new(values, [n, 3, 2]), &device);
        let grid = self
            .grid
            .clone()
            .matmul(theta) // [n, 784, 2]
            .reshape([n, IMAGE_SIDE, IMAGE_SIDE, 2]);
        // Sampled as offsets from a blank pixel, which is what lies beyond the frame.
        let sampled = images
            .sub_scalar(BACKGROUND)
            .grid_sample_2d(grid, GridSampleOptions::default())
            .add_scalar(BACKGROUND);
        match autodiff {
            true => sampled.autodiff(),
            false => sampled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::batcher::MnistBatcher;

    fn ranges() -> AugmentConfig {
        AugmentConfig {
            on: true,
            ..AugmentConfig::default()
        }
    }

    #[test]
    fn the_same_seed_and_step_draw_the_same_transforms() {
        let ranges = ranges();
        let drawn = draws(&ranges, 7, 12, 64);
        assert_eq!(drawn, draws(&ranges, 7, 12, 64));
        assert_ne!(drawn, draws(&ranges, 7, 13, 64));
        assert_ne!(drawn, draws(&ranges, 8, 12, 64));
        // A smaller batch (an epoch's last) draws the same first transforms.
        assert_eq!(drawn[..10], draws(&ranges, 7, 12, 10)[..]);
    }

    #[test]
    fn transforms_stay_within_their_ranges_and_use_them() {
        let ranges = AugmentConfig {
            on: true,
            rotation: 20.0,
            scale: 0.2,
            shear: 5.0,
            shift: 2.5,
        };
        let drawn: Vec<Affine> = (0..50).flat_map(|s| draws(&ranges, 1, s, 64)).collect();
        let extent = |of: fn(&Affine) -> f64| {
            let values: Vec<f64> = drawn.iter().map(of).collect();
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (min, max)
        };
        // What is drawn, its centre and its bound.
        type Case = (fn(&Affine) -> f64, f64, f64);
        let cases: [Case; 5] = [
            (|a| a.rotation, 0.0, 20.0),
            (|a| a.scale, 1.0, 0.2),
            (|a| a.shear, 0.0, 5.0),
            (|a| a.shift[0], 0.0, 2.5),
            (|a| a.shift[1], 0.0, 2.5),
        ];
        for (of, centre, bound) in cases {
            let (min, max) = extent(of);
            assert!(
                min >= centre - bound && max <= centre + bound,
                "{min}..{max}"
            );
            // 3,200 draws reach well into both ends.
            assert!(min < centre - 0.9 * bound && max > centre + 0.9 * bound);
        }
    }

    /// A 28×28 image with a bright 3×3 square whose top-left pixel is (x, y).
    fn square(x: usize, y: usize) -> Vec<u8> {
        let mut image = vec![0u8; IMAGE_PIXELS];
        for row in y..y + 3 {
            image[row * IMAGE_SIDE + x..row * IMAGE_SIDE + x + 3].fill(255);
        }
        image
    }

    fn transformed(image: &[u8], transform: Affine) -> (Vec<f32>, Vec<f32>) {
        let device = Device::flex();
        let batcher = MnistBatcher::new(device.clone());
        let augmenter = Augmenter::new(&ranges(), 1, &device).unwrap();
        let images = batcher.images(image);
        let values = |t: Tensor<4>| t.into_data().iter::<f32>().collect::<Vec<f32>>();
        let out = augmenter.transform(images.clone(), &[transform]);
        (values(images), values(out))
    }

    #[test]
    fn the_identity_leaves_an_image_as_it_is() {
        let (before, after) = transformed(&square(10, 12), Affine::IDENTITY);
        for (b, a) in before.iter().zip(&after) {
            assert!((b - a).abs() < 1e-5, "{b} {a}");
        }
    }

    #[test]
    fn a_whole_pixel_shift_moves_the_image_and_brings_in_blank_paper() {
        let shift = Affine {
            shift: [2.0, -1.0],
            ..Affine::IDENTITY
        };
        let (_, after) = transformed(&square(10, 12), shift);
        let (expected, _) = transformed(&square(12, 11), Affine::IDENTITY);
        for (e, a) in expected.iter().zip(&after) {
            assert!((e - a).abs() < 1e-4, "{e} {a}");
        }
        // A square moved past the right edge leaves only paper.
        let away = Affine {
            shift: [14.0, 0.0],
            ..Affine::IDENTITY
        };
        let (_, after) = transformed(&square(20, 12), away);
        assert!(after.iter().all(|v| (v - BACKGROUND).abs() < 1e-5));
    }

    #[test]
    fn a_quarter_turn_turns_the_image_about_its_centre() {
        // Clockwise on the screen: (x, y) goes to (27 − y, x).
        let turn = Affine {
            rotation: 90.0,
            ..Affine::IDENTITY
        };
        let (_, after) = transformed(&square(4, 10), turn);
        let (expected, _) = transformed(&square(15, 4), Affine::IDENTITY);
        for (e, a) in expected.iter().zip(&after) {
            assert!((e - a).abs() < 1e-4, "{e} {a}");
        }
    }

    #[test]
    fn every_value_stays_between_blank_paper_and_full_ink() {
        let mut image = square(8, 8);
        image[300..340].fill(128);
        let ink = (1.0 - PIXEL_MEAN) / PIXEL_STD;
        for transform in draws(&ranges(), 3, 0, 20) {
            let (_, after) = transformed(&image, transform);
            assert!(
                after
                    .iter()
                    .all(|v| (BACKGROUND - 1e-5..=ink + 1e-5).contains(v))
            );
            assert!(
                after.iter().any(|v| *v > 0.5),
                "{transform:?} kept some ink"
            );
        }
    }
}
