//! Convolution cases and their reference sums, shared by the kernel tests of the two patched
//! backends (`native/flex_kernels.rs` for burn-flex, `native/cubecl_kernels.rs` and
//! `browser/training.rs` for burn-cubecl).
#![allow(dead_code)]

use burn::tensor::ops::ConvOptions;

/// A small deterministic generator: the cases are the same on every run.
pub struct Cases(pub u64);

impl Cases {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn floats(&mut self, len: usize) -> Vec<f32> {
        (0..len)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .collect()
    }
}

pub struct Conv {
    /// [batch, in_channels, h, w]
    pub input: [usize; 4],
    pub out_channels: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    /// (before, after) on each axis
    pub padding: [(usize, usize); 2],
    pub dilation: [usize; 2],
    pub groups: usize,
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
pub struct Sums(pub Vec<(f64, f64)>);

impl Sums {
    pub fn new(len: usize) -> Self {
        Self(vec![(0.0, 0.0); len])
    }

    pub fn add(&mut self, at: usize, term: f64) {
        self.0[at].0 += term;
        self.0[at].1 += term.abs();
    }

    /// Each of `got` within 2e-5 of its sum's magnitude: a term missed or counted twice is
    /// about magnitude / terms off, far above that.
    pub fn assert_matches(&self, got: &[f32], case: &str) {
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
    pub fn out_size(&self, dim: usize) -> Option<usize> {
        let (before, after) = self.padding[dim];
        let input = self.input[2 + dim] + before + after;
        let span = self.dilation[dim] * (self.kernel[dim] - 1) + 1;
        input
            .checked_sub(span)
            .map(|steps| steps / self.stride[dim] + 1)
    }

    pub fn out_shape(&self) -> [usize; 4] {
        let (oh, ow) = (self.out_size(0).unwrap(), self.out_size(1).unwrap());
        [self.input[0], self.out_channels, oh, ow]
    }

    pub fn weight_shape(&self) -> [usize; 4] {
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
    pub fn forward(&self, x: &[f32], weight: &[f32], bias: &[f32]) -> Sums {
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
    pub fn input_grad(&self, weight: &[f32], g: &[f32]) -> Sums {
        let mut sums = Sums::new(self.input.iter().product());
        self.terms(|t| {
            let term = f64::from(weight[self.weight_at(t)]) * f64::from(g[self.output_at(t)]);
            sums.add(self.input_at(t), term);
        });
        sums
    }

    /// dW[oc, icg, i, j] = Σ input · G over samples and output positions.
    pub fn weight_grad(&self, x: &[f32], g: &[f32]) -> Sums {
        let mut sums = Sums::new(self.weight_shape().iter().product());
        self.terms(|t| {
            let term = f64::from(x[self.input_at(t)]) * f64::from(g[self.output_at(t)]);
            sums.add(self.weight_at(t), term);
        });
        sums
    }

    pub fn options(&self) -> ConvOptions<2> {
        ConvOptions::new_with_padding(self.stride, self.padding, self.dilation, self.groups)
    }

    pub fn describe(&self) -> String {
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
/// large enough to be cut into bands of output rows, lenet-small's first and a plane that
/// leaves partial tiles of rows and columns, then random ones (odd sizes, stride,
/// padding, asymmetric padding, dilation, groups): each with the random values it runs on.
pub fn conv_cases() -> impl Iterator<Item = (Conv, Cases)> {
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
        plain([8, 1, 28, 28], 10, [5, 5]),
        plain([3, 2, 21, 21], 3, [4, 3]),
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

/// `values` of an [n, c, h, w] tensor in [n, h, w, c] order.
pub fn channels_last(values: &[f32], [n, c, h, w]: [usize; 4]) -> Vec<f32> {
    let mut out = Vec::with_capacity(values.len());
    for b in 0..n {
        for y in 0..h {
            for x in 0..w {
                for ch in 0..c {
                    out.push(values[((b * c + ch) * h + y) * w + x]);
                }
            }
        }
    }
    out
}
