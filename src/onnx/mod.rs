//! A trained LeNet as a standard ONNX model, for ONNX Runtime on a server, a phone or in a
//! browser: Conv, Relu, MaxPool, Flatten and Gemm at opset 13, the weights PyTorch's names and
//! layouts (as the safetensors export writes them), MNIST's normalisation inside the graph.
//!
//! The input `image` is [batch, 1, 28, 28] pixels from 0 (paper) to 1 (ink), as torchvision's
//! `ToTensor` gives them; the output `logits` is [batch, 10]. `batch` is named, so any batch
//! size runs. Flatten on NCHW is PyTorch's `view(-1, c·16)`, and Gemm with `transB = 1` takes
//! `fc.weight` as PyTorch stores it.

pub mod proto;

use burn::prelude::Device;
use prost::Message;
use safetensors::SafeTensors;
use thiserror::Error;

use crate::config::ModelKind;
use crate::data::batcher::{PIXEL_MEAN, PIXEL_STD};
use crate::model::Net;
use crate::weights::{WeightsError, first_non_finite, from_safetensors, to_safetensors};
use proto::{
    AttributeProto, AttributeType, Dimension, DimensionValue, FLOAT, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto, TensorShapeProto,
    TensorTypeProto, TypeProto, TypeValue, ValueInfoProto,
};

/// The graph's input and output, and its batch dimension's name.
pub const INPUT: &str = "image";
pub const OUTPUT: &str = "logits";
pub const BATCH: &str = "batch";
/// The operator set: every op here has had its current form since 13, which ONNX Runtime
/// releases of the last years all run.
pub const OPSET: i64 = 13;
/// The IR version of ONNX 1.13, the release of opset 18; runtimes read older IRs.
const IR_VERSION: i64 = 8;

#[derive(Debug, Error)]
pub enum OnnxError {
    #[error(transparent)]
    Weights(#[from] WeightsError),
    #[error("the weights do not read as safetensors: {0}")]
    Unreadable(String),
}

/// The ONNX model of `model` with the weights in `safetensors` (webtrain's or PyTorch's
/// state_dict), encoded: the weights are checked against the model first.
pub fn onnx_model(safetensors: &[u8], model: ModelKind) -> Result<Vec<u8>, OnnxError> {
    // Read as a model, then written back: checked, and in PyTorch's layouts whatever wrote them.
    let net = from_safetensors(safetensors.to_vec(), model, &Device::flex())?;
    onnx_of(&net, model)
}

/// The ONNX model of a network of kind `model`, encoded.
pub fn onnx_of(net: &Net, model: ModelKind) -> Result<Vec<u8>, OnnxError> {
    let canonical = to_safetensors(net)?;
    // A model whose training diverged, from any path (the CLI, the page, the native engine).
    if let Some((tensor, count)) = first_non_finite(&canonical) {
        return Err(WeightsError::NotFinite { tensor, count }.into());
    }
    let tensors =
        SafeTensors::deserialize(&canonical).map_err(|e| OnnxError::Unreadable(e.to_string()))?;
    let mut initializer = Vec::new();
    for (name, view) in tensors.tensors() {
        initializer.push(TensorProto {
            dims: view.shape().iter().map(|&d| d as i64).collect(),
            data_type: FLOAT,
            name,
            raw_data: view.data().to_vec(),
        });
    }
    initializer.sort_by(|a, b| a.name.cmp(&b.name));
    for (name, value) in [("pixel_mean", PIXEL_MEAN), ("pixel_std", PIXEL_STD)] {
        initializer.push(TensorProto {
            dims: vec![1],
            data_type: FLOAT,
            name: name.to_string(),
            raw_data: value.to_le_bytes().to_vec(),
        });
    }
    let classes = dims_of(&initializer, "fc2.bias")[0];
    let graph = GraphProto {
        node: nodes(),
        name: format!("webtrain {model}"),
        initializer,
        doc_string: String::new(),
        input: vec![value_info(INPUT, &[None, Some(1), Some(28), Some(28)])],
        output: vec![value_info(OUTPUT, &[None, Some(classes)])],
    };
    let metadata = [
        ("model", model.to_string()),
        (
            "normalisation",
            format!(
                "inside the graph: (image − {PIXEL_MEAN}) / {PIXEL_STD}; feed pixels from 0 \
                 (paper) to 1 (ink)"
            ),
        ),
    ];
    let model = ModelProto {
        ir_version: IR_VERSION,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: OPSET,
        }],
        producer_name: "webtrain".to_string(),
        producer_version: env!("CARGO_PKG_VERSION").to_string(),
        doc_string: format!("{model}, trained by webtrain: {INPUT} [batch, 1, 28, 28] → {OUTPUT}"),
        graph: Some(graph),
        metadata_props: metadata
            .into_iter()
            .map(|(key, value)| StringStringEntryProto {
                key: key.to_string(),
                value,
            })
            .collect(),
    };
    Ok(model.encode_to_vec())
}

fn dims_of(tensors: &[TensorProto], name: &str) -> Vec<i64> {
    tensors
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.dims.clone())
        .unwrap_or_default()
}

