//! webtrain patch: 2D convolution, its forward pass and both gradients, as im2col GEMMs over
//! groups of samples (see PATCH.md).
//!
//! flex runs a convolution one sample at a time, and its two gradients through burn-backend's
//! defaults (a transposed convolution, one sample at a time, and a convolution with batch and
//! channels swapped). For small images that makes GEMMs too small to run well: one LeNet conv2
//! sample has 64 output positions. Here a tile of work is a group of whole samples with about
//! `TARGET_K` output positions between them, or, for large images, a band of one sample's
//! output rows; each tile's input patches are gathered (im2col) into one matrix, so each GEMM
//! sees hundreds of positions and the patch buffer stays bounded whatever the image size.
//!
//! Every GEMM writes its product and plain code adds it where it goes, the same code natively
//! and in wasm. gemm itself rounds differently there (its x86 kernels fuse each multiply-add,
//! its wasm ones do not), so webtrain's two CPU engines agree closely, not bit for bit.

pub mod forward;
pub mod input_grad;
pub mod weight_grad;

use alloc::vec;
use alloc::vec::Vec;
use core::ops::{Add, Range};

use burn_backend::ops::ConvOptions;

/// Output positions a tile aims for: one GEMM's columns.
const TARGET_K: usize = 512;

/// The element types the GEMMs run in; f16 and bf16 go through f32.
pub trait Float:
    burn_backend::Element + bytemuck::Pod + Copy + Default + Add<Output = Self> + Send + Sync + 'static
{
    fn one() -> Self;
}

impl Float for f32 {
    fn one() -> Self {
        1.0
    }
}

impl Float for f64 {
    fn one() -> Self {
        1.0
    }
}

/// The sizes and options of one 2D convolution.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    pub batch: usize,
    pub in_channels: usize,
    pub in_h: usize,
    pub in_w: usize,
    pub out_channels: usize,
    pub out_h: usize,
    pub out_w: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// Padding before the first row and column (after them only changes the output's size).
    pub padding: [usize; 2],
    pub groups: usize,
}

impl Dims {
    /// The sizes of a convolution of an input of `[batch, in_channels, in_h, in_w]` with a
    /// weight of `[out_channels, _, kernel_h, kernel_w]`, its output size from the options.
    /// `None` when the kernel does not fit in the padded input.
    pub fn forward(x: [usize; 4], weight: [usize; 4], options: &ConvOptions<2>) -> Option<Self> {
        let [batch, in_channels, in_h, in_w] = x;
        let [out_channels, _, kernel_h, kernel_w] = weight;
        let out_size = |dim: usize, input: usize, kernel: usize| {
            let (begin, end) = options.padding[dim];
            let span = options.dilation[dim] * kernel.checked_sub(1)? + 1;
            let steps = (input + begin + end).checked_sub(span)?;
            Some(steps / options.stride[dim] + 1)
        };
        let dims = Self::with_output(
            x,
            weight,
            [out_size(0, in_h, kernel_h)?, out_size(1, in_w, kernel_w)?],
            options,
        );
        (batch > 0 && in_channels > 0 && out_channels > 0).then_some(dims)
    }

    /// The sizes of a convolution whose output is known to be `[out_h, out_w]`.
    pub fn with_output(
        x: [usize; 4],
        weight: [usize; 4],
        [out_h, out_w]: [usize; 2],
        options: &ConvOptions<2>,
    ) -> Self {
        Self {
            batch: x[0],
            in_channels: x[1],
            in_h: x[2],
            in_w: x[3],
            out_channels: weight[0],
            out_h,
            out_w,
            kernel: [weight[2], weight[3]],
            stride: options.stride,
            dilation: options.dilation,
            padding: options.padding_begin(),
            groups: options.groups,
        }
    }

    /// Output positions of one sample.
    pub fn positions(&self) -> usize {
        self.out_h * self.out_w
    }

    pub fn in_plane(&self) -> usize {
        self.in_h * self.in_w
    }

    /// Rows of the patch matrix: input channels times the kernel's positions.
    pub fn rows(&self) -> usize {
        self.in_channels * self.kernel[0] * self.kernel[1]
    }

