//! The CPU kernels that `patches/burn-flex` changes, against plain reference code on random
//! shapes (odd sizes, padding, dilation, ceil mode, groups, images cut into bands: the
//! patch's fast paths and the general paths both).

use burn::prelude::*;
use burn::tensor::module::{conv2d, conv2d_weight_backward, max_pool2d_with_indices};
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
    /// (before, after) on each axis
    padding: [(usize, usize); 2],
    dilation: [usize; 2],
    groups: usize,
}

/// One product of a convolution: sample `b`'s output `[oc, y, x]` takes input `[ic, iy, ix]`
/// times weight `[oc, icg, i, j]`.
struct Term {
    b: usize,
    oc: usize,
    ic: usize,
    icg: usize,
    i: usize,
    j: usize,
    y: usize,
    x: usize,
    iy: usize,
    ix: usize,
}

/// Sums in f64, each with the sum of its terms' magnitudes, which bounds f32's rounding.
struct Sums(Vec<(f64, f64)>);

impl Sums {
    fn new(len: usize) -> Self {
        Self(vec![(0.0, 0.0); len])
    }

    fn add(&mut self, at: usize, term: f64) {
        self.0[at].0 += term;
        self.0[at].1 += term.abs();
    }

    /// Each of `got` within 2e-5 of its sum's magnitude: a term missed or counted twice is
    /// about magnitude / terms off, far above that.
    fn assert_matches(&self, got: &[f32], case: &str) {
        assert_eq!(got.len(), self.0.len(), "{case}");
        for (at, (got, (want, magnitude))) in got.iter().zip(&self.0).enumerate() {
            let tolerance = 2e-5 * magnitude + 1e-7;
            assert!(
                (f64::from(*got) - want).abs() <= tolerance,
                "{case}: [{at}] {got} against {want}"
            );
        }
    }
}

impl Conv {
    fn out_size(&self, dim: usize) -> Option<usize> {
        let (before, after) = self.padding[dim];
        let input = self.input[2 + dim] + before + after;
        let span = self.dilation[dim] * (self.kernel[dim] - 1) + 1;
        input
            .checked_sub(span)
            .map(|steps| steps / self.stride[dim] + 1)
    }

    fn out_shape(&self) -> [usize; 4] {
        let (oh, ow) = (self.out_size(0).unwrap(), self.out_size(1).unwrap());
        [self.input[0], self.out_channels, oh, ow]
    }

    fn weight_shape(&self) -> [usize; 4] {
        let [_, c_in, _, _] = self.input;
        let [kh, kw] = self.kernel;
        [self.out_channels, c_in / self.groups, kh, kw]
    }

