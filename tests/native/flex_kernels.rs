//! The CPU kernels that `patches/burn-flex` changes, against plain reference code on random
//! shapes (odd sizes, padding, dilation, ceil mode, groups, images cut into bands: the
//! patch's fast paths and the general paths both).

use burn::prelude::*;
use burn::tensor::module::{conv2d, conv2d_weight_backward, max_pool2d_with_indices};
use burn::tensor::ops::MaxPoolOptions;

use crate::conv_cases;
use conv_cases::{Cases, conv_cases};

struct Pool {
    shape: [usize; 4],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
}

impl Pool {
    /// PyTorch's output size: a window may start in the left padding but not past the input.
    fn out_size(&self, dim: usize) -> usize {
        let input = self.shape[2 + dim] + 2 * self.padding[dim];
        let span = self.dilation[dim] * (self.kernel[dim] - 1) + 1;
        let steps = input - span;
        let mut out = match self.ceil_mode {
            true => steps.div_ceil(self.stride[dim]),
            false => steps / self.stride[dim],
        } + 1;
        if self.ceil_mode && (out - 1) * self.stride[dim] >= self.shape[2 + dim] + self.padding[dim]
        {
            out -= 1;
        }
        out
    }

    /// Each output's maximum and the index of its first occurrence in its input plane; none
    /// where a window lies wholly in the padding (dilation can do that), which PyTorch refuses.
    fn reference(&self, x: &[f32]) -> Option<(Vec<f32>, Vec<i64>)> {
        let [n, c, h, w] = self.shape;
        let (oh, ow) = (self.out_size(0), self.out_size(1));
        let (mut values, mut indices) = (Vec::new(), Vec::new());
        for plane in 0..n * c {
            for y in 0..oh {
                for x_out in 0..ow {
                    let mut best: Option<(f32, i64)> = None;
                    for ky in 0..self.kernel[0] {
                        for kx in 0..self.kernel[1] {
                            let iy = (y * self.stride[0] + ky * self.dilation[0]) as isize
                                - self.padding[0] as isize;
                            let ix = (x_out * self.stride[1] + kx * self.dilation[1]) as isize
                                - self.padding[1] as isize;
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                continue;
                            }
                            let at = iy as usize * w + ix as usize;
                            let value = x[plane * h * w + at];
                            // A NaN wins over any number and the last one over another, as
                            // in PyTorch; among equal maxima the first wins.
                            if best.is_none_or(|(max, _)| value > max || value.is_nan()) {
                                best = Some((value, at as i64));
                            }
                        }
                    }
                    let (value, index) = best?;
                    values.push(value);
                    indices.push(index);
                }
            }
        }
        Some((values, indices))
    }
}

#[test]
fn max_pool2d_with_indices_matches_the_reference_on_random_shapes() {
    let device = Device::flex();
    let mut cases = Cases(0x9E37_79B9_7F4A_7C15);
    let (mut whole_windows, mut lenet_windows) = (0, 0);
    let mut checked = 0;
    while checked < 300 {
        // A quarter of the cases are LeNet's 2x2 windows with stride 2: the patch's own row.
        let lenet = cases.below(4) == 0;
        let kernel = match lenet {
            true => [2, 2],
            false => [1 + cases.below(4), 1 + cases.below(4)],
        };
        let pool = Pool {
            shape: [
                1 + cases.below(3),
                1 + cases.below(5),
                1 + cases.below(15),
                1 + cases.below(15),
            ],
            kernel,
            stride: match lenet {
                true => [2, 2],
                false => [1 + cases.below(3), 1 + cases.below(3)],
            },
            // Half the other cases without padding or dilation: the patch's path.
            padding: match lenet || cases.below(2) == 0 {
                true => [0, 0],
                _ => [
                    cases.below(kernel[0] / 2 + 1),
                    cases.below(kernel[1] / 2 + 1),
                ],
            },
            dilation: match lenet || cases.below(2) == 0 {
                true => [1, 1],
                _ => [1 + cases.below(2), 1 + cases.below(2)],
            },
            ceil_mode: cases.below(2) == 1,
        };
        let span = |d: usize| pool.dilation[d] * (pool.kernel[d] - 1) + 1;
        if (0..2).any(|d| span(d) > pool.shape[2 + d] + 2 * pool.padding[d]) {
            continue;
        }
        let mut x = cases.floats(pool.shape.iter().product());
        // A third of the cases in four levels (ties in most windows), a quarter with NaNs.
        if cases.below(3) == 0 {
            x.iter_mut().for_each(|v| *v = (*v * 3.0).round() / 2.0);
        }
        if cases.below(4) == 0 {
            for _ in 0..1 + cases.below(3) {
                let at = cases.below(x.len());
                x[at] = f32::NAN;
            }
        }
        let input = Tensor::<4>::from_data(TensorData::new(x.clone(), pool.shape), &device);
        let options = MaxPoolOptions::new(pool.kernel)
            .with_stride(pool.stride)
            .with_padding(pool.padding)
            .with_dilation(pool.dilation)
            .with_ceil_mode(pool.ceil_mode);
        let (values, indices) = max_pool2d_with_indices(input, options);
        let Some((want_values, want_indices)) = pool.reference(&x) else {
            continue;
        };
        let case = format!(
            "shape {:?} kernel {:?} stride {:?} padding {:?} dilation {:?} ceil {}",
            pool.shape, pool.kernel, pool.stride, pool.padding, pool.dilation, pool.ceil_mode
        );
        let [n, c, _, _] = pool.shape;
        assert_eq!(
            values.dims(),
            [n, c, pool.out_size(0), pool.out_size(1)],
            "{case}"
        );
        let bits = |values: Vec<f32>| values.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(
            bits(values.into_data().try_to_vec::<f32>().unwrap()),
            bits(want_values),
            "{case}"
        );
        let indices = indices
            .into_data()
            .convert::<i64>()
            .try_to_vec::<i64>()
            .unwrap();
        assert_eq!(indices, want_indices, "{case}");
        whole_windows += usize::from(pool.padding == [0, 0] && pool.dilation == [1, 1]);
        let whole = |d: usize| 2 * pool.out_size(d) <= pool.shape[2 + d];
        lenet_windows += usize::from(lenet && whole(0) && whole(1));
        checked += 1;
    }
    assert!(whole_windows > 50, "{whole_windows} cases on the fast path");
    assert!(lenet_windows > 30, "{lenet_windows} cases on the 2x2 row");
}