    /// Rows of the patch matrix that one group of channels reads.
    pub fn group_rows(&self) -> usize {
        self.rows() / self.groups
    }

    pub fn out_per_group(&self) -> usize {
        self.out_channels / self.groups
    }

    /// Samples whose tiles one task runs: enough for `TARGET_K` positions, at least one.
    pub fn chunk_samples(&self) -> usize {
        TARGET_K
            .div_ceil(self.positions().max(1))
            .clamp(1, self.batch.max(1))
    }

    /// Output rows of one sample in a tile, when a sample alone has more than `TARGET_K`.
    fn band_rows(&self) -> usize {
        (TARGET_K / self.out_w.max(1)).clamp(1, self.out_h.max(1))
    }

    /// The most output positions a tile holds: the GEMMs' widest `k`.
    pub fn max_tile_len(&self) -> usize {
        match self.positions() > TARGET_K {
            true => self.band_rows() * self.out_w,
            false => self.chunk_samples() * self.positions(),
        }
    }

    /// The tiles of a range of samples, in order: the whole range at once, or each sample's
    /// bands of output rows when a sample alone has more than `TARGET_K` positions.
    pub fn tiles(&self, samples: Range<usize>) -> impl Iterator<Item = Tile> {
        let (out_h, end) = (self.out_h, samples.end);
        let (per_tile, rows) = match self.positions() > TARGET_K {
            true => (1, self.band_rows()),
            false => (samples.len().max(1), out_h.max(1)),
        };
        samples.step_by(per_tile).flat_map(move |first| {
            (0..out_h).step_by(rows).map(move |start| Tile {
                samples: first..(first + per_tile).min(end),
                out_rows: start..(start + rows).min(out_h),
            })
        })
    }

    /// The columns of the output that kernel column `j` meets inside the input: `[first, end)`.
    fn inside_columns(&self, j: usize) -> Range<usize> {
        let offset = (j * self.dilation[1]) as isize - self.padding[1] as isize;
        let first = match offset >= 0 {
            true => 0,
            false => (-offset as usize).div_ceil(self.stride[1]),
        };
        let end = match offset >= self.in_w as isize {
            true => 0,
            false => ((self.in_w as isize - offset) as usize).div_ceil(self.stride[1]),
        }
        .min(self.out_w);
        first..end.max(first)
    }

    /// The input row that kernel row `i` meets at output row `oh`, if inside the input.
    fn input_row(&self, oh: usize, i: usize) -> Option<usize> {
        let row = (oh * self.stride[0] + i * self.dilation[0]).checked_sub(self.padding[0])?;
        (row < self.in_h).then_some(row)
    }

    /// The input column that kernel column `j` meets at output column `ow` (inside the input).
    fn input_column(&self, ow: usize, j: usize) -> usize {
        ow * self.stride[1] + j * self.dilation[1] - self.padding[1]
    }
}

/// A GEMM's share of the work: some samples' output rows (all of them for a group of samples).
#[derive(Clone, Debug)]
pub(crate) struct Tile {
    pub samples: Range<usize>,
    pub out_rows: Range<usize>,
}

impl Tile {
    /// Output positions of one sample in the tile.
    pub fn sample_len(&self, dims: &Dims) -> usize {
        self.out_rows.len() * dims.out_w
    }

    /// Output positions in the tile: the GEMMs' `k`.
    pub fn len(&self, dims: &Dims) -> usize {
        self.samples.len() * self.sample_len(dims)
    }

    /// Where the tile's rows start in a sample's output plane.
    pub fn plane_offset(&self, dims: &Dims) -> usize {
        self.out_rows.start * dims.out_w
    }
}

/// One task's scratch for its tiles: the patch matrix and a row per output channel.
pub(crate) struct TileBuffers<T> {
    /// [rows, k]: the tile's input patches (forward, weight gradient) or what each kernel
    /// position passes back (input gradient)
    pub columns: Vec<T>,
    /// [out_channels, k]: the tile's outputs (forward) or output gradients (both gradients)
    pub channels: Vec<T>,
}

