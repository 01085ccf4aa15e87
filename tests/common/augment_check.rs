//! What the GPU's augmentation must show against the CPU's, natively and in the browser alike.

/// `on_gpu` is the CPU's transformed batch `on_cpu` within 10⁻⁴, and `on_cpu` is far from the
/// images as they were (`plain`): they were transformed.
pub fn assert_transformed_alike(on_gpu: &[f32], on_cpu: &[f32], plain: &[f32]) {
    let furthest = on_gpu
        .iter()
        .zip(on_cpu)
        .map(|(g, c)| (g - c).abs())
        .fold(0.0, f32::max);
    assert!(furthest < 1e-4, "{furthest}");
    let moved = plain
        .iter()
        .zip(on_cpu)
        .filter(|(p, c)| (*p - *c).abs() > 0.5);
    assert!(moved.count() > 500);
}
