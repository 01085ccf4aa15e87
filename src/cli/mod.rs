//! The native CLI: wires flags, the terminal and the run's output files to the training core.

#[cfg(feature = "measure")]
mod bench;
mod compare;
mod distributed;
mod error;
mod export;
mod inspect;
mod lr_find;
mod own_data;
mod settings;
mod train;
mod ui;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use burn::prelude::Device;
use clap::{Parser, Subcommand};

use crate::config::{ModelKind, TrainConfig};
use crate::data::Mnist;
use crate::data::batcher::MnistBatcher;
use crate::device::{BackendChoice, TrainDevices, select_devices};
use crate::model::Net;
use crate::native::run_folder;
use crate::train::checkpoint::Checkpoint;
use crate::train::checkpoint::format::MAX_CHECKPOINT_BYTES;
use crate::train::evaluate;
use crate::weights::{MAX_WEIGHTS_BYTES, from_safetensors};
use error::{CliError, DIVERGED_EXIT, INTERRUPTED_EXIT};
use settings::{All, ForEval, SettingFlags};
use train::Distribution;

#[derive(Parser)]
#[command(
    name = "webtrain",
    version,
    about = "Train the classic MNIST CNNs on the GPU or CPU"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a model on MNIST; write metrics.json, loss.svg, learning.svg, model.bpk,
    /// model.safetensors and checkpoint.safetensors (updated at every log line and epoch).
    ///
    /// Ctrl-C stops the run at its next step, writes all of these (the checkpoint at the step
    /// it stopped) and says how to resume; a second Ctrl-C exits at once.
    Train(train::TrainArgs),
    /// Measure training throughput (and optionally the time to a test accuracy); print JSON.
    #[cfg(feature = "measure")]
    Bench(bench::BenchArgs),
    /// Print the test loss and accuracy of weights in a .safetensors file.
    Eval(EvalArgs),
    /// Find a learning rate: train a copy of the model with a rate rising exponentially each
    /// step (until the loss diverges), print the suggested rate and write the loss against
    /// the rate as SVG.
    LrFind(lr_find::LrFindArgs),
    /// Print a table of run folders (best and final test accuracy, time, speed, end and the
    /// settings in which they differ) and write their curves overlaid as an SVG.
    Compare(compare::CompareArgs),
    /// Write a run's model, or a weights file, as an ONNX model (opset 13) that ONNX Runtime runs;
    /// or a run as a PyTorch script that trains it again.
    Export(export::ExportArgs),
    /// Look inside a run's model: for each test digit asked for, an SVG of its layers, conv1's
    /// filters and a class's saliency; and an SVG of where the first test digits lie on fc1's
    /// first two principal axes, before training and after.
    Inspect(inspect::InspectArgs),
    /// Serve the page, and a native engine it can train on (this machine's GPU or every core),
    /// at a URL with a token; runs started there write their files under --out.
    Ui(ui::UiArgs),
}

/// The data and the backend: shared by `train`, `bench` and `eval`.
#[derive(clap::Args)]
struct SetupArgs {
    /// Directory with the four MNIST IDX files (raw or .gz); or your own digits as a
    /// training pair alone (train-images-idx3-ubyte, train-labels-idx1-ubyte), a fifth of
    /// which is held out to measure.
    #[arg(long, default_value = "data/mnist")]
    data: PathBuf,
    /// MNIST, for training on your own digits: mixed in (--mix-mnist) and tested on.
    #[arg(long, default_value = "data/mnist")]
    mnist: PathBuf,
    /// auto (a hardware GPU if there is one, else the CPU), gpu or cpu.
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
}

/// What a run trains on, with what, and how: shared by `train` and `bench`.
#[derive(clap::Args)]
struct RunArgs {
    #[command(flatten)]
    setup: SetupArgs,
    #[command(flatten)]
    settings: SettingFlags<All>,
}

#[derive(clap::Args)]
struct EvalArgs {
    /// A .safetensors file with PyTorch's parameter names, ours or PyTorch's.
    #[arg(long)]
    weights: PathBuf,
    #[command(flatten)]
    setup: SetupArgs,
    #[command(flatten)]
    settings: SettingFlags<ForEval>,
}

