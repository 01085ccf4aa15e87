//! A checkpoint's file: `.safetensors`, the weights as `weights.<path>`, each optimizer buffer
//! as `optimizer.<path>.<index>`, the epoch's order as `data.order`, early stopping's best
//! weights as `best.<path>`, and the settings, the position and early stopping's state as JSON
//! in its metadata. Every number read back is checked before it is used.

use std::collections::{BTreeMap, HashMap};

use burn::tensor::{DType, TensorData};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::TrainConfig;
use crate::train::checkpoint::{
    BEST, Checkpoint, CheckpointError, FORMAT, FORMAT_KEY, ORDER, Position, STATE, WEIGHTS,
};
use crate::train::early_stop::EarlyStopState;

/// A lenet checkpoint with Adam takes ~5.5 MB; a file this large is not one of ours.
pub const MAX_CHECKPOINT_BYTES: usize = 32 << 20;

impl Checkpoint {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut tensors: Vec<(String, TensorView<'_>)> = Vec::new();
        for (name, data) in &self.weights {
            tensors.push((format!("{WEIGHTS}{name}"), view(data)));
        }
        for (name, buffers) in &self.optimizer_state {
            for (index, data) in buffers.iter().enumerate() {
                tensors.push((format!("{STATE}{name}.{index}"), view(data)));
            }
        }
        if let Some(best) = &self.early_stop.best {
            for (name, data) in best.weights.iter() {
                tensors.push((format!("{BEST}{name}"), view(data)));
            }
        }
        let order: Vec<u8> = self.order.iter().flat_map(|i| i.to_le_bytes()).collect();
        tensors.push((
            ORDER.to_string(),
            TensorView::new(Dtype::U32, vec![self.order.len()], &order)
                .expect("u32 data fills its shape"),
        ));
        let metadata = HashMap::from([
            (FORMAT_KEY.to_string(), FORMAT.to_string()),
            ("config".to_string(), to_json(&self.config)),
            ("position".to_string(), to_json(&self.position)),
            ("early_stop".to_string(), to_json(&self.early_stop)),
            (
                "optimizer_steps".to_string(),
                self.optimizer_steps.to_string(),
            ),
        ]);
        safetensors::serialize(tensors, Some(metadata)).expect("the tensors fit their shapes")
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CheckpointError> {
        if bytes.len() > MAX_CHECKPOINT_BYTES {
            return Err(CheckpointError::TooLarge(bytes.len()));
        }
        let not_safetensors =
            |e: safetensors::SafeTensorError| CheckpointError::NotSafetensors(e.to_string());
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(not_safetensors)?;
        let metadata = header.metadata().clone().unwrap_or_default();
        if metadata.get(FORMAT_KEY).map(String::as_str) != Some(FORMAT) {
            return Err(CheckpointError::NotACheckpoint);
        }
        let config: TrainConfig = parse(&metadata, "config")?;
        config.validate()?;
        let position: Position = parse(&metadata, "position")?;
        let optimizer_steps: u64 = parse(&metadata, "optimizer_steps")?;
        // Checkpoints from before early stopping have none.
        let mut early_stop: EarlyStopState = match metadata.contains_key("early_stop") {
            true => parse(&metadata, "early_stop")?,
            false => EarlyStopState::default(),
        };
        let mut best = BTreeMap::new();

        let file = SafeTensors::deserialize(bytes).map_err(not_safetensors)?;
        let floats = |name: &str, view: &TensorView<'_>| match view.dtype() {
            Dtype::F32 => Ok(TensorData::from_bytes_vec(
                view.data().to_vec(),
                view.shape().to_vec(),
                DType::F32,
            )),
            _ => Err(CheckpointError::Dtype(name.to_string(), "float32")),
        };
        let mut order = None;
        let mut weights = BTreeMap::new();
        let mut state: BTreeMap<String, BTreeMap<usize, TensorData>> = BTreeMap::new();
        for (name, view) in file.iter() {
            if name == ORDER {
                if view.dtype() != Dtype::U32 || view.shape().len() != 1 {
                    return Err(CheckpointError::Dtype(name.to_string(), "a list of u32"));
                }
                let indices = view.data().chunks_exact(4);
                order = Some(
                    indices
                        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect(),
                );
            } else if let Some(param) = name.strip_prefix(WEIGHTS) {
                weights.insert(param.to_string(), floats(name, &view)?);
            } else if let Some(param) = name.strip_prefix(BEST) {
                best.insert(param.to_string(), floats(name, &view)?);
            } else if let Some((param, index)) = name
                .strip_prefix(STATE)
                .and_then(|rest| rest.rsplit_once('.'))
                .and_then(|(param, index)| Some((param, index.parse::<usize>().ok()?)))
            {
                let buffers = state.entry(param.to_string()).or_default();
                buffers.insert(index, floats(name, &view)?);
            } else {
                return Err(CheckpointError::Unexpected(name.to_string()));
            }
        }
        let mut optimizer_state = BTreeMap::new();
        for (param, buffers) in state {
            // Indices 0..n with none missing.
            if buffers.keys().copied().ne(0..buffers.len()) {
                return Err(CheckpointError::Missing(format!(
                    "a buffer of {STATE}{param}"
                )));
            }
            optimizer_state.insert(param, buffers.into_values().collect());
        }
        match &mut early_stop.best {
            // Checked as the weights are, when the run is restored.
            Some(kept) => kept.weights = best.into(),
            None if !best.is_empty() => {
                return Err(CheckpointError::Unexpected(format!("{BEST}…")));
            }
            None => {}
        }
        Ok(Self {
            config,
            position,
            order: order.ok_or_else(|| CheckpointError::Missing(ORDER.to_string()))?,
            weights,
            optimizer_steps,
            optimizer_state,
            early_stop,
        })
    }
}

fn view(data: &TensorData) -> TensorView<'_> {
    TensorView::new(Dtype::F32, data.shape().to_vec(), data.as_bytes())
        .expect("float32 data fills its shape")
}

fn parse<T: DeserializeOwned>(
    metadata: &HashMap<String, String>,
    key: &'static str,
) -> Result<T, CheckpointError> {
    let text = metadata
        .get(key)
        .ok_or_else(|| CheckpointError::Metadata(key, "it is missing".into()))?;
    serde_json::from_str(text).map_err(|e| CheckpointError::Metadata(key, e.to_string()))
}

fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("settings and positions are plain data")
}
