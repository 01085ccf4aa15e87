//! The native side: gemm on each shape, one thread.
fn main() {
    for (shape, [m, n, k]) in wasm_gemm_bench::SHAPES.iter().enumerate() {
        let gflops = wasm_gemm_bench::gemm_gflops(shape as u32);
        println!("gemm {m}x{k} · {k}x{n}: {gflops:.1} GFLOP/s");
    }
}
