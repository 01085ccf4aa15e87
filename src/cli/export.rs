//! `webtrain export --onnx RUN_OR_WEIGHTS`: a run's model (or a weights file) as an ONNX model
//! that ONNX Runtime runs; `webtrain export --pytorch RUN`: the run as a PyTorch script. Each
//! written whole or not at all.

use std::path::{Path, PathBuf};

use crate::config::ModelKind;
use crate::metrics::RunMetrics;
use crate::native::run_folder::{METRICS, WEIGHTS, read_limited, read_run, write_whole};
use crate::onnx::onnx_model;
use crate::pytorch::pytorch_script;
use crate::train::checkpoint::Checkpoint;
use crate::weights::MAX_WEIGHTS_BYTES;

use super::CliError;

/// The PyTorch script's name in a run's folder.
const PYTORCH_SCRIPT: &str = "train_pytorch.py";

#[derive(clap::Args)]
pub struct ExportArgs {
    /// A run's folder (its model.safetensors) or a .safetensors weights file, as an ONNX model
    /// ([batch, 1, 28, 28] pixels from 0 to 1 in, 10 logits out).
    #[arg(
        long,
        value_name = "RUN_OR_WEIGHTS",
        required_unless_present = "pytorch"
    )]
    onnx: Option<PathBuf>,
    /// A run's folder, as one Python file that trains the same run with PyTorch.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["onnx", "model"])]
    pytorch: Option<PathBuf>,
    /// Where to write it [default: model.onnx or train_pytorch.py in the run's folder, or the
    /// weights file's name with .onnx].
    #[arg(long)]
    out: Option<PathBuf>,
    /// lenet or lenet-small [default: the run's, or whichever the weights fit].
    #[arg(long)]
    model: Option<ModelKind>,
}

pub fn run_export(args: ExportArgs) -> Result<(), CliError> {
    match (&args.onnx, &args.pytorch) {
        (Some(given), _) => export_onnx(given, args.model, args.out),
        (None, Some(run)) => export_pytorch(run, args.out),
        (None, None) => unreachable!("clap requires --onnx or --pytorch"),
    }
}

/// The run in `run` as a PyTorch script.
fn export_pytorch(run: &Path, out: Option<PathBuf>) -> Result<(), CliError> {
    let record = read_run(run, String::new())?;
    let config = &record.metrics.config;
    let out = out.unwrap_or_else(|| run.join(PYTORCH_SCRIPT));
    let file = out.file_name().map_or_else(
        || PYTORCH_SCRIPT.into(),
        |name| name.to_string_lossy().into_owned(),
    );
    let script = pytorch_script(config, &format!("The run {}", record.name), &file);
    write(&out, script.as_bytes())?;
    println!("Wrote {} (python3 {file} --data DIR)", out.display());
    Ok(())
}

fn write(out: &Path, bytes: &[u8]) -> Result<(), CliError> {
    write_whole(out, bytes).map_err(|source| CliError::Write {
        path: out.to_path_buf(),
        source,
    })
}

/// A run's model, or a weights file, as an ONNX model.
fn export_onnx(
    given: &Path,
    model: Option<ModelKind>,
    out: Option<PathBuf>,
) -> Result<(), CliError> {
    let (weights, run_model) = match given.is_dir() {
        true => (given.join(WEIGHTS), run_model(given)),
        false => (given.to_path_buf(), None),
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
    let (model, onnx) = match model.or(run_model) {
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
    let out = out.unwrap_or_else(|| default_out(given));
    write(&out, &onnx)?;
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
