//! Where the digits lie: points (a layer's activations of test digits, one row each) projected
//! on their first two principal axes, as numpy's `np.linalg.svd` of the centred points finds
//! them. The axes are the top two eigenvectors of the points' scatter matrix, or, with fewer
//! points than dimensions, of their Gram matrix (the smaller of the two), found by subspace
//! iteration: lenet's fc1 gives 1,000 points of 500 values, whose 500×500 scatter matrix is
//! multiplied by a block of a few vectors a few dozen times, not decomposed whole.

use thiserror::Error;

/// Vectors iterated together: more than the two wanted, so that the second converges as fast
/// as the gap to the ones beyond allows.
const BLOCK: usize = 6;
const MAX_ITERATIONS: usize = 3000;
/// How far the two axes may still move between iterations once found.
const TOLERANCE: f64 = 1e-13;

#[derive(Clone, Debug, PartialEq)]
pub struct Projection {
    /// The two axes, unit vectors in the points' space; each one's largest component positive.
    pub axes: [Vec<f64>; 2],
    /// The share of the points' variance along each axis.
    pub explained: [f64; 2],
    /// Each point, centred, along the two axes.
    pub points: Vec<[f64; 2]>,
}

#[derive(Debug, Error, PartialEq)]
pub enum ProjectionError {
    #[error("{values} values do not make rows of {dims}")]
    Shape { values: usize, dims: usize },
    #[error("a projection needs at least 2 points and 2 dimensions, not {points} of {dims}")]
    TooSmall { points: usize, dims: usize },
    #[error("a point has a value that is not a number")]
    NotFinite,
}

/// `values`, rows of `dims`, on their first two principal axes.
pub fn principal_plane(values: &[f32], dims: usize) -> Result<Projection, ProjectionError> {
    if dims == 0 || !values.len().is_multiple_of(dims) {
        return Err(ProjectionError::Shape {
            values: values.len(),
            dims,
        });
    }
    let points = values.len() / dims;
    if points < 2 || dims < 2 {
        return Err(ProjectionError::TooSmall { points, dims });
    }
    if values.iter().any(|v| !v.is_finite()) {
        return Err(ProjectionError::NotFinite);
    }
    let centred = centred(values, dims);
    let row = |i: usize| &centred[i * dims..(i + 1) * dims];
    let total: f64 = centred.iter().map(|v| v * v).sum();
    // The smaller of the scatter matrix XᵀX (dims²) and the Gram matrix XXᵀ (points²): the
    // same nonzero eigenvalues, and either's eigenvectors give the other's.
    let axes = match dims <= points {
        true => {
            let scatter = symmetric(dims, |a, b| {
                (0..points).map(|i| row(i)[a] * row(i)[b]).sum()
            });
            top_two(&scatter, dims)
        }
        false => {
            let gram = symmetric(points, |i, j| dot(row(i), row(j)));
            // v = Xᵀu / ‖Xᵀu‖ for each eigenvector u of XXᵀ.
            top_two(&gram, points).map(|u| {
                let v: Vec<f64> = (0..dims)
                    .map(|d| (0..points).map(|i| u[i] * row(i)[d]).sum())
                    .collect();
                normalised(v)
            })
        }
    };
    let axes = axes.map(|axis| {
        let largest = axis
            .iter()
            .fold(0.0_f64, |m, v| if v.abs() > m.abs() { *v } else { m });
        match largest < 0.0 {
            true => axis.iter().map(|v| -v).collect(),
            false => axis,
        }
    });
    let points: Vec<[f64; 2]> = (0..points)
        .map(|i| [dot(row(i), &axes[0]), dot(row(i), &axes[1])])
        .collect();
    let along = |k: usize| points.iter().map(|p| p[k] * p[k]).sum::<f64>();
    let explained = match total > 0.0 {
        true => [along(0) / total, along(1) / total],
        false => [0.0, 0.0],
    };
    Ok(Projection {
        axes,
        explained,
        points,
    })
}

/// The rows less their mean, in f64.
fn centred(values: &[f32], dims: usize) -> Vec<f64> {
    let points = values.len() / dims;
    let mut mean = vec![0.0; dims];
    for row in values.chunks(dims) {
        for (m, v) in mean.iter_mut().zip(row) {
            *m += f64::from(*v);
        }
    }
    mean.iter_mut().for_each(|m| *m /= points as f64);
    values
        .chunks(dims)
        .flat_map(|row| row.iter().zip(&mean).map(|(v, m)| f64::from(*v) - m))
        .collect()
}

