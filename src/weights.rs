//! Weights as `.safetensors` with the PyTorch reference model's parameter names and layouts
//! (`conv1.weight` [20, 1, 5, 5], …, `fc1.weight` [500, 800]: PyTorch keeps a Linear weight as
//! [out, in]), so `LeNet().load_state_dict(safetensors.torch.load_file(f))` takes our files and
//! we take its.

use burn::prelude::*;
use burn::store::{BurnToPyTorchAdapter, ModuleSnapshot, PyTorchToBurnAdapter, SafetensorsStore};
use safetensors::{Dtype, SafeTensors};
use thiserror::Error;

use crate::config::ModelKind;
use crate::model::{Layout, Net, NetConfig, model_from_weights, read_weights, relayout};

/// A lenet's weights take 1.7 MB; a file this large is not a LeNet's, and is not read.
pub const MAX_WEIGHTS_BYTES: usize = 16 << 20;

#[derive(Debug, Error)]
pub enum WeightsError {
    #[error("the weights file holds {0} bytes, more than any LeNet's weights")]
    TooLarge(usize),
    #[error("cannot serialise the weights: {0}")]
    Save(String),
    #[error("these weights do not fit {model}: {reason}")]
    Load { model: ModelKind, reason: String },
    #[error(
        "the weights' {tensor} holds {count} {} NaN or infinite: they cannot be trained or evaluated",
        if *.count == 1 { "value that is" } else { "values that are" }
    )]
    NotFinite { tensor: String, count: usize },
}

/// burn's store errors span several lines; the CLI and the page show one.
fn one_line(message: impl ToString) -> String {
    let message = message.to_string();
    let lines: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join("; ")
}

/// The model's weights as a `.safetensors` file, under PyTorch's names and layouts.
pub fn to_safetensors(model: &Net) -> Result<Vec<u8>, WeightsError> {
    let mut store = SafetensorsStore::from_bytes(None).with_to_adapter(BurnToPyTorchAdapter);
    let model = relayout(model.clone(), Layout::Pytorch);
    model
        .save_into(&mut store)
        .map_err(|e| WeightsError::Save(one_line(e)))?;
    store
        .get_bytes()
        .map_err(|e| WeightsError::Save(one_line(e)))
}

/// A copy on the CPU backend of a model on any device, its parameters read back without
/// blocking (WebGPU cannot block): [`to_safetensors`] writes it on any backend.
pub async fn to_cpu(model: &Net, kind: ModelKind) -> Result<Net, WeightsError> {
    let weights = read_weights(model)
        .await
        .map_err(|e| WeightsError::Save(e.to_string()))?;
    model_from_weights(kind, &weights, &Device::flex())
        .map_err(|e| WeightsError::Save(e.to_string()))
}

/// A `model` on `device` with the weights of a `.safetensors` file: every parameter present
/// with its shape, and nothing else, as PyTorch's strict `load_state_dict` wants it.
pub fn from_safetensors(
    bytes: Vec<u8>,
    model: ModelKind,
    device: &Device,
) -> Result<Net, WeightsError> {
    if bytes.len() > MAX_WEIGHTS_BYTES {
        return Err(WeightsError::TooLarge(bytes.len()));
    }
    let mismatch = |reason: String| WeightsError::Load { model, reason };
    // Looked for before the store takes the bytes; reported once they are known to fit.
    let non_finite = first_non_finite(&bytes);
    let mut net = NetConfig::from(model).init(device, 0);
    let mut store =
        SafetensorsStore::from_bytes(Some(bytes)).with_from_adapter(PyTorchToBurnAdapter);
    let result = net
        .load_from(&mut store)
        .map_err(|e| mismatch(one_line(e)))?;
    if !result.unused.is_empty() {
        return Err(mismatch(format!(
            "unexpected tensors {}",
            result.unused.join(", ")
        )));
    }
    match non_finite {
        Some((tensor, count)) => Err(WeightsError::NotFinite { tensor, count }),
        None => Ok(relayout(net, Layout::Ours)),
    }
}

/// The first float tensor, by name, that holds a NaN or an infinity, and how many: in every
/// float type a safetensors file may hold (PyTorch saves half and double precision too).
pub(crate) fn first_non_finite(bytes: &[u8]) -> Option<(String, usize)> {
    let file = SafeTensors::deserialize(bytes).ok()?;
    let mut names = file.names();
    names.sort();
    names.into_iter().find_map(|name| {
        let view = file.tensor(name).ok()?;
        let count = non_finite_values(view.dtype(), view.data());
        (count > 0).then(|| (name.to_string(), count))
    })
}

