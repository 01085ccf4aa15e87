//! The GPU kernel that `patches/burn-cubecl` adds, natively on wgpu (lavapipe where there is
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
