//! The CPU kernels that `patches/burn-flex` changes, against plain reference code on random
//! shapes (odd sizes, padding, dilation, ceil mode: the patch's fast paths and the general
//! paths both).

use burn::prelude::*;
use burn::tensor::module::{conv2d_weight_backward, max_pool2d_with_indices};
use burn::tensor::ops::{ConvOptions, MaxPoolOptions};

/// A small deterministic generator: the cases are the same on every run.
struct Cases(u64);

impl Cases {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn floats(&mut self, len: usize) -> Vec<f32> {
        (0..len)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .collect()
    }
}

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

    /// Each output's maximum and the index of its first occurrence in its input plane.
    fn reference(&self, x: &[f32]) -> (Vec<f32>, Vec<i64>) {
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
                            if best.is_none_or(|(max, _)| value > max) {
                                best = Some((value, at as i64));
                            }
                        }
                    }
                    let (value, index) = best.expect("every window holds an input");
                    values.push(value);
                    indices.push(index);
                }
            }
        }
        (values, indices)
    }
}

#[test]
fn max_pool2d_with_indices_matches_the_reference_on_random_shapes() {
    let device = Device::flex();
    let mut cases = Cases(0x9E37_79B9_7F4A_7C15);
    let mut whole_windows = 0;
    let mut checked = 0;
    while checked < 300 {
        let kernel = [1 + cases.below(4), 1 + cases.below(4)];
        let pool = Pool {
            shape: [
                1 + cases.below(3),
                1 + cases.below(5),
                1 + cases.below(15),
                1 + cases.below(15),
            ],
            kernel,
            stride: [1 + cases.below(3), 1 + cases.below(3)],
            // Half the cases without padding or dilation: the patch's path.
            padding: match cases.below(2) {
                0 => [0, 0],
                _ => [
                    cases.below(kernel[0] / 2 + 1),
                    cases.below(kernel[1] / 2 + 1),
                ],
            },
            dilation: match cases.below(2) {
                0 => [1, 1],
                _ => [1 + cases.below(2), 1 + cases.below(2)],
            },
            ceil_mode: cases.below(2) == 1,
        };
        let span = |d: usize| pool.dilation[d] * (pool.kernel[d] - 1) + 1;
        if (0..2).any(|d| span(d) > pool.shape[2 + d] + 2 * pool.padding[d]) {
            continue;
        }
        let x = cases.floats(pool.shape.iter().product());
        let input = Tensor::<4>::from_data(TensorData::new(x.clone(), pool.shape), &device);
        let options = MaxPoolOptions::new(pool.kernel)
            .with_stride(pool.stride)
            .with_padding(pool.padding)
            .with_dilation(pool.dilation)
            .with_ceil_mode(pool.ceil_mode);
        let (values, indices) = max_pool2d_with_indices(input, options);
        let (want_values, want_indices) = pool.reference(&x);
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
        assert_eq!(
            values.into_data().try_to_vec::<f32>().unwrap(),
            want_values,
            "{case}"
        );
        let indices = indices
            .into_data()
            .convert::<i64>()
            .try_to_vec::<i64>()
            .unwrap();
        assert_eq!(indices, want_indices, "{case}");
        whole_windows += usize::from(pool.padding == [0, 0] && pool.dilation == [1, 1]);
        checked += 1;
    }
    assert!(whole_windows > 50, "{whole_windows} cases on the fast path");
}

struct Conv {
    /// [batch, in_channels, h, w]
    input: [usize; 4],
    out_channels: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
}

impl Conv {
    fn out_size(&self, dim: usize) -> Option<usize> {
        let input = self.input[2 + dim] + 2 * self.padding[dim];
        let span = self.dilation[dim] * (self.kernel[dim] - 1) + 1;
        input
            .checked_sub(span)
            .map(|steps| steps / self.stride[dim] + 1)
    }

