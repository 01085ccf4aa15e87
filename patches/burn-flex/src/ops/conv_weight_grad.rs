//! webtrain patch: the 2D convolution's weight gradient as im2col GEMMs over groups of samples.
//!
//! burn-backend's default computes it as a convolution of the input with the output gradient,
//! batch and channels swapped. For a convolution with few input channels (LeNet's conv1 has
//! one) that is a single GEMM whose inner dimension is the whole batch's patches, on one tile.
//! Here each group of samples gathers its input patches (im2col) and adds `G · colsᵀ` into a
//! partial gradient; partials are formed over fixed ranges of the batch and added in order, so
//! the result does not depend on how many threads ran them.
//!
//! dW[oc, ic, i, j] = Σ_b Σ_(oh, ow) G[b, oc, oh, ow] · X[b, ic, oh·s₀ + i·d₀ − p₀, ow·s₁ + j·d₁ − p₁]

use alloc::vec;
use alloc::vec::Vec;
use core::ops::Add;

use burn_backend::DType;
use burn_backend::ops::ConvOptions;
use burn_std::{Bytes, Shape, bf16, f16};

use crate::ops::module::{cast_from_f32, cast_to_f32};
use crate::{FlexTensor, Layout};

/// Patch positions (a GEMM's inner dimension) a group of samples aims for: one LeNet conv2
/// sample has 64, too few for a GEMM call to run well.
const TARGET_K: usize = 512;
/// Groups of samples whose GEMMs add into one partial gradient.
const GROUPS_PER_PARTIAL: usize = 4;

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

/// The sizes one computation needs.
#[derive(Clone, Copy)]
struct Dims {
    in_channels: usize,
    in_h: usize,
    in_w: usize,
    out_channels: usize,
    out_h: usize,
    out_w: usize,
    kernel: [usize; 2],
    groups: usize,
}

impl Dims {
    /// Output positions of one sample: one sample's share of a GEMM's inner dimension.
    fn positions(&self) -> usize {
        self.out_h * self.out_w
    }

    /// Rows of one group's patches: its input channels times the kernel's positions.
    fn group_rows(&self) -> usize {
        self.in_channels / self.groups * self.kernel[0] * self.kernel[1]
    }
}

