//! Where the digits lie: fc1's activations of the first test digits, the last layer's view of
//! them before the classes are told apart, projected on their first two principal axes.

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use super::InspectError;
use super::pca::principal_plane;
use crate::data::MnistSplit;
use crate::data::batcher::MnistBatcher;
use crate::model::Net;
use crate::readback::read_values;

/// Test digits a projection shows by default.
pub const DIGITS: usize = 1000;
/// Digits through the model at a time.
const BATCH: usize = 250;

/// Test digits as points in the plane of fc1's first two principal axes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DigitMap {
    /// Each digit's place, in the order of the test set.
    pub points: Vec<[f32; 2]>,
    /// Each digit's label.
    pub labels: Vec<u8>,
    /// The share of fc1's variance along each axis.
    pub explained: [f64; 2],
}

/// The first `len` digits of `split` (at least 2) as `net` places them, on `net`'s device.
pub async fn digit_map(
    net: &Net,
    split: &MnistSplit,
    len: usize,
) -> Result<DigitMap, InspectError> {
    let len = split.len_within(Some(len));
    let device = net.devices().into_iter().next().unwrap_or_default();
    let (net, batcher) = (net.valid(), MnistBatcher::new(device));
    let mut hidden = Vec::new();
    let mut width = 0;
    for start in (0..len).step_by(BATCH) {
        let indices: Vec<usize> = (start..(start + BATCH).min(len)).collect();
        let fc1 = net.layer_outputs(batcher.batch(split, &indices).images).fc1;
        width = fc1.dims()[1];
        hidden.extend(read_values::<f32, 2, _>(fc1).await?);
    }
    let projection = principal_plane(&hidden, width)?;
    Ok(DigitMap {
        points: (projection.points.iter())
            .map(|[x, y]| [*x as f32, *y as f32])
            .collect(),
        labels: (0..len).map(|index| split.label(index)).collect(),
        explained: projection.explained,
    })
}