impl<T: Float> TileBuffers<T> {
    pub fn new(dims: &Dims) -> Self {
        let k = dims.max_tile_len();
        Self {
            columns: vec![T::default(); dims.rows() * k],
            channels: vec![T::default(); dims.out_channels * k],
        }
    }
}

/// Gathers the tile's input patches: `columns[rows, k]` (k = `tile.len()`, samples side by
/// side), zero where a kernel position meets the padding. `x` is the whole input.
pub(crate) fn gather_patches<T: Float>(dims: &Dims, x: &[T], tile: &Tile, columns: &mut [T]) {
    let k = tile.len(dims);
    let sample_len = tile.sample_len(dims);
    for (slot, sample) in tile.samples.clone().enumerate() {
        for ic in 0..dims.in_channels {
            let plane = &x[(sample * dims.in_channels + ic) * dims.in_plane()..][..dims.in_plane()];
            for i in 0..dims.kernel[0] {
                for j in 0..dims.kernel[1] {
                    let row = (ic * dims.kernel[0] + i) * dims.kernel[1] + j;
                    let dst = &mut columns[row * k + slot * sample_len..][..sample_len];
                    gather_patch_row(dims, plane, [i, j], tile.out_rows.clone(), dst);
                }
            }
        }
    }
}

/// The input values kernel position `[i, j]` meets at the output rows `out_rows`.
fn gather_patch_row<T: Float>(
    dims: &Dims,
    plane: &[T],
    [i, j]: [usize; 2],
    out_rows: Range<usize>,
    dst: &mut [T],
) {
    let inside = dims.inside_columns(j);
    let first_input = dims.input_column(inside.start, j);
    for (n, oh) in out_rows.enumerate() {
        let row = &mut dst[n * dims.out_w..][..dims.out_w];
        let Some(ih) = dims.input_row(oh, i).filter(|_| !inside.is_empty()) else {
            row.fill(T::default());
            continue;
        };
        let input = &plane[ih * dims.in_w..][..dims.in_w];
        row[..inside.start].fill(T::default());
        row[inside.end..].fill(T::default());
        let row = &mut row[inside.clone()];
        match dims.stride[1] {
            1 => row.copy_from_slice(&input[first_input..][..row.len()]),
            stride => {
                for (n, value) in row.iter_mut().enumerate() {
                    *value = input[first_input + n * stride];
                }
            }
        }
    }
}

/// Adds a tile's patch matrix (`columns[rows, k]`, as `gather_patches` lays it out) back into
/// the input positions each came from (col2im). `dx` holds the samples from
/// `tile.samples.start - first_sample` on.
pub(crate) fn scatter_patches<T: Float>(
    dims: &Dims,
    columns: &[T],
    tile: &Tile,
    dx: &mut [T],
    first_sample: usize,
) {
    let k = tile.len(dims);
    let sample_len = tile.sample_len(dims);
    for (slot, sample) in tile.samples.clone().enumerate() {
        for ic in 0..dims.in_channels {
            let at = ((sample - first_sample) * dims.in_channels + ic) * dims.in_plane();
            let plane = &mut dx[at..][..dims.in_plane()];
            for i in 0..dims.kernel[0] {
                for j in 0..dims.kernel[1] {
                    let row = (ic * dims.kernel[0] + i) * dims.kernel[1] + j;
                    let src = &columns[row * k + slot * sample_len..][..sample_len];
                    scatter_patch_row(dims, src, [i, j], tile.out_rows.clone(), plane);
                }
            }
        }
    }
}

/// Adds what kernel position `[i, j]` saw at the output rows `out_rows` back to its inputs.
fn scatter_patch_row<T: Float>(
    dims: &Dims,
    src: &[T],
    [i, j]: [usize; 2],
    out_rows: Range<usize>,
    plane: &mut [T],
) {
    let inside = dims.inside_columns(j);
    if inside.is_empty() {
        return;
    }
    let first_input = dims.input_column(inside.start, j);
    for (n, oh) in out_rows.enumerate() {
        let Some(ih) = dims.input_row(oh, i) else {
            continue;
        };
        let values = &src[n * dims.out_w..][inside.clone()];
        let input = &mut plane[ih * dims.in_w..][..dims.in_w];
        match dims.stride[1] {
            1 => {
                for (sum, value) in input[first_input..][..values.len()].iter_mut().zip(values) {
                    *sum = *sum + *value;
                }
            }
            stride => {
                for (n, value) in values.iter().enumerate() {
                    let sum = &mut input[first_input + n * stride];
                    *sum = *sum + *value;
                }
            }
        }
    }
}