    /// dW[oc, ic, i, j] = Σ over samples and output positions of G[b, oc, oh, ow] times the
    /// input the kernel's (i, j) meets there, summed in f64; with each sum the sum of its terms'
    /// magnitudes, which bounds f32's rounding.
    fn reference(&self, x: &[f32], g: &[f32]) -> Vec<(f32, f32)> {
        let [n, c_in, h, w] = self.input;
        let (oh, ow) = (self.out_size(0).unwrap(), self.out_size(1).unwrap());
        let (in_group, out_group) = (c_in / self.groups, self.out_channels / self.groups);
        let mut grad = Vec::new();
        for oc in 0..self.out_channels {
            for icg in 0..in_group {
                let ic = oc / out_group * in_group + icg;
                for i in 0..self.kernel[0] {
                    for j in 0..self.kernel[1] {
                        let (mut sum, mut magnitude) = (0f64, 0f64);
                        for b in 0..n {
                            for y in 0..oh {
                                for x_out in 0..ow {
                                    let iy = (y * self.stride[0] + i * self.dilation[0]) as isize
                                        - self.padding[0] as isize;
                                    let ix = (x_out * self.stride[1] + j * self.dilation[1])
                                        as isize
                                        - self.padding[1] as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                        continue;
                                    }
                                    let input =
                                        x[((b * c_in + ic) * h + iy as usize) * w + ix as usize];
                                    let out =
                                        g[((b * self.out_channels + oc) * oh + y) * ow + x_out];
                                    let term = f64::from(input) * f64::from(out);
                                    sum += term;
                                    magnitude += term.abs();
                                }
                            }
                        }
                        grad.push((sum as f32, magnitude as f32));
                    }
                }
            }
        }
        grad
    }
}

#[test]
fn conv2d_weight_backward_matches_the_reference_on_random_shapes() {
    let device = Device::flex();
    let mut cases = Cases(0x2545_F491_4F6C_DD1D);
    let mut checked = 0;
    // LeNet's two (batches that make several partials, and one), then random ones.
    let lenet = [
        Conv {
            input: [16, 1, 28, 28],
            out_channels: 20,
            kernel: [5, 5],
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        },
        Conv {
            input: [40, 20, 12, 12],
            out_channels: 50,
            kernel: [5, 5],
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        },
    ];
    let random = std::iter::from_fn(|| {
        let groups = 1 + cases.below(3);
        Some(Conv {
            input: [
                1 + cases.below(12),
                groups * (1 + cases.below(4)),
                1 + cases.below(14),
                1 + cases.below(14),
            ],
            out_channels: groups * (1 + cases.below(5)),
            kernel: [1 + cases.below(4), 1 + cases.below(4)],
            stride: [1 + cases.below(3), 1 + cases.below(3)],
            padding: [cases.below(3), cases.below(3)],
            dilation: [1 + cases.below(2), 1 + cases.below(2)],
            groups,
        })
    });
    let mut values = Cases(7);
    for conv in lenet.into_iter().chain(random) {
        if checked == 150 {
            break;
        }
        let (Some(oh), Some(ow)) = (conv.out_size(0), conv.out_size(1)) else {
            continue;
        };
        let [n, c_in, _, _] = conv.input;
        let weight_shape = [
            conv.out_channels,
            c_in / conv.groups,
            conv.kernel[0],
            conv.kernel[1],
        ];
        let grad_shape = [n, conv.out_channels, oh, ow];
        let x = values.floats(conv.input.iter().product());
        let g = values.floats(grad_shape.iter().product());
        let tensor = |data: Vec<f32>, shape: [usize; 4]| {
            Tensor::<4>::from_data(TensorData::new(data, shape), &device)
        };
        let options = ConvOptions::new(conv.stride, conv.padding, conv.dilation, conv.groups);
        let grad = conv2d_weight_backward(
            tensor(x.clone(), conv.input),
            tensor(vec![0.0; weight_shape.iter().product()], weight_shape),
            tensor(g.clone(), grad_shape),
            options,
        );
        let case = format!(
            "input {:?} out {} kernel {:?} stride {:?} padding {:?} dilation {:?} groups {}",
            conv.input,
            conv.out_channels,
            conv.kernel,
            conv.stride,
            conv.padding,
            conv.dilation,
            conv.groups
        );
        assert_eq!(grad.dims(), weight_shape, "{case}");
        let got = grad.into_data().try_to_vec::<f32>().unwrap();
        let want = conv.reference(&x, &g);
        // A term missed or counted twice is about magnitude / terms off: far above this.
        for (at, (got, (want, magnitude))) in got.iter().zip(&want).enumerate() {
            let tolerance = 2e-5 * magnitude + 1e-7;
            assert!(
                (got - want).abs() <= tolerance,
                "{case}: [{at}] {got} against {want}"
            );
        }
        checked += 1;
    }
}