/// MNIST and the chosen device.
/// MNIST, and the devices `config` names, checked to hold its batch.
fn load(setup: &SetupArgs, config: &TrainConfig) -> Result<(Mnist, TrainDevices), CliError> {
    let data = Mnist::load_dir(&setup.data)?;
    let devices = pollster::block_on(select_devices(&config.devices, setup.backend))?;
    devices.check_batch(config.model, config.batch_size)?;
    Ok((data, devices))
}

/// The bytes of `path`, read no further than `limit` and one byte more.
fn read_limited(path: &Path, limit: usize) -> Result<Vec<u8>, CliError> {
    run_folder::read_limited(path, limit).map_err(|source| CliError::Read {
        path: path.into(),
        source,
    })
}

/// Weights from `path`, read no further than a LeNet's weights can reach.
fn load_weights(path: &Path, model: ModelKind, device: &Device) -> Result<Net, CliError> {
    weights_from(read_limited(path, MAX_WEIGHTS_BYTES)?, path, model, device)
}

/// A weights file's `bytes`, read from `path`, as a model on `device`.
fn weights_from(
    bytes: Vec<u8>,
    path: &Path,
    model: ModelKind,
    device: &Device,
) -> Result<Net, CliError> {
    from_safetensors(bytes, model, device).map_err(|source| CliError::Weights {
        path: path.into(),
        source,
    })
}

/// Writes an SVG chart to `path` and says so.
fn write_svg(path: &Path, svg: String) -> Result<(), CliError> {
    std::fs::write(path, svg).map_err(|source| CliError::Write {
        path: path.into(),
        source,
    })?;
    println!("Wrote {}", path.display());
    Ok(())
}

fn load_checkpoint(path: &Path) -> Result<Checkpoint, CliError> {
    let bytes = read_limited(path, MAX_CHECKPOINT_BYTES)?;
    Checkpoint::from_bytes(&bytes).map_err(|source| CliError::Checkpoint {
        path: path.into(),
        source,
    })
}

fn run_eval(args: EvalArgs) -> Result<(), CliError> {
    let settings = args.settings.apply(TrainConfig::default())?;
    let (data, devices) = load(&args.setup, &settings)?;
    let device = devices.main();
    let model = load_weights(&args.weights, settings.model, &device.device)?;
    let len = data.test.len_within(settings.test_limit);
    let batcher = MnistBatcher::new(device.device.clone());
    let report = pollster::block_on(evaluate(&model, &data.test, len, &batcher, 0))?;
    println!("Backend: {} ({})", device.adapter, device.reason);
    println!("{report}");
    Ok(())
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if !error.use_stderr() => {
            // --help and --version
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            // One line: clap's first paragraph (a missing argument's name is on the lines
            // after the first), without its usage and help hints.
            let message = error.to_string();
            let said: Vec<&str> = message
                .lines()
                .take_while(|line| !line.trim().is_empty())
                .map(str::trim)
                .collect();
            eprintln!("webtrain: {}", said.join(" ").trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Train(args) if args.distributed == Distribution::Mpi => {
            return distributed::run_training(args);
        }
        Command::Train(args) => train::run_training(args),
        #[cfg(feature = "measure")]
        Command::Bench(args) => bench::run_bench(args),
        Command::Eval(args) => run_eval(args),
        Command::LrFind(args) => lr_find::run_lr_find(args),
        Command::Compare(args) => compare::run_compare(args),
        Command::Export(args) => export::run_export(args),
        Command::Inspect(args) => inspect::run_inspect(args),
        Command::Ui(args) => ui::run(args),
    };
    said(result)
}

/// How a command ended, said: its error's message, and the process's exit status.
fn said(result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        #[cfg(feature = "mpi")]
        Err(CliError::SaidByAnotherRank) => ExitCode::from(2),
        Err(error) => {
            eprintln!("webtrain: {error}");
            match error {
                CliError::Interrupted { .. } => ExitCode::from(INTERRUPTED_EXIT as u8),
                CliError::Diverged { .. } => ExitCode::from(DIVERGED_EXIT),
                _ => ExitCode::from(2),
            }
        }
    }
}