fn weight_grad<T>(
    x: FlexTensor,
    output_grad: FlexTensor,
    weight_shape: &Shape,
    options: &ConvOptions<2>,
    dtype: DType,
) -> FlexTensor
where
    T: burn_backend::Element + bytemuck::Pod + Send + Sync + Default + Add<Output = T> + One,
{
    let x = x.to_contiguous();
    let output_grad = output_grad.to_contiguous();
    let [batch, in_channels, in_h, in_w] = dims4(x.layout().shape());
    let [_, out_channels, out_h, out_w] = dims4(output_grad.layout().shape());
    let [_, _, kernel_h, kernel_w] = dims4(weight_shape);
    let dims = Dims {
        in_channels,
        in_h,
        in_w,
        out_channels,
        out_h,
        out_w,
        kernel: [kernel_h, kernel_w],
        groups: options.groups,
    };
    let x_data: &[T] = x.storage();
    let g_data: &[T] = output_grad.storage();
    let weight_len = out_channels * dims.group_rows();

    let per_group = TARGET_K
        .div_ceil(dims.positions().max(1))
        .clamp(1, batch.max(1));
    let per_partial = per_group * GROUPS_PER_PARTIAL;
    let ranges: Vec<(usize, usize)> = (0..batch)
        .step_by(per_partial)
        .map(|start| (start, (start + per_partial).min(batch)))
        .collect();
    let partial = |&(start, end): &(usize, usize)| {
        let mut partial = vec![T::default(); weight_len];
        let mut work = Work::new(&dims, per_group);
        let parallel = ranges.len() == 1;
        for first in (start..end).step_by(per_group) {
            let samples = first..(first + per_group).min(end);
            work.accumulate(
                &dims,
                options,
                x_data,
                g_data,
                samples,
                &mut partial,
                parallel,
            );
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
    FlexTensor::new(
        Bytes::from_elems(grad),
        Layout::contiguous(weight_shape.clone()),
        dtype,
    )
}

/// One thread's buffers: a group of samples' patches and output gradients, side by side.
struct Work<T> {
    /// [in_channels · kh · kw, samples · positions]
    columns: Vec<T>,
    /// [out_channels, samples · positions]
    grads: Vec<T>,
    /// One GEMM's product, [out_channels, group_rows]
    product: Vec<T>,
}

impl<T> Work<T>
where
    T: bytemuck::Pod + Copy + Default + Add<Output = T> + 'static + One,
{
    fn new(dims: &Dims, samples: usize) -> Self {
        let k = samples * dims.positions();
        Self {
            columns: vec![T::default(); dims.in_channels * dims.kernel[0] * dims.kernel[1] * k],
            grads: vec![T::default(); dims.out_channels * k],
            product: vec![T::default(); dims.out_channels * dims.group_rows()],
        }
    }

    /// Adds the samples' share of the gradient to `partial` ([out_channels, group_rows]).
    #[allow(clippy::too_many_arguments)]
    fn accumulate(
        &mut self,
        dims: &Dims,
        options: &ConvOptions<2>,
        x: &[T],
        g: &[T],
        samples: core::ops::Range<usize>,
        partial: &mut [T],
        parallel: bool,
    ) {
        let positions = dims.positions();
        let k = samples.len() * positions;
        let rows = dims.in_channels * dims.kernel[0] * dims.kernel[1];
        let columns = &mut self.columns[..rows * k];
        let grads = &mut self.grads[..dims.out_channels * k];
        let in_plane = dims.in_h * dims.in_w;
        for (slot, b) in samples.enumerate() {
            for ic in 0..dims.in_channels {
                let plane = &x[(b * dims.in_channels + ic) * in_plane..][..in_plane];
                for i in 0..dims.kernel[0] {
                    for j in 0..dims.kernel[1] {
                        let row = (ic * dims.kernel[0] + i) * dims.kernel[1] + j;
                        let dst = &mut columns[row * k + slot * positions..][..positions];
                        gather_patch_row(dims, options, plane, [i, j], dst);
                    }
                }
            }
            for oc in 0..dims.out_channels {
                let src = &g[(b * dims.out_channels + oc) * positions..][..positions];
                grads[oc * k + slot * positions..][..positions].copy_from_slice(src);
            }
        }

        let out_per_group = dims.out_channels / dims.groups;
        let group_rows = dims.group_rows();
        #[cfg(feature = "rayon")]
        let parallelism = match parallel {
            true => gemm::Parallelism::Rayon(0),
            false => gemm::Parallelism::None,
        };
        #[cfg(not(feature = "rayon"))]
        let parallelism = {
            let _ = parallel;
            gemm::Parallelism::None
        };
        for group in 0..dims.groups {
            let len = out_per_group * group_rows;
            let product = &mut self.product[..len];
            let lhs = &grads[group * out_per_group * k..][..out_per_group * k];
            let rhs = &columns[group * group_rows * k..][..group_rows * k];
            // product[out, rows] = lhs[out, k] · rhs[rows, k]ᵀ, then added to the partial
            // here: gemm's own accumulation into its destination rounds differently on x86
            // (FMA) and in wasm, and the page's CPU curve must stay the native one's.
            unsafe {
                gemm::gemm(
                    out_per_group,
                    group_rows,
                    k,
                    product.as_mut_ptr(),
                    1,
                    group_rows as isize,
                    false,
                    lhs.as_ptr(),
                    1,
                    k as isize,
                    rhs.as_ptr(),
                    k as isize,
                    1,
                    T::default(),
                    T::one(),
                    false,
                    false,
                    false,
                    parallelism,
                );
            }
            let dst = &mut partial[group * len..][..len];
            for (sum, value) in dst.iter_mut().zip(product.iter()) {
                *sum = *sum + *value;
            }
        }
    }
}

/// The input values kernel position `[i, j]` meets at each output position, zero in the padding.
fn gather_patch_row<T: Copy + Default>(
    dims: &Dims,
    options: &ConvOptions<2>,
    plane: &[T],
    [i, j]: [usize; 2],
    dst: &mut [T],
) {
    let [stride_h, stride_w] = options.stride;
    let [dilation_h, dilation_w] = options.dilation;
    let [pad_h, pad_w] = options.padding_begin();
    // Output columns whose input column lies inside the input: [first, end).
    let offset_w = (j * dilation_w) as isize - pad_w as isize;
    let first = if offset_w >= 0 {
        0
    } else {
        (-offset_w as usize).div_ceil(stride_w)
    };
    let end = if offset_w >= dims.in_w as isize {
        0
    } else {
        ((dims.in_w as isize - offset_w) as usize).div_ceil(stride_w)
    }
    .min(dims.out_w);
    for oh in 0..dims.out_h {
        let row = &mut dst[oh * dims.out_w..][..dims.out_w];
        let ih = (oh * stride_h + i * dilation_h) as isize - pad_h as isize;
        if ih < 0 || ih >= dims.in_h as isize || first >= end {
            row.fill(T::default());
            continue;
        }
        let input = &plane[ih as usize * dims.in_w..][..dims.in_w];
        row[..first].fill(T::default());
        row[end..].fill(T::default());
        let start = (first * stride_w) as isize + offset_w;
        if stride_w == 1 {
            row[first..end].copy_from_slice(&input[start as usize..][..end - first]);
        } else {
            for (n, value) in row[first..end].iter_mut().enumerate() {
                *value = input[start as usize + n * stride_w];
            }
        }
    }
}

fn dims4(shape: &Shape) -> [usize; 4] {
    [shape[0], shape[1], shape[2], shape[3]]
}

/// The multiplicative identity, for the GEMM's scale factors.
pub trait One {
    fn one() -> Self;
}

impl One for f32 {
    fn one() -> Self {
        1.0
    }
}

impl One for f64 {
    fn one() -> Self {
        1.0
    }
}
