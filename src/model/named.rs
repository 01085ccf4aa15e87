//! Each float parameter of a module with its path, as PyTorch names it (`conv1.weight`): what
//! the layouts, the optimizer's state and the checkpoints key on. burn's visitors are told
//! when they enter and leave a module; the path is kept here, once. And a model's weights by
//! path: read back from its device, and put into a new model, each checked against it.

use std::collections::BTreeMap;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::TensorData;
use thiserror::Error;

use super::{Layout, Net, NetConfig, pytorch_layout};
use crate::config::ModelKind;
use crate::readback::{ReadbackError, read_together};

/// Why weights by path are not a model's.
#[derive(Debug, Error)]
pub enum NamedWeightsError {
    #[error("{0} is missing")]
    Missing(String),
    #[error("{name} has shape {found:?}, the model needs {expected:?}")]
    Shape {
        name: String,
        found: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("{0} is no parameter of the model")]
    Unexpected(String),
    #[error(transparent)]
    Readback(#[from] ReadbackError),
}

/// Sees each float parameter with its path.
pub(crate) trait VisitNamed {
    fn visit<const D: usize>(&mut self, name: &str, param: &Param<Tensor<D>>);
}

/// Maps each float parameter, given its path.
pub(crate) trait MapNamed {
    fn map<const D: usize>(&mut self, name: &str, param: Param<Tensor<D>>) -> Param<Tensor<D>>;
}

/// Shows `visitor` each float parameter of `module`, in the module's order, with its path.
pub(crate) fn visit_named<M: Module>(module: &M, visitor: &mut impl VisitNamed) {
    module.visit(&mut Named {
        inner: visitor,
        path: Vec::new(),
    });
}

/// `module` with each float parameter mapped by `mapper`, given its path.
pub(crate) fn map_named<M: Module>(module: M, mapper: &mut impl MapNamed) -> M {
    module.map(&mut Named {
        inner: mapper,
        path: Vec::new(),
    })
}

/// A visitor or mapper that keeps the path of the module it is in.
struct Named<'a, T> {
    inner: &'a mut T,
    path: Vec<String>,
}

impl<T> Named<'_, T> {
    fn enter(&mut self, name: &str) {
        self.path.push(name.to_string());
    }

    fn name(&self) -> String {
        self.path.join(".")
    }
}

impl<T: VisitNamed> ModuleVisitor for Named<'_, T> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.enter(name);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let name = self.name();
        self.inner.visit(&name, param);
    }
}

impl<T: MapNamed> ModuleMapper for Named<'_, T> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.enter(name);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let name = self.name();
        self.inner.map(&name, param)
    }
}

/// Every float parameter of `model` by path, flat, in PyTorch's layout, with its shape.
pub(crate) fn flat_parameters(model: &Net) -> Vec<(String, Tensor<1>, Vec<usize>)> {
    let mut parameters = Parameters::default();
    visit_named(model, &mut parameters);
    parameters.found
}

#[derive(Default)]
struct Parameters {
    found: Vec<(String, Tensor<1>, Vec<usize>)>,
}

impl VisitNamed for Parameters {
    fn visit<const D: usize>(&mut self, name: &str, param: &Param<Tensor<D>>) {
        let dims = param.dims().to_vec();
        let tensor = pytorch_layout(name, param.val(), &dims, Layout::Pytorch);
        let flat = tensor.reshape([dims.iter().product::<usize>()]);
        self.found.push((name.to_string(), flat, dims));
    }
}

/// Every parameter of `model` by path, read back from its device in one transfer, without
/// blocking (which WebGPU cannot do).
pub async fn read_weights(model: &Net) -> Result<BTreeMap<String, TensorData>, ReadbackError> {
    let (names, tensors): (Vec<_>, Vec<_>) = flat_parameters(model)
        .into_iter()
        .map(|(name, tensor, dims)| (name, (tensor.inner(), dims)))
        .unzip();
    let (tensors, shapes): (Vec<_>, Vec<_>) = tensors.into_iter().unzip();
    let read = read_together(tensors).await?;
    let data = read
        .into_iter()
        .zip(shapes)
        .map(|(values, dims)| TensorData::new(values, dims));
    Ok(names.into_iter().zip(data).collect())
}

/// A model of `kind` on `device` with `weights` (as [`read_weights`] gives them): every
/// parameter present with its shape, and nothing else.
pub fn model_from_weights(
    kind: ModelKind,
    weights: &BTreeMap<String, TensorData>,
    device: &Device,
) -> Result<Net, NamedWeightsError> {
    let mut assign = AssignWeights {
        weights,
        device,
        used: Vec::new(),
        error: None,
    };
    // Every value is replaced: the seed draws nothing that stays.
    let model = map_named(NetConfig::from(kind).init(device, 0), &mut assign);
    if let Some(error) = assign.error {
        return Err(error);
    }
    let used = assign.used;
    match weights.keys().find(|name| !used.contains(name)) {
        Some(name) => Err(NamedWeightsError::Unexpected(name.clone())),
        None => Ok(model),
    }
}

/// Replaces each parameter's value with the one of its path, keeping its id.
struct AssignWeights<'a> {
    weights: &'a BTreeMap<String, TensorData>,
    device: &'a Device,
    used: Vec<String>,
    error: Option<NamedWeightsError>,
}

impl MapNamed for AssignWeights<'_> {
    fn map<const D: usize>(&mut self, name: &str, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let expected = param.dims().to_vec();
        let found = match self.weights.get(name) {
            Some(data) if data.shape().as_slice() == expected.as_slice() => data,
            Some(data) => {
                self.error.get_or_insert(NamedWeightsError::Shape {
                    name: name.to_string(),
                    found: data.shape().to_vec(),
                    expected,
                });
                return param;
            }
            None => {
                self.error
                    .get_or_insert(NamedWeightsError::Missing(name.to_string()));
                return param;
            }
        };
        let tensor = Tensor::from_data(found.clone(), self.device);
        let tensor = pytorch_layout(name, tensor, &expected, Layout::Ours);
        self.used.push(name.to_string());
        let (id, _, mapper) = param.consume();
        Param::from_mapped_value(id, tensor, mapper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NetConfig;

    struct Names(Vec<String>);

    impl VisitNamed for Names {
        fn visit<const D: usize>(&mut self, name: &str, _param: &Param<Tensor<D>>) {
            self.0.push(name.to_string());
        }
    }

    #[test]
    fn parameters_are_named_as_pytorch_names_them() {
        let net = NetConfig::from(crate::config::ModelKind::Lenet).init(&Device::flex(), 1);
        let mut names = Names(Vec::new());
        visit_named(&net, &mut names);
        let expected = [
            "conv1.bias",
            "conv1.weight",
            "conv2.bias",
            "conv2.weight",
            "fc1.weight",
            "fc1.bias",
            "fc2.weight",
            "fc2.bias",
        ];
        assert_eq!(names.0, expected);
    }
}
