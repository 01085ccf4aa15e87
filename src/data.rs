//! MNIST in IDX format, raw or gzip, parsed from bytes so the browser can use it too.

use std::io::Read;
use std::path::{Path, PathBuf};

use burn::prelude::*;
use burn::tensor::TensorData;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use thiserror::Error;

/// Side of an MNIST image in pixels.
pub const IMAGE_SIDE: usize = 28;
pub const IMAGE_PIXELS: usize = IMAGE_SIDE * IMAGE_SIDE;
/// Mean and standard deviation of the MNIST training pixels, as torchvision normalises them.
pub const PIXEL_MEAN: f32 = 0.1307;
pub const PIXEL_STD: f32 = 0.3081;
/// The largest file we inflate: the 60k training images are 47 MB, so anything past this is not
/// MNIST and would only exhaust memory (a gzip bomb).
pub const MAX_IDX_BYTES: u64 = 64 << 20;

const IMAGES_MAGIC: u32 = 0x0000_0803;
const LABELS_MAGIC: u32 = 0x0000_0801;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The four files of the MNIST distribution, named as on the original site.
pub const TRAIN_IMAGES: &str = "train-images-idx3-ubyte";
pub const TRAIN_LABELS: &str = "train-labels-idx1-ubyte";
pub const TEST_IMAGES: &str = "t10k-images-idx3-ubyte";
pub const TEST_LABELS: &str = "t10k-labels-idx1-ubyte";

/// What is wrong with one IDX file.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum IdxProblem {
    #[error("the file is empty")]
    Empty,
    #[error("corrupt gzip data: {0}")]
    Gzip(String),
    #[error("inflates to more than {} MiB, too large for MNIST", MAX_IDX_BYTES >> 20)]
    TooLarge,
    #[error("holds more than {} MiB, too large for MNIST", MAX_IDX_BYTES >> 20)]
    RawTooLarge,
    #[error("truncated header: {found} bytes, an IDX {kind} header needs {needed}")]
    TruncatedHeader {
        kind: &'static str,
        found: usize,
        needed: usize,
    },
    #[error("magic number 0x{found:08x} is not that of an IDX {kind} file (0x{expected:08x})")]
    Magic {
        kind: &'static str,
        found: u32,
        expected: u32,
    },
    #[error("images are {rows}x{cols} pixels, MNIST images are {IMAGE_SIDE}x{IMAGE_SIDE}")]
    Dimensions { rows: u32, cols: u32 },
    #[error(
        "the header announces {count} items ({expected} bytes of data) but the file holds {found} bytes"
    )]
    Length {
        count: u32,
        expected: u64,
        found: usize,
    },
    #[error("the header's dimensions {dims:?} hold more bytes than any file can")]
    Overflow { dims: Vec<u32> },
    #[error("label {label} at index {index} is not a digit 0-9")]
    Label { index: usize, label: u8 },
}

/// An IDX file that could not be used, and why.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{file}: {problem}")]
pub struct IdxError {
    pub file: String,
    pub problem: IdxProblem,
}

