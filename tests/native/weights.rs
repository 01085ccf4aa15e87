//! Our .safetensors files hold exactly the PyTorch reference models' state_dicts: the same
//! names with the same shapes, in f32 (tests/fixtures/pytorch_state_dicts.py made the fixture).

use burn::prelude::*;
use safetensors::{Dtype, SafeTensors};
use webtrain::config::ModelKind;
use webtrain::model::NetConfig;
use webtrain::weights::to_safetensors;

#[test]
fn names_and_shapes_match_pytorchs_state_dicts() {
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/pytorch_state_dicts.json")).unwrap();
    for kind in [ModelKind::Lenet, ModelKind::LenetSmall] {
        let bytes = to_safetensors(&NetConfig::from(kind).init(&Device::flex(), 1)).unwrap();
        let file = SafeTensors::deserialize(&bytes).unwrap();
        let mut ours: Vec<(String, Vec<usize>)> = file
            .tensors()
            .into_iter()
            .map(|(name, tensor)| {
                assert_eq!(tensor.dtype(), Dtype::F32, "{name}");
                (name, tensor.shape().to_vec())
            })
            .collect();
        let mut pytorch: Vec<(String, Vec<usize>)> =
            serde_json::from_value(fixture[kind.to_string()].clone()).unwrap();
        ours.sort();
        pytorch.sort();
        assert_eq!(ours, pytorch, "{kind}");
    }
}