/// The forward pass, PyTorch's: normalise, two convolutions each followed by ReLU and a 2×2
/// max pool, flatten, fc1, ReLU, fc2.
fn nodes() -> Vec<NodeProto> {
    let node =
        |op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>| NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.to_string()],
            name: output.to_string(),
            op_type: op.to_string(),
            attribute,
        };
    let ints = |name: &str, values: &[i64]| AttributeProto {
        name: name.to_string(),
        ints: values.to_vec(),
        r#type: AttributeType::Ints as i32,
        ..AttributeProto::default()
    };
    let int = |name: &str, value: i64| AttributeProto {
        name: name.to_string(),
        i: value,
        r#type: AttributeType::Int as i32,
        ..AttributeProto::default()
    };
    let pool = || vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])];
    let conv = || vec![ints("kernel_shape", &[5, 5])];
    vec![
        node("Sub", &[INPUT, "pixel_mean"], "centred", vec![]),
        node("Div", &["centred", "pixel_std"], "normalised", vec![]),
        node(
            "Conv",
            &["normalised", "conv1.weight", "conv1.bias"],
            "conv1",
            conv(),
        ),
        node("Relu", &["conv1"], "relu1", vec![]),
        node("MaxPool", &["relu1"], "pool1", pool()),
        node(
            "Conv",
            &["pool1", "conv2.weight", "conv2.bias"],
            "conv2",
            conv(),
        ),
        node("Relu", &["conv2"], "relu2", vec![]),
        node("MaxPool", &["relu2"], "pool2", pool()),
        node("Flatten", &["pool2"], "flat", vec![int("axis", 1)]),
        node(
            "Gemm",
            &["flat", "fc1.weight", "fc1.bias"],
            "fc1",
            vec![int("transB", 1)],
        ),
        node("Relu", &["fc1"], "relu3", vec![]),
        node(
            "Gemm",
            &["relu3", "fc2.weight", "fc2.bias"],
            OUTPUT,
            vec![int("transB", 1)],
        ),
    ]
}

/// A float tensor's name and shape, `None` for the batch dimension.
fn value_info(name: &str, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(size) => DimensionValue::DimValue(*size),
                None => DimensionValue::DimParam(BATCH.to_string()),
            }),
        })
        .collect();
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(TensorTypeProto {
                elem_type: FLOAT,
                shape: Some(TensorShapeProto { dim }),
            })),
        }),
        doc_string: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NetConfig;

    #[test]
    fn the_graph_is_pytorchs_forward_with_its_weights() {
        for model in [ModelKind::Lenet, ModelKind::LenetSmall] {
            let net = NetConfig::from(model).init(&Device::flex(), 3);
            let weights = to_safetensors(&net).unwrap();
            let bytes = onnx_model(&weights, model).unwrap();
            let decoded = ModelProto::decode(bytes.as_slice()).unwrap();
            assert_eq!(decoded.opset_import[0].version, OPSET);
            let graph = decoded.graph.unwrap();
            let ops: Vec<&str> = graph.node.iter().map(|n| n.op_type.as_str()).collect();
            assert_eq!(
                ops,
                [
                    "Sub", "Div", "Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool", "Flatten",
                    "Gemm", "Relu", "Gemm"
                ]
            );
            // Every weight, as the safetensors file holds it.
            let tensors = SafeTensors::deserialize(&weights).unwrap();
            for (name, view) in tensors.tensors() {
                let found = graph.initializer.iter().find(|t| t.name == name).unwrap();
                assert_eq!(found.raw_data, view.data(), "{name}");
                let dims: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
                assert_eq!(found.dims, dims, "{name}");
            }
            assert_eq!(graph.input[0].name, INPUT);
            assert_eq!(graph.output[0].name, OUTPUT);
        }
    }

    /// Every weight of a model times NaN: a model whose training diverged.
    struct Diverged;

    impl burn::module::ModuleMapper for Diverged {
        fn map_float<const D: usize>(
            &mut self,
            param: burn::module::Param<burn::tensor::Tensor<D>>,
        ) -> burn::module::Param<burn::tensor::Tensor<D>> {
            param.map(|tensor| tensor.mul_scalar(f32::NAN))
        }
    }

    /// The page's and the native engine's path (a model held in memory), as the CLI's (a file).
    #[test]
    fn a_model_with_non_finite_weights_is_refused() {
        use burn::module::Module;
        let net = NetConfig::from(ModelKind::LenetSmall).init(&Device::flex(), 3);
        let error = onnx_of(&net.map(&mut Diverged), ModelKind::LenetSmall)
            .unwrap_err()
            .to_string();
        assert!(error.contains("NaN or infinite"), "{error}");
    }

    #[test]
    fn weights_of_the_other_model_are_refused() {
        let net = NetConfig::from(ModelKind::LenetSmall).init(&Device::flex(), 3);
        let weights = to_safetensors(&net).unwrap();
        let error = onnx_model(&weights, ModelKind::Lenet)
            .unwrap_err()
            .to_string();
        assert!(error.contains("do not fit lenet"), "{error}");
        let error = onnx_model(&weights[..100], ModelKind::LenetSmall).unwrap_err();
        assert!(!error.to_string().is_empty());
    }
}