    /// Every product the convolution sums that meets the input (not the padding).
    fn terms(&self, mut f: impl FnMut(&Term)) {
        let [n, c_in, h, w] = self.input;
        let [_, _, oh, ow] = self.out_shape();
        let (in_group, out_group) = (c_in / self.groups, self.out_channels / self.groups);
        for b in 0..n {
            for oc in 0..self.out_channels {
                for icg in 0..in_group {
                    let ic = oc / out_group * in_group + icg;
                    for i in 0..self.kernel[0] {
                        for j in 0..self.kernel[1] {
                            for y in 0..oh {
                                for x in 0..ow {
                                    let iy = (y * self.stride[0] + i * self.dilation[0]) as isize
                                        - self.padding[0].0 as isize;
                                    let ix = (x * self.stride[1] + j * self.dilation[1]) as isize
                                        - self.padding[1].0 as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                        continue;
                                    }
                                    let (iy, ix) = (iy as usize, ix as usize);
                                    f(&Term {
                                        b,
                                        oc,
                                        ic,
                                        icg,
                                        i,
                                        j,
                                        y,
                                        x,
                                        iy,
                                        ix,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn input_at(&self, t: &Term) -> usize {
        let [_, c_in, h, w] = self.input;
        ((t.b * c_in + t.ic) * h + t.iy) * w + t.ix
    }

    fn output_at(&self, t: &Term) -> usize {
        let [_, oc, oh, ow] = self.out_shape();
        ((t.b * oc + t.oc) * oh + t.y) * ow + t.x
    }

    fn weight_at(&self, t: &Term) -> usize {
        let [_, icg, kh, kw] = self.weight_shape();
        ((t.oc * icg + t.icg) * kh + t.i) * kw + t.j
    }

    /// out[b, oc, y, x] = bias[oc] + Σ weight · input
    fn forward(&self, x: &[f32], weight: &[f32], bias: &[f32]) -> Sums {
        let [_, oc, oh, ow] = self.out_shape();
        let len = self.out_shape().iter().product();
        let mut sums = Sums::new(len);
        for at in 0..len {
            sums.add(at, f64::from(bias[at / (oh * ow) % oc]));
        }
        self.terms(|t| {
            let term = f64::from(weight[self.weight_at(t)]) * f64::from(x[self.input_at(t)]);
            sums.add(self.output_at(t), term);
        });
        sums
    }

    /// dX[b, ic, iy, ix] = Σ weight · G over the outputs the input reaches.
    fn input_grad(&self, weight: &[f32], g: &[f32]) -> Sums {
        let mut sums = Sums::new(self.input.iter().product());
        self.terms(|t| {
            let term = f64::from(weight[self.weight_at(t)]) * f64::from(g[self.output_at(t)]);
            sums.add(self.input_at(t), term);
        });
        sums
    }

    /// dW[oc, icg, i, j] = Σ input · G over samples and output positions.
    fn weight_grad(&self, x: &[f32], g: &[f32]) -> Sums {
        let mut sums = Sums::new(self.weight_shape().iter().product());
        self.terms(|t| {
            let term = f64::from(x[self.input_at(t)]) * f64::from(g[self.output_at(t)]);
            sums.add(self.weight_at(t), term);
        });
        sums
    }

    fn options(&self) -> ConvOptions<2> {
        ConvOptions::new_with_padding(self.stride, self.padding, self.dilation, self.groups)
    }

    fn describe(&self) -> String {
        format!(
            "input {:?} out {} kernel {:?} stride {:?} padding {:?} dilation {:?} groups {}",
            self.input,
            self.out_channels,
            self.kernel,
            self.stride,
            self.padding,
            self.dilation,
            self.groups
        )
    }
}

/// LeNet's two convolutions (batches of one chunk of samples and of several), two with images
/// large enough to be cut into bands of output rows, then random ones (odd sizes, stride,
/// padding, asymmetric padding, dilation, groups): each with the random values it runs on.
fn conv_cases() -> impl Iterator<Item = (Conv, Cases)> {
    let plain = |input, out_channels, kernel| Conv {
        input,
        out_channels,
        kernel,
        stride: [1, 1],
        padding: [(0, 0); 2],
        dilation: [1, 1],
        groups: 1,
    };
    let fixed = [
        plain([16, 1, 28, 28], 20, [5, 5]),
        plain([40, 20, 12, 12], 50, [5, 5]),
        plain([2, 3, 30, 40], 4, [3, 3]),
        Conv {
            input: [3, 2, 50, 47],
            out_channels: 4,
            kernel: [3, 2],
            stride: [1, 2],
            padding: [(2, 1), (0, 1)],
            dilation: [2, 1],
            groups: 2,
        },
    ];
    let mut cases = Cases(0x2545_F491_4F6C_DD1D);
    let random = std::iter::from_fn(move || {
        let groups = 1 + cases.below(3);
        let mut padding = || {
            let before = cases.below(3);
            let after = match cases.below(3) {
                0 => cases.below(3),
                _ => before,
            };
            (before, after)
        };
        let padding = [padding(), padding()];
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
            padding,
            dilation: [1 + cases.below(2), 1 + cases.below(2)],
            groups,
        })
    });
    fixed
        .into_iter()
        .chain(random)
        .filter(|conv| conv.out_size(0).is_some() && conv.out_size(1).is_some())
        .take(150)
        .enumerate()
        .map(|(n, conv)| (conv, Cases(7 + n as u64)))
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
