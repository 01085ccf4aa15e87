//! webtrain patch: the 2D convolution's input gradient as im2col GEMMs over tiles of samples.
//!
//! burn-backend's default runs it as a transposed convolution, which flex computes one sample
//! at a time (for LeNet's conv2, 64 GEMMs of 64 columns each, on one thread: the batch is below
//! flex's threshold for running samples in parallel). Here each tile's output gradient goes
//! through one GEMM with the weight, `cols = Wᵀ · G`, and the columns are added back to the
//! input positions they came from (col2im), a task per chunk of samples.
//!
//! dX[b, ic, y, x] = Σ over (oc, i, j, oh, ow) with oh·s₀ + i·d₀ − p₀ = y and ow·s₁ + j·d₁ − p₁ = x
//! of W[oc, ic, i, j] · G[b, oc, oh, ow]

use alloc::vec;
use alloc::vec::Vec;

use burn_backend::DType;
use burn_backend::ops::ConvOptions;
use burn_std::{Bytes, Shape, bf16, f16};

use super::{
    Dims, Float, Matrix, Tile, TileBuffers, dims4, for_each_chunk, gather_outputs, gemm,
    scatter_patches,
};
use crate::ops::module::{cast_from_f32, cast_to_f32};
use crate::{FlexTensor, Layout};

/// The gradient of a 2D convolution's input of `x_shape` ([batch, in_channels, in_h, in_w]),
/// any padding: only the padding before the first row and column places the kernel.
pub fn conv2d_x_backward(
    x_shape: &Shape,
    weight: FlexTensor,
    output_grad: FlexTensor,
    options: &ConvOptions<2>,
) -> FlexTensor {
    let dtype = output_grad.dtype();
    match dtype {
        DType::F32 => x_grad::<f32>(x_shape, weight, output_grad, options, dtype),
        DType::F64 => x_grad::<f64>(x_shape, weight, output_grad, options, dtype),
        DType::F16 => {
            let grad = conv2d_x_backward(
                x_shape,
                cast_to_f32(weight, f16::to_f32),
                cast_to_f32(output_grad, f16::to_f32),
                options,
            );
            cast_from_f32(grad, f16::from_f32)
        }
        DType::BF16 => {
            let grad = conv2d_x_backward(
                x_shape,
                cast_to_f32(weight, bf16::to_f32),
                cast_to_f32(output_grad, bf16::to_f32),
                options,
            );
            cast_from_f32(grad, bf16::from_f32)
        }
        dtype => panic!("conv2d_x_backward: unsupported dtype {:?}", dtype),
    }
}

fn x_grad<T: Float>(
    x_shape: &Shape,
    weight: FlexTensor,
    output_grad: FlexTensor,
    options: &ConvOptions<2>,
    dtype: DType,
) -> FlexTensor {
    let (weight, output_grad) = (weight.to_contiguous(), output_grad.to_contiguous());
    let g_shape = output_grad.layout().shape();
    let dims = Dims::with_output(
        dims4(x_shape),
        dims4(weight.layout().shape()),
        [g_shape[2], g_shape[3]],
        options,
    );
    let grad: Vec<T> = input_grad(&dims, weight.storage(), output_grad.storage());
    FlexTensor::new(
        Bytes::from_elems(grad),
        Layout::contiguous(x_shape.clone()),
        dtype,
    )
}

/// dX, [batch, in_channels, in_h, in_w], from the weight and the output gradient `g`.
pub(crate) fn input_grad<T: Float>(dims: &Dims, weight: &[T], g: &[T]) -> Vec<T> {
    let sample_len = dims.in_channels * dims.in_plane();
    let mut grad = vec![T::default(); dims.batch * sample_len];
    if sample_len == 0 {
        return grad;
    }
    for_each_chunk(
        &mut grad,
        sample_len,
        dims.chunk_samples(),
        || TileBuffers::new(dims),
        |work, first, chunk, alone| {
            let samples = first..first + chunk.len() / sample_len;
            for tile in dims.tiles(samples) {
                run_tile(work, dims, weight, g, &tile, chunk, first, alone);
            }
        },
    );
    grad
}

/// Adds the tile's share of dX into `grad`, which holds samples from `first` on.
#[allow(clippy::too_many_arguments)]
fn run_tile<T: Float>(
    buffers: &mut TileBuffers<T>,
    dims: &Dims,
    weight: &[T],
    g: &[T],
    tile: &Tile,
    grad: &mut [T],
    first: usize,
    alone: bool,
) {
    let k = tile.len(dims);
    let grads = &mut buffers.channels[..dims.out_channels * k];
    gather_outputs(dims, g, tile, grads);
    let (out_per_group, group_rows) = (dims.out_per_group(), dims.group_rows());
    for group in 0..dims.groups {
        // The group's weight, [out_per_group, group_rows], read transposed.
        let lhs = Matrix {
            data: &weight[group * out_per_group * group_rows..][..out_per_group * group_rows],
            row_stride: 1,
            col_stride: group_rows,
        };
        let rhs = Matrix {
            data: &grads[group * out_per_group * k..][..out_per_group * k],
            row_stride: k,
            col_stride: 1,
        };
        let dst = &mut buffers.columns[group * group_rows * k..][..group_rows * k];
        gemm(dst, [group_rows, k, out_per_group], lhs, rhs, alone);
    }
    scatter_patches(dims, &buffers.columns[..dims.rows() * k], tile, grad, first);
}
