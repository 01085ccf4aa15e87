//! MNIST: its two splits, read from a folder natively or from the four files' bytes in the
//! browser. The IDX format is `idx`'s; batches for the model are `batcher`'s.

pub mod augment;
pub mod batcher;
pub mod idx;
pub mod mnist_form;
pub mod own_digits;
pub mod resident;

use std::io::Read;
use std::path::{Path, PathBuf};

use thiserror::Error;

pub use idx::{
    IMAGE_PIXELS, IMAGE_SIDE, IdxError, IdxProblem, MAX_IDX_BYTES, inflate, parse_images,
    parse_labels,
};

/// The four files of the MNIST distribution, named as on the original site.
pub const TRAIN_IMAGES: &str = "train-images-idx3-ubyte";
pub const TRAIN_LABELS: &str = "train-labels-idx1-ubyte";
pub const TEST_IMAGES: &str = "t10k-images-idx3-ubyte";
pub const TEST_LABELS: &str = "t10k-labels-idx1-ubyte";
/// MNIST's training images: what a preview counts on before the data is loaded.
pub const MNIST_TRAIN_LEN: usize = 60_000;

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
    #[error("sample {index} is labelled {label}, which is no digit")]
    Label { index: usize, label: u8 },
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("too few digits to hold any out to test: two or more of a digit are needed")]
    FewDigits,
    #[error("MNIST's share (mix_mnist) needs MNIST, which is not loaded")]
    NothingToMix,
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

    /// A split from its images (784 bytes each) and labels, which must agree in count and be
    /// digits.
    pub fn from_parts(images: Vec<u8>, labels: Vec<u8>) -> Result<Self, DataError> {
        if images.len() != labels.len() * IMAGE_PIXELS {
            return Err(DataError::CountMismatch {
                images_file: "images".into(),
                images: images.len() / IMAGE_PIXELS,
                labels_file: "labels".into(),
                labels: labels.len(),
            });
        }
        if let Some((index, &label)) = labels.iter().enumerate().find(|(_, l)| **l > 9) {
            return Err(DataError::Label { index, label });
        }
        Ok(Self { images, labels })
    }

    /// The samples at `indices`, in that order.
    pub fn select(&self, indices: &[usize]) -> Self {
        Self {
            images: indices
                .iter()
                .flat_map(|&i| self.image(i))
                .copied()
                .collect(),
            labels: indices.iter().map(|&i| self.label(i)).collect(),
        }
    }

    /// Adds one sample (784 bytes) at the end; false, and nothing added, when it is no image
    /// or no digit.
    pub fn push(&mut self, label: u8, image: &[u8]) -> bool {
        let fits = image.len() == IMAGE_PIXELS && label <= 9;
        if fits {
            self.images.extend_from_slice(image);
            self.labels.push(label);
        }
        fits
    }

    /// Removes sample `index`, if there is one.
    pub fn remove(&mut self, index: usize) {
        if index < self.len() {
            self.images
                .drain(index * IMAGE_PIXELS..(index + 1) * IMAGE_PIXELS);
            self.labels.remove(index);
        }
    }

    /// This split's samples, then `other`'s.
    pub fn concat(&self, other: &Self) -> Self {
        Self {
            images: [self.images.as_slice(), &other.images].concat(),
            labels: [self.labels.as_slice(), &other.labels].concat(),
        }
    }

    /// The split's images (784 bytes each) and labels.
    pub fn into_parts(self) -> (Vec<u8>, Vec<u8>) {
        (self.images, self.labels)
    }

    /// The split as MNIST's two files: images and labels.
    pub fn to_idx(&self) -> (Vec<u8>, Vec<u8>) {
        (
            idx::write_images(&self.images),
            idx::write_labels(&self.labels),
        )
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
        Ok(Self {
            train: MnistSplit::load(dir, TRAIN_IMAGES, TRAIN_LABELS)?,
            test: MnistSplit::load(dir, TEST_IMAGES, TEST_LABELS)?,
        })
    }

    /// Whether `dir` holds a test split: a user's own digits may come as a training pair alone.
    pub fn has_test_split(dir: &Path) -> bool {
        [TEST_IMAGES.to_string(), format!("{TEST_IMAGES}.gz")]
            .iter()
            .any(|name| dir.join(name).exists())
    }
}

impl MnistSplit {
    /// Reads a split's two files from `dir`, each as `name` or `name.gz`.
    pub fn load(dir: &Path, images: &str, labels: &str) -> Result<Self, DataError> {
        Self::from_idx(
            images,
            &read_idx(dir, images)?,
            labels,
            &read_idx(dir, labels)?,
        )
    }
}

/// The bytes of IDX file `name` in `dir` (or `name.gz`), no further than the limit and a byte:
/// enough to know a file is too large.
fn read_idx(dir: &Path, name: &str) -> Result<Vec<u8>, DataError> {
    let raw = dir.join(name);
    let gz = dir.join(format!("{name}.gz"));
    let path = if raw.exists() || !gz.exists() {
        raw
    } else {
        gz
    };
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::idx::tests::{idx_images, idx_labels};

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
    fn limits_the_samples_a_run_uses() {
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
    }

    #[test]
    fn missing_directory_names_the_command_to_run() {
        let error = Mnist::load_dir(Path::new("/nonexistent/mnist")).unwrap_err();
        assert!(error.to_string().contains("make data"), "{error}");
    }
}
