//! `webtrain export --onnx RUN_OR_WEIGHTS`: a run's model (or a weights file) as an ONNX model
//! that ONNX Runtime runs, written whole or not at all.

use std::path::{Path, PathBuf};

use crate::config::ModelKind;
use crate::metrics::RunMetrics;
use crate::native::run_folder::{METRICS, WEIGHTS, read_limited, write_whole};
use crate::onnx::onnx_model;
use crate::train::checkpoint::Checkpoint;
use crate::weights::MAX_WEIGHTS_BYTES;

use super::CliError;

#[derive(clap::Args)]
pub struct ExportArgs {
    /// A run's folder (its model.safetensors) or a .safetensors weights file, as an ONNX model
    /// ([batch, 1, 28, 28] pixels from 0 to 1 in, 10 logits out).
    #[arg(long, value_name = "RUN_OR_WEIGHTS")]
    onnx: PathBuf,
    /// Where to write it [default: model.onnx in the run's folder, or the weights file's name
    /// with .onnx].
    #[arg(long)]
    out: Option<PathBuf>,
    /// lenet or lenet-small [default: the run's, or whichever the weights fit].
    #[arg(long)]
    model: Option<ModelKind>,
}

pub fn run_export(args: ExportArgs) -> Result<(), CliError> {
    let (weights, run_model) = match args.onnx.is_dir() {
        true => (args.onnx.join(WEIGHTS), run_model(&args.onnx)),
        false => (args.onnx.clone(), None),
    };
    let bytes = read_limited(&weights, MAX_WEIGHTS_BYTES).map_err(|source| CliError::Read {
        path: weights.clone(),
        source,
    })?;
    if Checkpoint::from_bytes(&bytes).is_ok() {
        return Err(CliError::CheckpointAsWeights(weights));
    }
    let exported = |model| {
        onnx_model(&bytes, model).map_err(|source| CliError::Export {
            path: weights.clone(),
            source,
        })
    };
    let (model, onnx) = match args.model.or(run_model) {
        Some(model) => (model, exported(model)?),
        // Whichever model the weights fit; the message is the first model's.
        None => match exported(ModelKind::Lenet) {
            Ok(onnx) => (ModelKind::Lenet, onnx),
            Err(error) => match exported(ModelKind::LenetSmall) {
                Ok(onnx) => (ModelKind::LenetSmall, onnx),
                Err(_) => return Err(error),
            },
        },
    };
    let out = args.out.unwrap_or_else(|| default_out(&args.onnx));
    write_whole(&out, &onnx).map_err(|source| CliError::Write {
        path: out.clone(),
        source,
    })?;
    println!("Wrote {} ({model}, {} bytes)", out.display(), onnx.len());
    Ok(())
}

/// The model a run's folder says it trained, if its metrics read.
fn run_model(run: &Path) -> Option<ModelKind> {
    let bytes = read_limited(&run.join(METRICS), 64 << 20).ok()?;
    let metrics: RunMetrics = serde_json::from_slice(&bytes).ok()?;
    Some(metrics.config.model)
}

fn default_out(given: &Path) -> PathBuf {
    match given.is_dir() {
        true => given.join("model.onnx"),
        false => given.with_extension("onnx"),
    }
}
