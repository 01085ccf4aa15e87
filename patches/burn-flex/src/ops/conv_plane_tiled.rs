//! webtrain patch: one input plane's convolution accumulated over tiles of outputs held in
//! registers, for stride 1, dilation 1 and no padding (see PATCH.md, 4).
//!
//! out[oh, ow] += Σ_(kh, kw) W[kh, kw] · X[oh + kh, ow + kw]

use num_traits::Float;

/// Outputs of one row a tile holds: one AVX2 vector of f32.
const LANES: usize = 8;
/// Rows a tile holds: eight independent sums, enough to hide an addition's latency.
const ROWS: usize = 8;

/// Adds the convolution of `in_plane` (rows of `in_w`) by `w_plane` (`kernel_h` × `kernel_w`)
/// to `out_plane` (rows of `out_w`), then `bias` if any, every output's taps added in the order
/// (kh, kw), one multiply and one add each, as `conv_plane_accumulate` and `add_bias` add them:
/// the same sums to the bit.
/// Whole tiles of [`ROWS`] × [`LANES`] outputs are summed in registers and stored once, where
/// the tap-by-tap loop loaded and stored every output once a tap.
#[allow(clippy::extra_unused_type_parameters)]
#[cfg_attr(feature = "simd", macerator::with_simd)]
pub(crate) fn conv_plane_accumulate_valid<
    #[cfg(feature = "simd")] S: macerator::Simd,
    T: Float + Copy,
>(
    out_plane: &mut [T],
    in_plane: &[T],
    w_plane: &[T],
    kernel: [usize; 2],
    in_w: usize,
    out_w: usize,
    bias: Option<T>,
) {
    let [kernel_h, kernel_w] = kernel;
    if out_w == 0 || out_plane.is_empty() {
        return;
    }
    let out_h = out_plane.len() / out_w;
    // Every tile's reads lie inside these bounds, which the tiles then need not check.
    assert!(kernel_h > 0 && kernel_w > 0 && w_plane.len() >= kernel_h * kernel_w);
    let columns = out_w.checked_add(kernel_w - 1);
    assert!(matches!(columns, Some(columns) if columns <= in_w));
    let len = out_h
        .checked_add(kernel_h - 1)
        .and_then(|rows| rows.checked_mul(in_w));
    assert!(matches!(len, Some(len) if len <= in_plane.len()));
    let whole_w = out_w / LANES * LANES;
    let plane = Plane {
        input: in_plane,
        weights: w_plane,
        kernel,
        in_w,
        out_w,
        bias,
    };
    // Tiles of ROWS rows while they fit, then of one.
    let mut oh = 0;
    while oh < out_h {
        let whole = oh + ROWS <= out_h;
        for ow in (0..whole_w).step_by(LANES) {
            match whole {
                true => tile::<ROWS, T>(out_plane, &plane, [oh, ow]),
                false => tile::<1, T>(out_plane, &plane, [oh, ow]),
            }
        }
        oh += if whole { ROWS } else { 1 };
    }
    // The columns past the last whole vector, one output at a time.
    for oh in 0..out_h {
        for ow in whole_w..out_w {
            let mut sum = out_plane[oh * out_w + ow];
            for kh in 0..kernel_h {
                let row = &in_plane[(oh + kh) * in_w + ow..][..kernel_w];
                for (&x, &w) in row.iter().zip(&w_plane[kh * kernel_w..][..kernel_w]) {
                    sum = x * w + sum;
                }
            }
            out_plane[oh * out_w + ow] = match bias {
                Some(bias) => sum + bias,
                None => sum,
            };
        }
    }
}

/// What every tile of one plane reads.
struct Plane<'a, T> {
    input: &'a [T],
    /// `kernel[0]` × `kernel[1]`.
    weights: &'a [T],
    kernel: [usize; 2],
    in_w: usize,
    out_w: usize,
    bias: Option<T>,
}

/// `R` rows of [`LANES`] outputs from (`oh`, `ow`) on: loaded, every tap added, stored. The
/// caller has checked that the input holds every row and column the tile reads.
#[inline(always)]
fn tile<const R: usize, T: Float + Copy>(
    out_plane: &mut [T],
    plane: &Plane<'_, T>,
    [oh, ow]: [usize; 2],
) {
    let Plane {
        input: in_plane,
        weights: w_plane,
        kernel: [kernel_h, kernel_w],
        in_w,
        out_w,
        bias,
    } = *plane;
    let mut sums = [[T::zero(); LANES]; R];
    for (r, sum) in sums.iter_mut().enumerate() {
        sum.copy_from_slice(&out_plane[(oh + r) * out_w + ow..][..LANES]);
    }
    for kh in 0..kernel_h {
        for kw in 0..kernel_w {
            let w = w_plane[kh * kernel_w + kw];
            for (r, sum) in sums.iter_mut().enumerate() {
                let at = (oh + r + kh) * in_w + ow + kw;
                debug_assert!(at + LANES <= in_plane.len());
                // SAFETY: row oh + r + kh < out_h + kernel_h − 1 and column ow + kw + LANES ≤
                // out_w + kernel_w − 1 ≤ in_w, both checked by the caller.
                let x: [T; LANES] = unsafe {
                    in_plane
                        .as_ptr()
                        .add(at)
                        .cast::<[T; LANES]>()
                        .read_unaligned()
                };
                for lane in 0..LANES {
                    sum[lane] = x[lane] * w + sum[lane];
                }
            }
        }
    }
    // The sums are only read from here on, which leaves them in registers until now.
    for (r, sum) in sums.iter().enumerate() {
        let out = &mut out_plane[(oh + r) * out_w + ow..][..LANES];
        for (out, &sum) in out.iter_mut().zip(sum) {
            *out = match bias {
                Some(bias) => sum + bias,
                None => sum,
            };
        }
    }
}