#[derive(Debug, Error)]
pub enum DataError {
    #[error(transparent)]
    Idx(#[from] IdxError),
    #[error("{images_file} holds {images} images but {labels_file} holds {labels} labels")]
    CountMismatch {
        images_file: String,
        images: usize,
        labels_file: String,
        labels: usize,
    },
    #[error("MNIST file {} not found (run `make data` to download MNIST into data/mnist)", .path.display())]
    Missing { path: PathBuf },
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Images and labels of one split, kept as bytes: 47 MB for the training set instead of 188 MB
/// of floats; batches are normalised as they are built.
#[derive(Clone, Debug)]
pub struct MnistSplit {
    images: Vec<u8>,
    labels: Vec<u8>,
}

/// The training and test splits.
#[derive(Clone, Debug)]
pub struct Mnist {
    pub train: MnistSplit,
    pub test: MnistSplit,
}

/// A batch ready for the model.
pub struct MnistBatch {
    /// [batch, 1, 28, 28], normalised.
    pub images: Tensor<4>,
    /// [batch], class indices.
    pub targets: Tensor<1, Int>,
}

/// Builds batches of normalised images on one device.
pub struct MnistBatcher {
    device: Device,
    normalised: [f32; 256],
}

/// The bytes of an IDX file, inflated when they are gzip, bounded by [`MAX_IDX_BYTES`].
pub fn inflate(file: &str, bytes: &[u8]) -> Result<Vec<u8>, IdxError> {
    let error = |problem| IdxError {
        file: file.to_string(),
        problem,
    };
    if bytes.is_empty() {
        return Err(error(IdxProblem::Empty));
    }
    if !bytes.starts_with(&GZIP_MAGIC) {
        return match bytes.len() as u64 > MAX_IDX_BYTES {
            true => Err(error(IdxProblem::RawTooLarge)),
            false => Ok(bytes.to_vec()),
        };
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(MAX_IDX_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| error(IdxProblem::Gzip(e.to_string())))?;
    if out.len() as u64 > MAX_IDX_BYTES {
        return Err(error(IdxProblem::TooLarge));
    }
    if out.is_empty() {
        return Err(error(IdxProblem::Empty));
    }
    Ok(out)
}

/// Splits an IDX file into its dimensions and its data, checking that the data is exactly as
/// long as the header says before anything sized by the header is allocated.
fn parse_idx<'a>(
    file: &str,
    bytes: &'a [u8],
    kind: &'static str,
    magic: u32,
    rank: usize,
) -> Result<(Vec<u32>, &'a [u8]), IdxError> {
    let error = |problem| IdxError {
        file: file.to_string(),
        problem,
    };
    let header_len = 4 + 4 * rank;
    if bytes.len() < 4 {
        return Err(error(IdxProblem::TruncatedHeader {
            kind,
            found: bytes.len(),
            needed: header_len,
        }));
    }
    let word = |i: usize| u32::from_be_bytes(bytes[4 * i..4 * i + 4].try_into().expect("4 bytes"));
    if word(0) != magic {
        return Err(error(IdxProblem::Magic {
            kind,
            found: word(0),
            expected: magic,
        }));
    }
    if bytes.len() < header_len {
        return Err(error(IdxProblem::TruncatedHeader {
            kind,
            found: bytes.len(),
            needed: header_len,
        }));
    }
    let dims: Vec<u32> = (1..=rank).map(word).collect();
    let expected = dims
        .iter()
        .try_fold(1u64, |product, &d| product.checked_mul(u64::from(d)))
        .ok_or_else(|| error(IdxProblem::Overflow { dims: dims.clone() }))?;
    let data = &bytes[header_len..];
    if expected != data.len() as u64 {
        return Err(error(IdxProblem::Length {
            count: dims[0],
            expected,
            found: data.len(),
        }));
    }
    Ok((dims, data))
}

/// Parses an IDX3 image file (raw or gzip) of 28x28 images; returns the pixels, one byte each.
pub fn parse_images(file: &str, bytes: &[u8]) -> Result<Vec<u8>, IdxError> {
    let bytes = inflate(file, bytes)?;
    let error = |problem| IdxError {
        file: file.to_string(),
        problem,
    };
    let (dims, data) = parse_idx(file, &bytes, "image", IMAGES_MAGIC, 3)?;
    let (rows, cols) = (dims[1], dims[2]);
    if (rows as usize, cols as usize) != (IMAGE_SIDE, IMAGE_SIDE) {
        return Err(error(IdxProblem::Dimensions { rows, cols }));
    }
    Ok(data.to_vec())
}

/// Parses an IDX1 label file (raw or gzip) of digits 0-9.
pub fn parse_labels(file: &str, bytes: &[u8]) -> Result<Vec<u8>, IdxError> {
    let bytes = inflate(file, bytes)?;
    let (_, data) = parse_idx(file, &bytes, "label", LABELS_MAGIC, 1)?;
    if let Some((index, &label)) = data.iter().enumerate().find(|(_, l)| **l > 9) {
        return Err(IdxError {
            file: file.to_string(),
            problem: IdxProblem::Label { index, label },
        });
    }
    Ok(data.to_vec())
}

impl MnistSplit {
    /// Parses a split from the bytes of its image and label files (raw or gzip).
    pub fn from_idx(
        images_file: &str,
        images: &[u8],
        labels_file: &str,
        labels: &[u8],
    ) -> Result<Self, DataError> {
        let images = parse_images(images_file, images)?;
        let labels = parse_labels(labels_file, labels)?;
        if images.len() / IMAGE_PIXELS != labels.len() {
            return Err(DataError::CountMismatch {
                images_file: images_file.to_string(),
                images: images.len() / IMAGE_PIXELS,
                labels_file: labels_file.to_string(),
                labels: labels.len(),
            });
        }
        Ok(Self { images, labels })
    }

    /// `len` black images, each labelled 0: what a warm-up trains on.
    pub fn blank(len: usize) -> Self {
        Self {
            images: vec![0; len * IMAGE_PIXELS],
            labels: vec![0; len],
        }
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// How many samples a run with this limit uses.
    pub fn len_within(&self, limit: Option<usize>) -> usize {
        limit.map_or(self.len(), |l| l.min(self.len()))
    }

    pub fn image(&self, index: usize) -> &[u8] {
        &self.images[index * IMAGE_PIXELS..(index + 1) * IMAGE_PIXELS]
    }

    pub fn label(&self, index: usize) -> u8 {
        self.labels[index]
    }
}

impl Mnist {
    /// Reads the four MNIST files from `dir`, each as `name` or `name.gz`.
    pub fn load_dir(dir: &Path) -> Result<Self, DataError> {
        let read = |name: &str| -> Result<Vec<u8>, DataError> {
            let raw = dir.join(name);
            let gz = dir.join(format!("{name}.gz"));
            let path = if raw.exists() || !gz.exists() {
                raw
            } else {
                gz
            };
            // No further than the limit and a byte: enough to know a file is too large.
            let mut bytes = Vec::new();
            let read = std::fs::File::open(&path)
                .and_then(|file| file.take(MAX_IDX_BYTES + 1).read_to_end(&mut bytes));
            read.map(|_| bytes).map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => DataError::Missing { path: path.clone() },
                _ => DataError::Io {
                    path: path.clone(),
                    source,
                },
            })
        };
        let split = |images: &str, labels: &str| -> Result<MnistSplit, DataError> {
            MnistSplit::from_idx(images, &read(images)?, labels, &read(labels)?)
        };
        Ok(Self {
            train: split(TRAIN_IMAGES, TRAIN_LABELS)?,
            test: split(TEST_IMAGES, TEST_LABELS)?,
        })
    }
}

/// The order in which an epoch visits the training samples: a shuffle that depends only on the
/// run's seed and the epoch, so every backend sees the same batches.
pub fn epoch_order(len: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    let mut rng = StdRng::seed_from_u64(seed ^ (epoch as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    order.shuffle(&mut rng);
    order
}

impl MnistBatcher {
    pub fn new(device: Device) -> Self {
        let normalised = std::array::from_fn(|p| (p as f32 / 255.0 - PIXEL_MEAN) / PIXEL_STD);
        Self { device, normalised }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The samples at `indices` of `split`, normalised, on the batcher's device.
    pub fn batch(&self, split: &MnistSplit, indices: &[usize]) -> MnistBatch {
        let pixels = indices.iter().flat_map(|&i| split.image(i).iter().copied());
        MnistBatch {
            images: self.normalise(indices.len(), pixels),
            targets: self.batch_targets(split, indices),
        }
    }

    /// The labels at `indices` of `split`, as class indices on the batcher's device.
    pub fn batch_targets(&self, split: &MnistSplit, indices: &[usize]) -> Tensor<1, Int> {
        let labels: Vec<i64> = indices.iter().map(|&i| i64::from(split.label(i))).collect();
        Tensor::from_data(TensorData::new(labels, [indices.len()]), &self.device)
    }

    /// Images of 28x28 bytes each (0 is the background, as in MNIST), normalised, as
    /// [n, 1, 28, 28] on the batcher's device; a last partial image is left out.
    pub fn images(&self, pixels: &[u8]) -> Tensor<4> {
        let n = pixels.len() / IMAGE_PIXELS;
        self.normalise(n, pixels[..n * IMAGE_PIXELS].iter().copied())
    }

    /// `n` images' bytes, normalised straight into the tensor's values: a training batch is
    /// not copied twice.
    fn normalise(&self, n: usize, pixels: impl Iterator<Item = u8>) -> Tensor<4> {
        let values: Vec<f32> = pixels.map(|p| self.normalised[p as usize]).collect();
        Tensor::from_data(
            TensorData::new(values, [n, 1, IMAGE_SIDE, IMAGE_SIDE]),
            &self.device,
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;

    use super::*;

    /// An IDX3 image file with `count` images of `rows`x`cols`, pixel i of image n = n + i.
    pub fn idx_images(count: u32, rows: u32, cols: u32) -> Vec<u8> {
        let mut bytes = IMAGES_MAGIC.to_be_bytes().to_vec();
        for d in [count, rows, cols] {
            bytes.extend(d.to_be_bytes());
        }
        let pixels = (count * rows * cols) as usize;
        bytes.extend((0..pixels).map(|i| (i % 251) as u8));
        bytes
    }

    pub fn idx_labels(labels: &[u8]) -> Vec<u8> {
        let mut bytes = LABELS_MAGIC.to_be_bytes().to_vec();
        bytes.extend((labels.len() as u32).to_be_bytes());
        bytes.extend(labels);
        bytes
    }

    pub fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    fn problem(result: Result<Vec<u8>, IdxError>) -> IdxProblem {
        let error = result.unwrap_err();
        assert_eq!(error.file, "f");
        error.problem
    }

    #[test]
    fn parses_raw_and_gzip_alike() {
        let raw = idx_images(3, 28, 28);
        let parsed = parse_images("f", &raw).unwrap();
        assert_eq!(parsed.len(), 3 * 784);
        assert_eq!(parsed, raw[16..]);
        assert_eq!(parse_images("f", &gzip(&raw)).unwrap(), parsed);
        let labels = idx_labels(&[7, 2, 1]);
        assert_eq!(parse_labels("f", &gzip(&labels)).unwrap(), vec![7, 2, 1]);
    }

    #[test]
    fn rejects_wrong_magic() {
        let labels = idx_labels(&[1, 2]);
        assert_eq!(
            problem(parse_images("f", &labels)),
            IdxProblem::Magic {
                kind: "image",
                found: LABELS_MAGIC,
                expected: IMAGES_MAGIC
            }
        );
        let message = parse_images("train-images", &labels)
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "train-images: magic number 0x00000801 is not that of an IDX image file (0x00000803)"
        );
    }

    #[test]
    fn rejects_empty_and_truncated_files() {
        assert_eq!(problem(parse_images("f", &[])), IdxProblem::Empty);
        let raw = idx_images(2, 28, 28);
        assert!(matches!(
            problem(parse_images("f", &raw[..10])),
            IdxProblem::TruncatedHeader { .. }
        ));
        assert_eq!(
            problem(parse_images("f", &raw[..raw.len() - 1])),
            IdxProblem::Length {
                count: 2,
                expected: 2 * 784,
                found: 2 * 784 - 1
            }
        );
        let gz = gzip(&raw);
        assert!(matches!(
            problem(parse_images("f", &gz[..gz.len() / 2])),
            IdxProblem::Gzip(_)
        ));
    }

    #[test]
    fn rejects_wrong_dimensions_and_labels() {
        assert_eq!(
            problem(parse_images("f", &idx_images(1, 29, 28))),
            IdxProblem::Dimensions { rows: 29, cols: 28 }
        );
        assert_eq!(
            problem(parse_labels("f", &idx_labels(&[3, 10]))),
            IdxProblem::Label {
                index: 1,
                label: 10
            }
        );
    }

    #[test]
    fn rejects_header_claiming_2_pow_31_images_without_allocating() {
        let mut bytes = idx_images(1, 28, 28);
        bytes[4..8].copy_from_slice(&(1u32 << 31).to_be_bytes());
        // 2^31 * 784 bytes would be 1.5 TiB: the check compares with the file's length first.
        assert_eq!(
            problem(parse_images("f", &bytes)),
            IdxProblem::Length {
                count: 1 << 31,
                expected: (1u64 << 31) * 784,
                found: 784
            }
        );
    }

    #[test]
    fn rejects_gzip_bomb() {
        let mut header = IMAGES_MAGIC.to_be_bytes().to_vec();
        for d in [100_000u32, 28, 28] {
            header.extend(d.to_be_bytes());
        }
        header.resize(MAX_IDX_BYTES as usize + 1024, 0);
        assert_eq!(
            problem(parse_images("f", &gzip(&header))),
            IdxProblem::TooLarge
        );
    }

    #[test]
    fn rejects_count_mismatch_between_images_and_labels() {
        let error =
            MnistSplit::from_idx("imgs", &idx_images(3, 28, 28), "lbls", &idx_labels(&[1, 2]))
                .unwrap_err();
        assert_eq!(
            error.to_string(),
            "imgs holds 3 images but lbls holds 2 labels"
        );
    }

    #[test]
    fn limits_and_shuffles_deterministically() {
        let split = MnistSplit::from_idx(
            "i",
            &idx_images(5, 28, 28),
            "l",
            &idx_labels(&[0, 1, 2, 3, 4]),
        )
        .unwrap();
        assert_eq!(
            (
                split.len_within(Some(3)),
                split.len_within(Some(9)),
                split.len_within(None)
            ),
            (3, 5, 5)
        );
        assert_eq!(split.label(2), 2);
        let order = epoch_order(1000, 7, 1);
        assert_eq!(order, epoch_order(1000, 7, 1));
        assert_ne!(order, epoch_order(1000, 7, 2));
        assert_ne!(order, epoch_order(1000, 8, 1));
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn batches_are_normalised() {
        let split =
            MnistSplit::from_idx("i", &idx_images(2, 28, 28), "l", &idx_labels(&[4, 9])).unwrap();
        let batch = MnistBatcher::new(Device::flex()).batch(&split, &[1, 0]);
        assert_eq!(batch.images.dims(), [2, 1, 28, 28]);
        let targets = batch
            .targets
            .into_data()
            .convert::<i64>()
            .try_to_vec::<i64>()
            .unwrap();
        assert_eq!(targets, vec![9, 4]);
        let pixels = batch.images.into_data().try_to_vec::<f32>().unwrap();
        let expected = (split.image(1)[0] as f32 / 255.0 - PIXEL_MEAN) / PIXEL_STD;
        assert!((pixels[0] - expected).abs() < 1e-6);
    }

    #[test]
    fn missing_directory_names_the_command_to_run() {
        let error = Mnist::load_dir(Path::new("/nonexistent/mnist")).unwrap_err();
        assert!(error.to_string().contains("make data"), "{error}");
    }
}