/// The n×n symmetric matrix whose (a, b) entry is `entry(a, b)`, row-major.
fn symmetric(n: usize, entry: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    let mut matrix = vec![0.0; n * n];
    for a in 0..n {
        for b in a..n {
            let value = entry(a, b);
            matrix[a * n + b] = value;
            matrix[b * n + a] = value;
        }
    }
    matrix
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn normalised(mut v: Vec<f64>) -> Vec<f64> {
    let norm = dot(&v, &v).sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// The unit eigenvectors of the two largest eigenvalues of the symmetric positive
/// semi-definite n×n `matrix`: subspace iteration on a block of vectors, each round
/// orthonormalised and rotated to the block's own eigenvectors (Rayleigh–Ritz).
fn top_two(matrix: &[f64], n: usize) -> [Vec<f64>; 2] {
    let width = BLOCK.min(n);
    // A fixed start, spread over every coordinate, so that no axis is missed.
    let mut block: Vec<Vec<f64>> = (0..width)
        .map(|k| {
            (0..n)
                .map(|i| (((i * 7919 + k * 104_729) % 1009) as f64 / 1009.0) - 0.5)
                .collect()
        })
        .collect();
    orthonormalise(&mut block);
    let mut previous: Option<[Vec<f64>; 2]> = None;
    for _ in 0..MAX_ITERATIONS {
        let mut next: Vec<Vec<f64>> = block.iter().map(|v| times(matrix, n, v)).collect();
        orthonormalise(&mut next);
        block = rayleigh_ritz(matrix, n, next);
        let found = [block[0].clone(), block[1].clone()];
        if let Some(before) = &previous {
            let moved = (0..2)
                .map(|k| 1.0 - dot(&found[k], &before[k]).abs())
                .fold(0.0, f64::max);
            if moved < TOLERANCE {
                return found;
            }
        }
        previous = Some(found);
    }
    [block[0].clone(), block[1].clone()]
}

fn times(matrix: &[f64], n: usize, v: &[f64]) -> Vec<f64> {
    matrix.chunks(n).map(|row| dot(row, v)).collect()
}

/// Modified Gram–Schmidt, twice over for accuracy; a vector that vanishes is replaced by a
/// coordinate axis made orthogonal to the others.
fn orthonormalise(block: &mut [Vec<f64>]) {
    for _ in 0..2 {
        for k in 0..block.len() {
            let (done, rest) = block.split_at_mut(k);
            let v = &mut rest[0];
            for u in done.iter() {
                let along = dot(u, v);
                v.iter_mut().zip(u).for_each(|(x, y)| *x -= along * y);
            }
            let norm = dot(v, v).sqrt();
            match norm > 1e-300 {
                true => v.iter_mut().for_each(|x| *x /= norm),
                false => {
                    let axis = k % v.len();
                    v.iter_mut().for_each(|x| *x = 0.0);
                    v[axis] = 1.0;
                }
            }
        }
    }
}

/// The block rotated to the eigenvectors of its projection QᵀAQ, largest eigenvalue first.
fn rayleigh_ritz(matrix: &[f64], n: usize, block: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    let width = block.len();
    let applied: Vec<Vec<f64>> = block.iter().map(|v| times(matrix, n, v)).collect();
    let small = symmetric(width, |a, b| dot(&block[a], &applied[b]));
    let (values, vectors) = jacobi(small, width);
    let mut order: Vec<usize> = (0..width).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    order
        .into_iter()
        .map(|k| {
            (0..n)
                .map(|i| {
                    (0..width)
                        .map(|j| block[j][i] * vectors[j * width + k])
                        .sum()
                })
                .collect()
        })
        .collect()
}

/// The eigenvalues and eigenvectors (columns) of a small symmetric matrix, by Jacobi rotations.
fn jacobi(mut a: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = symmetric(n, |i, j| if i == j { 1.0 } else { 0.0 });
    for _ in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * n + j] * a[i * n + j])
            .sum();
        if off < 1e-30 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() < 1e-300 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (akp, akq) = (a[k * n + p], a[k * n + q]);
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[p * n + k], a[q * n + k]);
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize)]
    struct Fixture {
        cases: Vec<Case>,
    }

    /// numpy's answer for one set of points.
    #[derive(Deserialize)]
    struct Case {
        name: String,
        dims: usize,
        values: Vec<f32>,
        axes: Vec<Vec<f64>>,
        projected: Vec<[f64; 2]>,
        explained: [f64; 2],
    }

    fn cases() -> Vec<Case> {
        let json = include_str!("../../tests/fixtures/numpy_pca.json");
        serde_json::from_str::<Fixture>(json).unwrap().cases
    }

    #[test]
    fn the_axes_and_points_are_numpys_within_1e_4_signs_aside() {
        for case in cases() {
            let found = principal_plane(&case.values, case.dims).unwrap();
            for k in 0..2 {
                // numpy's sign is its own: compare with the sign that fits.
                let sign = dot(&found.axes[k], &case.axes[k]).signum();
                let axis_gap = found.axes[k]
                    .iter()
                    .zip(&case.axes[k])
                    .map(|(a, b)| (a - sign * b).abs())
                    .fold(0.0, f64::max);
                assert!(axis_gap <= 1e-4, "{}: axis {k} {axis_gap} off", case.name);
                let point_gap = found
                    .points
                    .iter()
                    .zip(&case.projected)
                    .map(|(a, b)| (a[k] - sign * b[k]).abs())
                    .fold(0.0, f64::max);
                assert!(point_gap <= 1e-4, "{}: points {point_gap} off", case.name);
                let share = (found.explained[k] - case.explained[k]).abs();
                assert!(share <= 1e-6, "{}: explained {share} off", case.name);
            }
        }
    }

    #[test]
    fn signs_are_fixed_and_bad_input_is_refused() {
        let case = &cases()[0];
        let found = principal_plane(&case.values, case.dims).unwrap();
        for axis in &found.axes {
            let largest = axis
                .iter()
                .fold(0.0_f64, |m, v| if v.abs() > m.abs() { *v } else { m });
            assert!(largest > 0.0);
        }
        assert_eq!(
            principal_plane(&[1.0; 7], 2),
            Err(ProjectionError::Shape { values: 7, dims: 2 })
        );
        assert_eq!(
            principal_plane(&[1.0, 2.0], 2),
            Err(ProjectionError::TooSmall { points: 1, dims: 2 })
        );
        assert_eq!(
            principal_plane(&[1.0, f32::NAN, 2.0, 3.0], 2),
            Err(ProjectionError::NotFinite)
        );
        // All points alike: no variance, axes still unit vectors, every point at the origin.
        let flat = principal_plane(&[1.0; 12], 3).unwrap();
        assert_eq!(flat.explained, [0.0, 0.0]);
        assert!(flat.points.iter().all(|p| p == &[0.0, 0.0]));
    }
}
