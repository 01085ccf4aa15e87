//! The GPU kernel that `patches/burn-cubecl` adds, and its mended `grid_sample`, natively on wgpu (lavapipe where there is
//! no GPU), against plain reference code on random shapes. burn's public call for a weight
//! gradient goes through autotune natively, which may pick another candidate, so this calls
//! burn-cubecl's fixed strategy, the one the browser build always runs.
//! `tests/browser/training.rs` checks the same kernel in the browser through burn's public call.

use burn::backend::wgpu::CubeBackend;
use burn::tensor::{Shape, TensorData};
use burn_backend::ops::FloatTensorOps;
use burn_cubecl::CubeDevice;
use burn_cubecl::cubecl::device::WgpuDeviceKind;
use burn_cubecl::kernel::conv::{ConvStrategy, conv_weight_backward};
use burn_cubecl::ops::into_data_sync;
use webtrain::device::{BackendChoice, select_device};

use crate::conv_cases;
use conv_cases::conv_cases;

/// Each case twice: its tensors laid out [n, c, h, w] in memory, as uploaded (one channel an
/// invocation), and [n, h, w, c], as burn's GPU convolutions write them (a vector of input
/// channels an invocation where their count allows).
#[test]
fn conv2d_weight_gradient_on_wgpu_matches_the_reference_on_random_shapes() {
    // The library sets the wgpu runtime up first, as for training: a process registers it
    // once, and the other tests of this binary select the GPU through the library.
    pollster::block_on(select_device(BackendChoice::Gpu)).expect("a wgpu adapter");
    let device = CubeDevice::wgpu(WgpuDeviceKind::default()).expect("a wgpu adapter");
    let on = |data: &[f32], shape: [usize; 4], channels_last: bool| match channels_last {
        false => CubeBackend::float_from_data(TensorData::new(data.to_vec(), shape), &device),
        true => {
            let [n, c, h, w] = shape;
            let nhwc = TensorData::new(conv_cases::channels_last(data, shape), [n, h, w, c]);
            CubeBackend::float_permute(CubeBackend::float_from_data(nhwc, &device), &[0, 3, 1, 2])
        }
    };
    for (conv, mut values) in conv_cases() {
        let x = values.floats(conv.input.iter().product());
        let g = values.floats(conv.out_shape().iter().product());
        let want = conv.weight_grad(&x, &g);
        for channels_last in [false, true] {
            let grad = conv_weight_backward::<2>(
                on(&x, conv.input, channels_last),
                on(&g, conv.out_shape(), channels_last),
                Shape::from(conv.weight_shape()),
                conv.options(),
                ConvStrategy::Direct,
            )
            .expect("a weight gradient");
            let case = format!("{}, channels last: {channels_last}", conv.describe());
            let got = into_data_sync(grad).try_to_vec::<f32>().unwrap();
            want.assert_matches(&got, &case);
        }
    }
}

/// `grid_sample` reads a grid laid out in any order: one made by swapping a matmul's dims (its
/// coordinates a whole row apart) samples as its contiguous copy does. burn-cubecl 0.22.1 read
/// the y coordinate one element after x, whatever the layout.
#[test]
fn grid_sample_on_wgpu_reads_a_strided_grid_as_a_contiguous_one() {
    use burn::prelude::*;
    use burn::tensor::ops::GridSampleOptions;

    let gpu = pollster::block_on(select_device(BackendChoice::Gpu)).expect("a wgpu adapter");
    let device = gpu.device;
    let n = 3;
    let values = |len: usize, step: f32| (0..len).map(|i| (i as f32 * step).sin()).collect();
    let coordinates: Vec<f32> = values(n * 2 * 784, 0.37);
    // [n, 2, 784] swapped to [n, 784, 2]: x and y 784 elements apart.
    let strided = Tensor::<3>::from_data(TensorData::new(coordinates, [n, 2, 784]), &device)
        .swap_dims(1, 2)
        .reshape([n, 28, 28, 2]);
    let laid_out: Vec<f32> = strided.clone().into_data().iter::<f32>().collect();
    let contiguous = Tensor::<4>::from_data(TensorData::new(laid_out, [n, 28, 28, 2]), &device);
    let images = Tensor::<4>::from_data(
        TensorData::new(values(n * 784, 0.01), [n, 1, 28, 28]),
        &device,
    );
    let sample = |grid: Tensor<4>| -> Vec<f32> {
        let sampled = images
            .clone()
            .grid_sample_2d(grid, GridSampleOptions::default());
        sampled.into_data().iter::<f32>().collect()
    };
    assert_eq!(sample(strided), sample(contiguous));
}