/// Copies the tile's share of a `[batch, out_channels, out_h, out_w]` tensor into
/// `dst[out_channels, k]`, samples side by side as in the patch matrix.
pub(crate) fn gather_outputs<T: Float>(dims: &Dims, g: &[T], tile: &Tile, dst: &mut [T]) {
    let k = tile.len(dims);
    let sample_len = tile.sample_len(dims);
    for (slot, sample) in tile.samples.clone().enumerate() {
        for oc in 0..dims.out_channels {
            let at = (sample * dims.out_channels + oc) * dims.positions() + tile.plane_offset(dims);
            dst[oc * k + slot * sample_len..][..sample_len].copy_from_slice(&g[at..][..sample_len]);
        }
    }
}

/// A 4D shape's sizes.
pub(crate) fn dims4(shape: &burn_std::Shape) -> [usize; 4] {
    [shape[0], shape[1], shape[2], shape[3]]
}

/// A GEMM operand: its elements and the distances between consecutive rows and columns.
pub(crate) struct Matrix<'a, T> {
    pub data: &'a [T],
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<T> Matrix<'_, T> {
    /// Whether a `rows × cols` matrix lies inside `data`.
    fn holds(&self, rows: usize, cols: usize) -> bool {
        rows == 0
            || cols == 0
            || (rows - 1) * self.row_stride + (cols - 1) * self.col_stride < self.data.len()
    }
}

/// `dst[m, n]` (row-major) = `lhs[m, depth] · rhs[depth, n]`. `parallel`: let the GEMM use
/// the thread pool (when it is the only work running).
pub(crate) fn gemm<T: Float>(
    dst: &mut [T],
    [m, n, depth]: [usize; 3],
    lhs: Matrix<'_, T>,
    rhs: Matrix<'_, T>,
    parallel: bool,
) {
    assert!(dst.len() >= m * n && lhs.holds(m, depth) && rhs.holds(depth, n));
    if m == 0 || n == 0 {
        return;
    }
    if depth == 0 {
        dst[..m * n].fill(T::default());
        return;
    }
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
    // SAFETY: the asserts above keep every index gemm reads or writes inside the slices.
    unsafe {
        gemm::gemm(
            m,
            n,
            depth,
            dst.as_mut_ptr(),
            1,
            n as isize,
            false,
            lhs.data.as_ptr(),
            lhs.col_stride as isize,
            lhs.row_stride as isize,
            rhs.data.as_ptr(),
            rhs.col_stride as isize,
            rhs.row_stride as isize,
            T::default(),
            T::one(),
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Runs `task` on each chunk of `output` (a chunk per `chunk_samples` samples, `sample_len`
/// elements a sample) with the chunk's first sample and a scratch value made by `scratch`,
/// in parallel where the thread pool allows. `task`'s last argument: whether it runs alone
/// (and may hand its GEMMs the thread pool).
pub(crate) fn for_each_chunk<T, S>(
    output: &mut [T],
    sample_len: usize,
    chunk_samples: usize,
    scratch: impl Fn() -> S + Send + Sync,
    task: impl Fn(&mut S, usize, &mut [T], bool) + Send + Sync,
) where
    T: Send,
{
    let chunk_len = (chunk_samples * sample_len).max(1);
    let alone = output.len() <= chunk_len;
    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        output
            .par_chunks_mut(chunk_len)
            .enumerate()
            .for_each_init(&scratch, |scratch, (n, chunk)| {
                task(scratch, n * chunk_samples, chunk, alone)
            });
    }
    #[cfg(not(feature = "rayon"))]
    {
        let mut scratch = scratch();
        for (n, chunk) in output.chunks_mut(chunk_len).enumerate() {
            task(&mut scratch, n * chunk_samples, chunk, alone);
        }
    }
}