fn tensor<const D: usize>(data: Vec<f32>, shape: [usize; D]) -> Tensor<D> {
    Tensor::from_data(TensorData::new(data, shape), &Device::flex())
}

#[test]
fn conv2d_matches_the_reference_on_random_shapes() {
    for (conv, mut values) in conv_cases() {
        let x = values.floats(conv.input.iter().product());
        let weight = values.floats(conv.weight_shape().iter().product());
        let bias = values.floats(conv.out_channels);
        let out = conv2d(
            tensor(x.clone(), conv.input),
            tensor(weight.clone(), conv.weight_shape()),
            Some(tensor(bias.clone(), [conv.out_channels])),
            conv.options(),
        );
        let case = conv.describe();
        assert_eq!(out.dims(), conv.out_shape(), "{case}");
        let got = out.into_data().try_to_vec::<f32>().unwrap();
        conv.forward(&x, &weight, &bias).assert_matches(&got, &case);
    }
}

/// Through autodiff: with loss = Σ conv2d(x) · G, the loss's gradient at the output is G.
#[test]
fn conv2d_input_gradient_matches_the_reference_on_random_shapes() {
    let device = Device::flex().autodiff();
    for (conv, mut values) in conv_cases() {
        let x = values.floats(conv.input.iter().product());
        let weight = values.floats(conv.weight_shape().iter().product());
        let g = values.floats(conv.out_shape().iter().product());
        let on = |data: Vec<f32>, shape: [usize; 4]| {
            Tensor::<4>::from_data(TensorData::new(data, shape), &device)
        };
        let input = on(x, conv.input).require_grad();
        let out = conv2d(
            input.clone(),
            on(weight.clone(), conv.weight_shape()),
            None,
            conv.options(),
        );
        let grads = (out * on(g.clone(), conv.out_shape())).sum().backward();
        let case = conv.describe();
        let grad = input.grad(&grads).expect("the input's gradient");
        assert_eq!(grad.dims(), conv.input, "{case}");
        let got = grad.into_data().try_to_vec::<f32>().unwrap();
        conv.input_grad(&weight, &g).assert_matches(&got, &case);
    }
}

#[test]
fn conv2d_weight_backward_matches_the_reference_on_random_shapes() {
    for (conv, mut values) in conv_cases() {
        let x = values.floats(conv.input.iter().product());
        let g = values.floats(conv.out_shape().iter().product());
        let weight_shape = conv.weight_shape();
        let grad = conv2d_weight_backward(
            tensor(x.clone(), conv.input),
            tensor(vec![0.0; weight_shape.iter().product()], weight_shape),
            tensor(g.clone(), conv.out_shape()),
            conv.options(),
        );
        let case = conv.describe();
        assert_eq!(grad.dims(), weight_shape, "{case}");
        let got = grad.into_data().try_to_vec::<f32>().unwrap();
        conv.weight_grad(&x, &g).assert_matches(&got, &case);
    }
}
