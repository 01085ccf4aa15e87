//! GEMM throughput at LeNet's shapes, one thread, natively and in wasm (run.mjs loads the
//! wasm in headless Chromium). Each figure is the median of 21 timed runs after 3.

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "env")]
unsafe extern "C" {
    /// `performance.now()`.
    fn now() -> f64;
}

#[cfg(target_arch = "wasm32")]
fn now_ms() -> f64 {
    unsafe { now() }
}

#[cfg(not(target_arch = "wasm32"))]
fn now_ms() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
}

/// [m, n, k] of dst[m×n] = lhs[m×k]·rhs[k×n] at batch 64: conv2's forward, input gradient and
/// weight gradient over a tile of 8 samples (512 positions), then fc1's three.
pub const SHAPES: [[usize; 3]; 6] = [
    [50, 512, 500],
    [500, 512, 50],
    [50, 500, 512],
    [64, 500, 800],
    [64, 800, 500],
    [800, 500, 64],
];

/// `SHAPES[shape][axis]`, for the page's labels: the shapes are written here only.
#[unsafe(no_mangle)]
pub extern "C" fn shape_dim(shape: u32, axis: u32) -> u32 {
    SHAPES[shape as usize][axis as usize] as u32
}

fn median_ms(mut run: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..24)
        .map(|_| {
            let start = now_ms();
            run();
            now_ms() - start
        })
        .skip(3)
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// gemm 0.19 on `SHAPES[shape]`, row-major operands, GFLOP/s.
#[unsafe(no_mangle)]
pub extern "C" fn gemm_gflops(shape: u32) -> f64 {
    let [m, n, k] = SHAPES[shape as usize];
    let lhs: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
    let rhs: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
    let mut dst = vec![0f32; m * n];
    let ms = median_ms(|| unsafe {
        gemm::gemm(
            m, n, k, dst.as_mut_ptr(), 1, n as isize, false,
            lhs.as_ptr(), 1, k as isize, rhs.as_ptr(), 1, n as isize,
            0.0, 1.0, false, false, false, gemm::Parallelism::None,
        );
    });
    std::hint::black_box(&dst);
    2.0 * (m * n * k) as f64 / ms / 1e6
}

#[cfg(target_arch = "wasm32")]
mod simd {
    use core::arch::wasm32::*;

    fn sum_lanes(vectors: &[v128]) -> f64 {
        let total = vectors.iter().fold(f32x4_splat(0.0), |sum, v| f32x4_add(sum, *v));
        let lanes = [
            f32x4_extract_lane::<0>(total),
            f32x4_extract_lane::<1>(total),
            f32x4_extract_lane::<2>(total),
            f32x4_extract_lane::<3>(total),
        ];
        lanes.iter().map(|&lane| lane as f64).sum()
    }

    /// a·b + c as simd128 computes it (two roundings), or as one relaxed fused multiply-add.
    #[inline(always)]
    fn madd(relaxed: bool, a: v128, b: v128, c: v128) -> v128 {
        match relaxed {
            true => f32x4_relaxed_madd(a, b, c),
            false => f32x4_add(c, f32x4_mul(a, b)),
        }
    }

    /// The register-only peak, GFLOP/s: 12 independent chains of multiply-adds.
    #[unsafe(no_mangle)]
    #[target_feature(enable = "simd128,relaxed-simd")]
    pub fn peak_gflops(relaxed: u32, rounds: u32) -> f64 {
        let (a, b) = (f32x4_splat(0.9999), f32x4_splat(1e-7));
        let mut acc = [f32x4_splat(1.0); 12];
        let start = super::now_ms();
        for _ in 0..rounds {
            for x in acc.iter_mut() {
                *x = madd(relaxed == 1, *x, a, b);
            }
        }
        let ms = super::now_ms() - start;
        let keep = sum_lanes(&acc) * 1e-30; // every accumulator is used: none is optimised out
        rounds as f64 * 12.0 * 8.0 / ms / 1e6 + keep
    }

    /// A 12×4 GEMM microkernel's inner loop over packed panels (lhs k×12, rhs k×4, k = 512),
    /// `panels` times, GFLOP/s: the best a plain simd128 GEMM could do, packing not counted.
    #[unsafe(no_mangle)]
    #[target_feature(enable = "simd128,relaxed-simd")]
    pub fn microkernel_gflops(relaxed: u32, panels: u32) -> f64 {
        const K: usize = 512;
        let lhs: Vec<f32> = (0..K * 12).map(|i| (i % 13) as f32 * 0.01).collect();
        let rhs: Vec<f32> = (0..K * 4).map(|i| (i % 7) as f32 * 0.01).collect();
        let mut acc = [f32x4_splat(0.0); 12];
        let start = super::now_ms();
        for _ in 0..panels {
            for (a, b) in lhs.chunks_exact(12).zip(rhs.chunks_exact(4)) {
                let a = unsafe {
                    [0, 4, 8].map(|at| v128_load(a.as_ptr().add(at) as *const v128))
                };
                for (j, b) in b.iter().enumerate() {
                    let b = f32x4_splat(*b);
                    for (i, a) in a.iter().enumerate() {
                        acc[j * 3 + i] = madd(relaxed == 1, *a, b, acc[j * 3 + i]);
                    }
                }
            }
            // Carried into the next panel, so that no panel is computed once for all.
            acc = acc.map(|x| f32x4_mul(x, f32x4_splat(0.5)));
        }
        let ms = super::now_ms() - start;
        let keep = sum_lanes(&acc) * 1e-30;
        panels as f64 * K as f64 * 12.0 * 4.0 * 2.0 / ms / 1e6 + keep
    }
}
