//! webtrain patch: the 2D convolution's forward pass as im2col GEMMs over tiles of samples.
//!
//! out[b, oc, oh, ow] = bias[oc] + Σ_(ic, i, j) W[oc, ic, i, j] · X[b, ic, oh·s₀ + i·d₀ − p₀, ow·s₁ + j·d₁ − p₁]

use alloc::vec;
use alloc::vec::Vec;

use burn_backend::DType;
use burn_backend::ops::ConvOptions;
use burn_std::{Bytes, Shape};

use super::{Dims, Float, Matrix, Tile, TileBuffers, for_each_chunk, gather_patches, gemm};
use crate::{FlexTensor, Layout};

/// flex's generic 3D convolution path, for the 2D and 1D convolutions it runs as 3D ones
/// (depth 1, stride, padding and dilation neutral on depth) in f32 or f64: their output
/// `[batch, out_channels, 1, out_h, out_w]`. `None` for anything else, which flex's own code
/// runs.
pub fn conv3d_planar(
    x: &FlexTensor,
    weight: &FlexTensor,
    bias: Option<&FlexTensor>,
    options: &ConvOptions<3>,
) -> Option<FlexTensor> {
    let (x_shape, w_shape) = (x.layout().shape(), weight.layout().shape());
    let planar = x_shape[2] == 1
        && w_shape[2] == 1
        && options.stride[0] == 1
        && options.padding[0] == (0, 0)
        && options.dilation[0] == 1;
    if !planar || x.dtype() != weight.dtype() {
        return None;
    }
    let options_2d = ConvOptions {
        stride: [options.stride[1], options.stride[2]],
        padding: [options.padding[1], options.padding[2]],
        dilation: [options.dilation[1], options.dilation[2]],
        groups: options.groups,
    };
    let dims = Dims::forward(
        [x_shape[0], x_shape[1], x_shape[3], x_shape[4]],
        [w_shape[0], w_shape[1], w_shape[3], w_shape[4]],
        &options_2d,
    )?;
    let output = match x.dtype() {
        DType::F32 => Bytes::from_elems(conv_with::<f32>(&dims, x, weight, bias)),
        DType::F64 => Bytes::from_elems(conv_with::<f64>(&dims, x, weight, bias)),
        _ => return None,
    };
    let shape = Shape::from(vec![
        dims.batch,
        dims.out_channels,
        1,
        dims.out_h,
        dims.out_w,
    ]);
    Some(FlexTensor::new(
        output,
        Layout::contiguous(shape),
        x.dtype(),
    ))
}

fn conv_with<T: Float>(
    dims: &Dims,
    x: &FlexTensor,
    weight: &FlexTensor,
    bias: Option<&FlexTensor>,
) -> Vec<T> {
    let (x, weight) = (x.to_contiguous(), weight.to_contiguous());
    let bias = bias.map(|bias| bias.to_contiguous());
    let bias: Option<&[T]> = bias.as_ref().map(|bias| bias.storage());
    conv(dims, x.storage(), weight.storage(), bias)
}

/// The convolution of `x` ([batch, in_channels, in_h, in_w]) with `weight`
/// ([out_channels, in_channels / groups, kh, kw]): [batch, out_channels, out_h, out_w].
pub(crate) fn conv<T: Float>(dims: &Dims, x: &[T], weight: &[T], bias: Option<&[T]>) -> Vec<T> {
    let sample_len = dims.out_channels * dims.positions();
    let mut output = vec![T::default(); dims.batch * sample_len];
    for_each_chunk(
        &mut output,
        sample_len,
        dims.chunk_samples(),
        || TileBuffers::new(dims),
        |work, first, chunk, alone| {
            let samples = first..first + chunk.len() / sample_len;
            for tile in dims.tiles(samples) {
                run_tile(work, dims, x, weight, bias, &tile, chunk, first, alone);
            }
        },
    );
    output
}

/// Computes the tile's outputs into `output`, which holds samples from `first` on.
#[allow(clippy::too_many_arguments)]
fn run_tile<T: Float>(
    buffers: &mut TileBuffers<T>,
    dims: &Dims,
    x: &[T],
    weight: &[T],
    bias: Option<&[T]>,
    tile: &Tile,
    output: &mut [T],
    first: usize,
    alone: bool,
) {
    let k = tile.len(dims);
    let columns = &mut buffers.columns[..dims.rows() * k];
    gather_patches(dims, x, tile, columns);
    let (out_per_group, group_rows) = (dims.out_per_group(), dims.group_rows());
    for group in 0..dims.groups {
        let lhs = Matrix {
            data: &weight[group * out_per_group * group_rows..][..out_per_group * group_rows],
            row_stride: group_rows,
            col_stride: 1,
        };
        let rhs = Matrix {
            data: &columns[group * group_rows * k..][..group_rows * k],
            row_stride: k,
            col_stride: 1,
        };
        let dst = &mut buffers.channels[group * out_per_group * k..][..out_per_group * k];
        gemm(dst, [out_per_group, k, group_rows], lhs, rhs, alone);
    }

    let sample_len = tile.sample_len(dims);
    for (slot, sample) in tile.samples.clone().enumerate() {
        for oc in 0..dims.out_channels {
            let at = ((sample - first) * dims.out_channels + oc) * dims.positions()
                + tile.plane_offset(dims);
            let dst = &mut output[at..][..sample_len];
            let src = &buffers.channels[oc * k + slot * sample_len..][..sample_len];
            match bias {
                Some(bias) => {
                    for (out, value) in dst.iter_mut().zip(src) {
                        *out = *value + bias[oc];
                    }
                }
                None => dst.copy_from_slice(src),
            }
        }
    }
}
