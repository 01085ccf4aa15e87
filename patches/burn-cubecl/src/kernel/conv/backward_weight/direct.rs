//! webtrain patch: a 2D convolution's weight gradient in one kernel, read straight from the
//! NHWC input and output gradient through their strides.
//!
//! The fallback frames the weight gradient as a convolution of the input by the output
//! gradient with batch and channels swapped. The direct convolution then needs the swapped
//! channel axis, the batch, to be contiguous, so it copies both operands first: three kernels
//! for one gradient. Here each invocation owns one weight element (or a vector of input
//! channels) and sums its products over the batch and the output positions itself. It writes
//! the gradient in the weight's NHWC shape, `[out_channels, kernel_h, kernel_w, in_channels]`,
//! contiguous, which is the layout the direct convolution reads a weight in.

use crate::{
    kernel::utils::{address_type, decompose_linear, shape_divmod},
    ops::{max_vector_size_many, numeric::empty_device_dtype},
    tensor::CubeTensor,
};
use burn_backend::cubecl::dtype_to_storage_type;
use burn_backend::ops::ConvOptions;
use burn_std::Shape;
use cubecl::{
    calculate_cube_count_elemwise,
    prelude::*,
    std::{FastDivmod, tensor::layout::linear::LinearViewMut},
};
use cubek::convolution::components::ConvSetupError;

/// The convolution's parameters, as the kernel is told them.
#[derive(CubeLaunch, CubeType)]
struct WgradArgs {
    conv_stride_0: usize,
    conv_stride_1: usize,
    dilation_0: usize,
    dilation_1: usize,
    padding_0: usize,
    padding_1: usize,
}

/// The `start..end` of output positions whose input position for kernel tap `tap`,
/// `out * stride + tap * dilation - padding`, lies inside `0..size`.
#[cube]
fn output_range(
    tap: usize,
    padding: usize,
    dilation: usize,
    stride: usize,
    size: usize,
    out_size: usize,
) -> (usize, usize) {
    let offset = tap * dilation;
    let start = if padding > offset {
        (padding - offset).div_ceil(stride)
    } else {
        0usize.runtime()
    };
    let end = if size + padding > offset {
        clamp_max((size + padding - offset - 1) / stride + 1, out_size)
    } else {
        0usize.runtime()
    };
    (start, end)
}

#[cube(launch, address_type = "dynamic")]
fn conv2d_weight_grad_direct_kernel<E: Numeric, N: Size>(
    input: &Tensor<Vector<E, N>>,
    out_grad: &Tensor<E>,
    mut output: LinearViewMut<'_, Vector<E, N>>,
    weight_shape: Sequence<FastDivmod<usize>>,
    args: WgradArgs,
    #[define(E)] _dtype: ElemType,
) {
    if ABSOLUTE_POS >= output.shape() {
        terminate!();
    }

    // The vector runs along the input channels, the innermost axis of both the gradient and
    // the input, so `in_c` lands on a multiple of `line`.
    let line = input.vector_size();
    let (_, pos) = decompose_linear(ABSOLUTE_POS * line, &weight_shape);
    let [out_c, tap_y, tap_x, in_c] = *pos else {
        unreachable!()
    };

    let (y_start, y_end) = output_range(
        tap_y,
        args.padding_0,
        args.dilation_0,
        args.conv_stride_0,
        input.shape(1),
        out_grad.shape(1),
    );
    let (x_start, x_end) = output_range(
        tap_x,
        args.padding_1,
        args.dilation_1,
        args.conv_stride_1,
        input.shape(2),
        out_grad.shape(2),
    );

    let in_offset_c = in_c * input.stride(3);
    let grad_offset_c = out_c * out_grad.stride(3);
    let mut sum: Vector<E, N> = Vector::broadcast(E::from_int(0));

    for batch in 0..out_grad.shape(0) {
        let in_offset_b = batch * input.stride(0) + in_offset_c;
        let grad_offset_b = batch * out_grad.stride(0) + grad_offset_c;

        for out_y in y_start..y_end {
            let in_y = out_y * args.conv_stride_0 + tap_y * args.dilation_0 - args.padding_0;
            let in_offset_y = in_offset_b + in_y * input.stride(1);
            let grad_offset_y = grad_offset_b + out_y * out_grad.stride(1);

            for out_x in x_start..x_end {
                let in_x = out_x * args.conv_stride_1 + tap_x * args.dilation_1 - args.padding_1;
                let value = input[(in_offset_y + in_x * input.stride(2)) / line];
                let grad = out_grad[grad_offset_y + out_x * out_grad.stride(2)];
                sum += value * Vector::broadcast(grad);
            }
        }
    }

    output.write(ABSOLUTE_POS, sum);
}

/// The weight gradient of a 2D convolution (`N_DIM` = 2) with one group.
///
/// * `input` - The convolution's input, `[batch, height, width, in_channels]`, any strides
/// * `out_grad` - The gradient of its output, `[batch, out_h, out_w, out_channels]`, any strides
/// * `weight_shape` - `[out_channels, kernel_h, kernel_w, in_channels]`
pub fn conv2d_weight_grad_direct<const N_DIM: usize>(
    input: CubeTensor,
    out_grad: CubeTensor,
    weight_shape: Shape,
    options: &ConvOptions<N_DIM>,
) -> Result<CubeTensor, ConvSetupError> {
    let output = empty_device_dtype(
        input.client.clone(),
        input.device.clone(),
        weight_shape,
        input.dtype,
    );

    // A vector of input channels needs them contiguous in the input, and each of its other
    // strides a multiple of the vector (the helper checks only the smallest), as in the
    // gradient; otherwise one channel an invocation.
    let line = max_vector_size_many(&[&input, &output], 3).max(1);
    let aligned = input
        .meta
        .strides()
        .iter()
        .enumerate()
        .all(|(axis, stride)| axis == 3 || stride % line == 0);
    let line = if aligned { line } else { 1 };

    let working_units = output.meta.num_elements() / line;
    let cube_dim = CubeDim::new(&input.client, working_units);
    let cube_count = calculate_cube_count_elemwise(&input.client, working_units, cube_dim);
    let dtype = input.dtype;
    // Slices: the caller has checked that there are two spatial dimensions.
    let padding = options.padding_begin();
    let (stride, dilation, padding) = (
        options.stride.as_slice(),
        options.dilation.as_slice(),
        padding.as_slice(),
    );

    conv2d_weight_grad_direct_kernel::launch(
        &output.client,
        cube_count,
        cube_dim,
        address_type!(input, out_grad, output),
        line,
        input.into_tensor_arg(),
        out_grad.into_tensor_arg(),
        output.clone().into_linear_view(),
        shape_divmod(&output),
        WgradArgsLaunch::new(
            stride[0],
            stride[1],
            dilation[0],
            dilation[1],
            padding[0],
            padding[1],
        ),
        dtype_to_storage_type(dtype),
    );

    Ok(output)
}
