//! Each float parameter of a module with its path, as PyTorch names it (`conv1.weight`): what
//! the layouts, the optimizer's state and the checkpoints key on. burn's visitors are told
//! when they enter and leave a module; the path is kept here, once.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;

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
