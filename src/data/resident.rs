//! The training set kept on the GPU, so that a step uploads its batch's indices and labels
//! rather than its images: normalised once, in chunks that each fit in one buffer binding of any
//! WebGPU adapter, and each batch gathered there.

use burn::prelude::*;
use burn::tensor::TensorData;

use crate::data::batcher::{MnistBatch, MnistBatcher};
use crate::data::{IMAGE_PIXELS, MnistSplit};

/// WebGPU's default `maxStorageBufferBindingSize`, which every adapter offers.
const CHUNK_BYTES: usize = 128 << 20;
/// Normalised images in one chunk: 42,799.
const CHUNK_IMAGES: usize = CHUNK_BYTES / (IMAGE_PIXELS * size_of::<f32>());
/// Images normalised on the host and uploaded at a time: 12.8 MB of floats.
const UPLOAD_IMAGES: usize = 4096;

pub struct ResidentSplit {
    /// [≤ CHUNK_IMAGES, 1, 28, 28] each, normalised; chunk c holds samples from c·CHUNK_IMAGES.
    chunks: Vec<Tensor<4>>,
    device: Device,
}

impl ResidentSplit {
    /// The first `len` samples of `split`, uploaded once through `batcher`, a few thousand at a
    /// time: the host never holds a whole chunk of floats (in a browser, wasm memory only grows).
    pub fn new(split: &MnistSplit, len: usize, batcher: &MnistBatcher) -> Self {
        let upload = |start: usize, end: usize| {
            let samples: Vec<usize> = (start..end).collect();
            batcher.batch(split, &samples).images
        };
        let chunks = (0..len)
            .step_by(CHUNK_IMAGES)
            .map(|start| {
                let end = len.min(start + CHUNK_IMAGES);
                let parts: Vec<Tensor<4>> = (start..end)
                    .step_by(UPLOAD_IMAGES)
                    .map(|from| upload(from, end.min(from + UPLOAD_IMAGES)))
                    .collect();
                Tensor::cat(parts, 0)
            })
            .collect();
        Self {
            chunks,
            device: batcher.device().clone(),
        }
    }

    fn indices(&self, indices: impl ExactSizeIterator<Item = usize>) -> Tensor<1, Int> {
        let len = indices.len();
        let values: Vec<i64> = indices.map(|i| i as i64).collect();
        Tensor::from_data(TensorData::new(values, [len]), &self.device)
    }

    /// The samples at `indices` of `split` (each below the length it was made with), in that
    /// order. Their labels are uploaded by `batcher` beside the indices, a few bytes a sample,
    /// where gathering them on the device is a dispatch. (Uploaded in one buffer with the
    /// indices, sliced apart on the device, they cost a dispatch more, not one less.)
    pub fn batch(
        &self,
        batcher: &MnistBatcher,
        split: &MnistSplit,
        indices: &[usize],
    ) -> MnistBatch {
        MnistBatch {
            images: self.images(indices),
            targets: batcher.batch_targets(split, indices),
        }
    }

    /// The images at `indices` (each below the length it was made with), in that order: only
    /// the indices are uploaded.
    pub fn images(&self, indices: &[usize]) -> Tensor<4> {
        match self.chunks.as_slice() {
            [chunk] => chunk
                .clone()
                .select(0, self.indices(indices.iter().copied())),
            chunks => self.gather_across(chunks, indices),
        }
    }

    /// A batch whose samples lie in several chunks: gathered chunk by chunk, then put back in
    /// the batch's order.
    fn gather_across(&self, chunks: &[Tensor<4>], indices: &[usize]) -> Tensor<4> {
        let mut parts = Vec::new();
        // The batch position of each gathered row, in the order they are gathered.
        let mut gathered = Vec::with_capacity(indices.len());
        for (c, chunk) in chunks.iter().enumerate() {
            let (positions, local): (Vec<usize>, Vec<usize>) = indices
                .iter()
                .enumerate()
                .filter(|&(_, &i)| i / CHUNK_IMAGES == c)
                .map(|(p, &i)| (p, i - c * CHUNK_IMAGES))
                .unzip();
            if !local.is_empty() {
                parts.push(chunk.clone().select(0, self.indices(local.into_iter())));
                gathered.extend(positions);
            }
        }
        let mut row_of = vec![0; indices.len()];
        for (row, &position) in gathered.iter().enumerate() {
            row_of[position] = row;
        }
        Tensor::cat(parts, 0).select(0, self.indices(row_of.into_iter()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::idx::tests::{idx_images, idx_labels};

    /// A resident split gives the batch the host builds, whatever chunks its samples are in.
    #[test]
    fn gathers_the_hosts_batch_across_chunks() {
        let count = CHUNK_IMAGES as u32 + 40;
        let split = MnistSplit::from_idx(
            "images",
            &idx_images(count, 28, 28),
            "labels",
            &idx_labels(&(0..count).map(|i| (i % 10) as u8).collect::<Vec<_>>()),
        )
        .unwrap();
        let batcher = MnistBatcher::new(Device::flex());
        let resident = ResidentSplit::new(&split, count as usize, &batcher);
        assert_eq!(resident.chunks.len(), 2);
        let last = count as usize - 1;
        for indices in [
            vec![3, 1, 2],
            vec![last, 0, CHUNK_IMAGES, 5, CHUNK_IMAGES - 1],
        ] {
            let ours = resident.batch(&batcher, &split, &indices);
            let host = batcher.batch(&split, &indices);
            let values = |batch: MnistBatch| {
                let images: Vec<f32> = batch.images.into_data().iter::<f32>().collect();
                let targets: Vec<i64> = batch.targets.into_data().iter::<i64>().collect();
                (images, targets)
            };
            assert_eq!(values(ours), values(host), "{indices:?}");
        }
    }
}