/// How many of `data`'s values, of type `dtype`, are NaN or infinite: a float's exponent bits
/// all set (or its one NaN pattern, in the 8-bit types without infinities). A double beyond
/// f32's range counts too: the model holds f32, where it is infinite. Integer and boolean
/// tensors hold none.
fn non_finite_values(dtype: Dtype, data: &[u8]) -> usize {
    let count = |width: usize, mask: u64, pattern: u64| {
        data.chunks_exact(width)
            .filter(|b| {
                let mut bits = [0u8; 8];
                bits[..width].copy_from_slice(b);
                u64::from_le_bytes(bits) & mask == pattern
            })
            .count()
    };
    match dtype {
        Dtype::F64 => data
            .chunks_exact(8)
            .filter(|b| {
                let value = f64::from_le_bytes((*b).try_into().unwrap_or_default());
                value.is_nan() || value.abs() > f64::from(f32::MAX)
            })
            .count(),
        Dtype::F32 => count(4, 0x7f80_0000, 0x7f80_0000),
        Dtype::F16 => count(2, 0x7c00, 0x7c00),
        Dtype::BF16 => count(2, 0x7f80, 0x7f80),
        Dtype::F8_E5M2 => count(1, 0x7c, 0x7c),
        Dtype::F8_E4M3 => count(1, 0x7f, 0x7f),
        Dtype::F8_E8M0 => count(1, 0xff, 0xff),
        Dtype::F8_E4M3FNUZ | Dtype::F8_E5M2FNUZ => count(1, 0xff, 0x80),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_values_are_found_in_every_float_type() {
        // Beyond f32's range, a double is infinite in the model.
        let f64s: Vec<u8> = [
            1.0,
            f64::NAN,
            f64::INFINITY,
            -f64::INFINITY,
            f64::MAX,
            -1e300,
        ]
        .iter()
        .chain(&[f64::from(f32::MAX), -f64::from(f32::MAX)])
        .flat_map(|v: &f64| v.to_le_bytes())
        .collect();
        assert_eq!(non_finite_values(Dtype::F64, &f64s), 5);
        let f32s: Vec<u8> = [f32::NAN, 0.0, -f32::INFINITY, f32::MIN_POSITIVE]
            .iter()
            .flat_map(|v: &f32| v.to_le_bytes())
            .collect();
        assert_eq!(non_finite_values(Dtype::F32, &f32s), 2);
        // Half precision: 1.0, +inf, NaN, the largest finite (65504), -inf.
        let f16s: Vec<u8> = [0x3c00u16, 0x7c00, 0x7e00, 0x7bff, 0xfc00]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(non_finite_values(Dtype::F16, &f16s), 3);
        // bfloat16: 1.0, +inf, NaN, the largest finite.
        let bf16s: Vec<u8> = [0x3f80u16, 0x7f80, 0x7fc0, 0x7f7f]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(non_finite_values(Dtype::BF16, &bf16s), 2);
        // 8-bit: E5M2's +inf and NaN; E4M3's two NaNs (it has no infinity); FNUZ's one NaN.
        assert_eq!(
            non_finite_values(Dtype::F8_E5M2, &[0x3c, 0x7c, 0x7e, 0xfc]),
            3
        );
        assert_eq!(
            non_finite_values(Dtype::F8_E4M3, &[0x7e, 0x7f, 0xff, 0x00]),
            2
        );
        assert_eq!(
            non_finite_values(Dtype::F8_E4M3FNUZ, &[0x80, 0x7f, 0x00]),
            1
        );
        assert_eq!(non_finite_values(Dtype::I32, &[0xff; 8]), 0);
    }

    /// Every tensor's name, shape and bytes, in name order: the file's own order and metadata
    /// may differ from one save to the next.
    fn tensors(bytes: &[u8]) -> Vec<(String, Vec<usize>, Vec<u8>)> {
        let file = safetensors::SafeTensors::deserialize(bytes).unwrap();
        let mut tensors: Vec<_> = file
            .tensors()
            .into_iter()
            .map(|(name, view)| (name, view.shape().to_vec(), view.data().to_vec()))
            .collect();
        tensors.sort();
        tensors
    }

    #[test]
    fn round_trip_is_exact() {
        let device = Device::flex();
        for kind in [ModelKind::Lenet, ModelKind::LenetSmall] {
            let net = NetConfig::from(kind).init(&device, 7);
            let bytes = to_safetensors(&net).unwrap();
            let back = from_safetensors(bytes.clone(), kind, &device).unwrap();
            assert_eq!(
                tensors(&to_safetensors(&back).unwrap()),
                tensors(&bytes),
                "{kind}"
            );
        }
    }

    #[test]
    fn the_async_export_writes_what_the_sync_one_does() {
        let net = NetConfig::from(ModelKind::LenetSmall).init(&Device::flex(), 3);
        let copy = pollster::block_on(to_cpu(&net, ModelKind::LenetSmall)).unwrap();
        assert_eq!(
            tensors(&to_safetensors(&copy).unwrap()),
            tensors(&to_safetensors(&net).unwrap())
        );
    }

    #[test]
    fn weights_with_a_nan_or_an_infinity_are_refused() {
        let device = Device::flex();
        let bytes = to_safetensors(&NetConfig::from(ModelKind::LenetSmall).init(&device, 1));
        let mut bytes = bytes.unwrap();
        // The last two values of the file's data (the header is JSON text before it).
        let end = bytes.len();
        bytes[end - 8..end - 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
        bytes[end - 4..].copy_from_slice(&f32::NAN.to_le_bytes());
        let error = from_safetensors(bytes, ModelKind::LenetSmall, &device).unwrap_err();
        assert!(
            matches!(error, WeightsError::NotFinite { count: 2, .. }),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .contains("holds 2 values that are NaN or infinite")
        );
    }

    #[test]
    fn wrong_model_empty_and_random_bytes_are_errors() {
        let device = Device::flex();
        let small = to_safetensors(&NetConfig::from(ModelKind::LenetSmall).init(&device, 1));
        let error = from_safetensors(small.unwrap(), ModelKind::Lenet, &device).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("these weights do not fit lenet: "),
            "{error}"
        );
        for bytes in [
            Vec::new(),
            b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}".to_vec(),
        ] {
            let error = from_safetensors(bytes, ModelKind::Lenet, &device).unwrap_err();
            assert!(matches!(error, WeightsError::Load { .. }), "{error}");
            assert_eq!(error.to_string().lines().count(), 1, "{error}");
        }
    }
}
