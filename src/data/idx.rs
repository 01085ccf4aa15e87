//! MNIST's IDX files, raw or gzip, parsed from bytes (the browser has no files) and checked
//! before anything sized by their headers is allocated.

use std::io::Read;

use thiserror::Error;

/// Side of an MNIST image in pixels.
pub const IMAGE_SIDE: usize = 28;
pub const IMAGE_PIXELS: usize = IMAGE_SIDE * IMAGE_SIDE;
/// The largest file we inflate: the 60k training images are 47 MB, so anything past this is not
/// MNIST and would only exhaust memory (a gzip bomb).
pub const MAX_IDX_BYTES: u64 = 64 << 20;

const IMAGES_MAGIC: u32 = 0x0000_0803;
const LABELS_MAGIC: u32 = 0x0000_0801;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

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

/// `images` (784 bytes each) as an IDX image file, as MNIST's own files are laid out.
pub fn write_images(images: &[u8]) -> Vec<u8> {
    let count = (images.len() / IMAGE_PIXELS) as u32;
    let side = IMAGE_SIDE as u32;
    let header = [IMAGES_MAGIC, count, side, side];
    let mut bytes: Vec<u8> = header.iter().flat_map(|n| n.to_be_bytes()).collect();
    bytes.extend_from_slice(&images[..count as usize * IMAGE_PIXELS]);
    bytes
}

/// `labels` as an IDX label file.
pub fn write_labels(labels: &[u8]) -> Vec<u8> {
    let header = [LABELS_MAGIC, labels.len() as u32];
    let mut bytes: Vec<u8> = header.iter().flat_map(|n| n.to_be_bytes()).collect();
    bytes.extend_from_slice(labels);
    bytes
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
    fn written_files_read_back_as_they_were() {
        let images: Vec<u8> = (0..3 * IMAGE_PIXELS).map(|i| (i % 251) as u8).collect();
        let labels = [7, 0, 9];
        assert_eq!(parse_images("i", &write_images(&images)).unwrap(), images);
        assert_eq!(parse_labels("l", &write_labels(&labels)).unwrap(), labels);
        assert_eq!(
            &write_images(&images)[..16],
            &[0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 28, 0, 0, 0, 28]
        );
    }
}
