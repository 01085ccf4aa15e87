//! webtrain patch: the 2D convolution's weight gradient as im2col GEMMs over tiles of samples.
//!
//! burn-backend's default computes it as a convolution of the input with the output gradient,
//! batch and channels swapped. For a convolution with few input channels (LeNet's conv1 has
//! one) that is a single GEMM whose inner dimension is the whole batch's patches, on one tile.
//! Here each tile gathers its input patches (im2col) and adds `G · colsᵀ` into a partial
//! gradient; partials are formed over fixed ranges of the batch and added in order, so the
//! result does not depend on how many threads ran them.
//!
//! dW[oc, ic, i, j] = Σ_b Σ_(oh, ow) G[b, oc, oh, ow] · X[b, ic, oh·s₀ + i·d₀ − p₀, ow·s₁ + j·d₁ − p₁]

use alloc::vec;
use alloc::vec::Vec;

use burn_backend::DType;
use burn_backend::ops::ConvOptions;
use burn_std::{Bytes, Shape, bf16, f16};

use super::{Dims, Float, Matrix, Tile, TileBuffers, dims4, gather_outputs, gather_patches, gemm};
use crate::ops::module::{cast_from_f32, cast_to_f32};
use crate::{FlexTensor, Layout};

/// Chunks of samples whose GEMMs add into one partial gradient.
const CHUNKS_PER_PARTIAL: usize = 4;

/// The weight gradient of a 2D convolution with symmetric padding (`options.padding_begin()`
/// on both sides), for a weight of `weight_shape`.
pub fn conv2d_weight_backward(
    x: FlexTensor,
    output_grad: FlexTensor,
    weight_shape: &Shape,
    options: &ConvOptions<2>,
) -> FlexTensor {
    match x.dtype() {
        DType::F32 => weight_grad::<f32>(x, output_grad, weight_shape, options, DType::F32),
        DType::F64 => weight_grad::<f64>(x, output_grad, weight_shape, options, DType::F64),
        DType::F16 => {
            let grad = conv2d_weight_backward(
                cast_to_f32(x, f16::to_f32),
                cast_to_f32(output_grad, f16::to_f32),
                weight_shape,
                options,
            );
            cast_from_f32(grad, f16::from_f32)
        }
        DType::BF16 => {
            let grad = conv2d_weight_backward(
                cast_to_f32(x, bf16::to_f32),
                cast_to_f32(output_grad, bf16::to_f32),
                weight_shape,
                options,
            );
            cast_from_f32(grad, bf16::from_f32)
        }
        dtype => panic!("conv2d_weight_backward: unsupported dtype {:?}", dtype),
    }
}

fn weight_grad<T: Float>(
    x: FlexTensor,
    output_grad: FlexTensor,
    weight_shape: &Shape,
    options: &ConvOptions<2>,
    dtype: DType,
) -> FlexTensor {
    let x = x.to_contiguous();
    let output_grad = output_grad.to_contiguous();
    let g_shape = output_grad.layout().shape();
    let dims = Dims::with_output(
        dims4(x.layout().shape()),
        dims4(weight_shape),
        [g_shape[2], g_shape[3]],
        options,
    );
    let grad: Vec<T> = weight_grad_of(&dims, x.storage(), output_grad.storage());
    FlexTensor::new(
        Bytes::from_elems(grad),
        Layout::contiguous(weight_shape.clone()),
        dtype,
    )
}

/// dW, [out_channels, in_channels / groups, kh, kw], from the input `x` and the output
/// gradient `g`.
pub(crate) fn weight_grad_of<T: Float>(dims: &Dims, x: &[T], g: &[T]) -> Vec<T> {
    let weight_len = dims.out_channels * dims.group_rows();
    let per_chunk = dims.chunk_samples();
    let per_partial = per_chunk * CHUNKS_PER_PARTIAL;
    let ranges: Vec<(usize, usize)> = (0..dims.batch)
        .step_by(per_partial)
        .map(|start| (start, (start + per_partial).min(dims.batch)))
        .collect();
    let partial = |&(start, end): &(usize, usize)| {
        let mut partial = vec![T::default(); weight_len];
        let mut work = Work::new(dims);
        let alone = ranges.len() == 1;
        for first in (start..end).step_by(per_chunk) {
            for tile in dims.tiles(first..(first + per_chunk).min(end)) {
                work.accumulate(dims, x, g, &tile, &mut partial, alone);
            }
        }
        partial
    };

    #[cfg(feature = "rayon")]
    let partials: Vec<Vec<T>> = {
        use rayon::prelude::*;
        ranges.par_iter().map(partial).collect()
    };
    #[cfg(not(feature = "rayon"))]
    let partials: Vec<Vec<T>> = ranges.iter().map(partial).collect();

    let mut grad = vec![T::default(); weight_len];
    for partial in &partials {
        for (sum, value) in grad.iter_mut().zip(partial) {
            *sum = *sum + *value;
        }
    }
    grad
}

/// One thread's buffers: a tile's patches and output gradients, and one GEMM's product.
struct Work<T> {
    buffers: TileBuffers<T>,
    /// [out_channels / groups, group_rows]
    product: Vec<T>,
}

impl<T: Float> Work<T> {
    fn new(dims: &Dims) -> Self {
        Self {
            buffers: TileBuffers::new(dims),
            product: vec![T::default(); dims.out_per_group() * dims.group_rows()],
        }
    }

    /// Adds the tile's share of the gradient to `partial` ([out_channels, group_rows]).
    fn accumulate(
        &mut self,
        dims: &Dims,
        x: &[T],
        g: &[T],
        tile: &Tile,
        partial: &mut [T],
        alone: bool,
    ) {
        let k = tile.len(dims);
        let columns = &mut self.buffers.columns[..dims.rows() * k];
        let grads = &mut self.buffers.channels[..dims.out_channels * k];
        gather_patches(dims, x, tile, columns);
        gather_outputs(dims, g, tile, grads);

        let (out_per_group, group_rows) = (dims.out_per_group(), dims.group_rows());
        let len = out_per_group * group_rows;
        for group in 0..dims.groups {
            let lhs = Matrix {
                data: &grads[group * out_per_group * k..][..out_per_group * k],
                row_stride: k,
                col_stride: 1,
            };
            // The group's patches, [group_rows, k], read transposed.
            let rhs = Matrix {
                data: &columns[group * group_rows * k..][..group_rows * k],
                row_stride: 1,
                col_stride: k,
            };
            gemm(
                &mut self.product,
                [out_per_group, group_rows, k],
                lhs,
                rhs,
                alone,
            );
            let dst = &mut partial[group * len..][..len];
            for (sum, value) in dst.iter_mut().zip(self.product.iter()) {
                *sum = *sum + *value;
            }
        }
    }
}
