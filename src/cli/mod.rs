//! The native CLI: wires flags, the terminal and the run's output files to the training core.

mod run_folder;
mod settings;
mod ui;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::bench::{self, BenchError};
use crate::checkpoint::{Checkpoint, CheckpointError, MAX_CHECKPOINT_BYTES, Position};
use crate::config::{ModelKind, TrainConfig};
use crate::data::MnistBatcher;
use crate::data::{DataError, Mnist};
use crate::device::{BackendChoice, DeviceError, TrainDevice, select_device};
use crate::metrics::RunMetrics;
use crate::model::{Net, NetConfig};
use crate::op_profile::cpu_profile;
use crate::train::{
    Divergence, Outcome, TrainControl, TrainError, TrainEvent, evaluate, resume, train_from,
};
use crate::weights::{MAX_WEIGHTS_BYTES, WeightsError, from_safetensors};
use burn::prelude::Device;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use run_folder::{CHECKPOINT, CheckpointWrites, RunFolder, save_results};
use settings::{All, ForEval, SettingFlags};
use thiserror::Error;

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
    /// Train a model on MNIST; write metrics.json, loss.svg, model.bpk, model.safetensors and
    /// checkpoint.safetensors (updated at every log line and epoch).
    ///
    /// Ctrl-C stops the run at its next step, writes all of these (the checkpoint at the step
    /// it stopped) and says how to resume; a second Ctrl-C exits at once.
    Train(TrainArgs),
    /// Measure training throughput (and optionally the time to a test accuracy); print JSON.
    Bench(BenchArgs),
    /// Print the test loss and accuracy of weights in a .safetensors file.
    Eval(EvalArgs),
    /// Serve the page, and a native engine it can train on (this machine's GPU or every core),
    /// at a URL with a token; runs started there write their files under --out.
    Ui(ui::UiArgs),
}

/// The data and the backend: shared by `train`, `bench` and `eval`.
#[derive(clap::Args)]
struct SetupArgs {
    /// Directory with the four MNIST IDX files (raw or .gz).
    #[arg(long, default_value = "data/mnist")]
    data: PathBuf,
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
struct TrainArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Where to write the run's files [default: runs/<timestamp>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Start from these weights (.safetensors with PyTorch's names) instead of a fresh model.
    #[arg(long)]
    init: Option<PathBuf>,
    /// Go on with the run a checkpoint.safetensors was taken from, with its settings; --epochs
    /// may extend it.
    #[arg(long, conflicts_with = "init")]
    resume: Option<PathBuf>,
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

#[derive(clap::Args)]
struct BenchArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Steps before timing starts (shader compilation, autotuning), rounded up to a window.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Steps per timed window.
    #[arg(long, default_value_t = 50)]
    steps: usize,
    /// Timed windows; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Also train up to --epochs epochs and report the training time to this test accuracy (%).
    #[arg(long)]
    target_accuracy: Option<f64>,
    /// Also count and time the GPU kernels of one window of --steps steps, one by one (wgpu only;
    /// the CPU backend launches none).
    #[arg(long)]
    kernels: bool,
    /// Also time a CPU step's phases and each of its ops alone, --steps times each (the flex
    /// backend, whatever --backend says).
    #[arg(long)]
    ops: bool,
}

#[derive(Debug, Error)]
enum CliError {
    #[error("ui: {0}")]
    Serve(String),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error("{}: {source}", .path.display())]
    Weights { path: PathBuf, source: WeightsError },
    #[error("{}: {source}", .path.display())]
    Checkpoint {
        path: PathBuf,
        source: CheckpointError,
    },
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Chart(#[from] crate::chart::ChartError),
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot save the model to {}: {message}", .path.display())]
    SaveModel { path: PathBuf, message: String },
    #[error(
        "{} already holds a run: give another --out, or go on with that run: --resume {}",
        .path.display(), .path.join(CHECKPOINT).display()
    )]
    RunExists { path: PathBuf },
    #[error(
        "the argument '--resume' cannot be used with '--{}': a resumed run keeps its \
         checkpoint's settings, and only --epochs may extend it",
        .0.replace('_', "-")
    )]
    ResumeWith(&'static str),
    #[error("cannot catch Ctrl-C: {0}")]
    Signal(String),
    #[error(
        "interrupted at epoch {epoch}, step {step}; go on with: webtrain train --resume {}",
        .checkpoint.display()
    )]
    Interrupted {
        epoch: usize,
        step: usize,
        checkpoint: PathBuf,
    },
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NotSaved(Vec<CliError>),
    #[error(
        "training {divergence}; the last weights with a finite loss are in {}: try a lower --lr",
        .out.display()
    )]
    Diverged {
        divergence: Divergence,
        out: PathBuf,
    },
}

/// The shell's code for a process ended by Ctrl-C (128 + SIGINT).
const INTERRUPTED_EXIT: i32 = 130;
/// A run that diverged: its files are written, but a script should not go on as if it trained.
const DIVERGED_EXIT: u8 = 1;

/// The validated settings, the data and the device of a run, or why there is none.
fn prepare(args: &RunArgs) -> Result<(TrainConfig, Mnist, TrainDevice), CliError> {
    let config = args.settings.apply(TrainConfig::default())?;
    let (data, device) = load(&args.setup)?;
    device.check_batch(config.model, config.batch_size)?;
    Ok((config, data, device))
}

/// MNIST and the chosen device.
fn load(setup: &SetupArgs) -> Result<(Mnist, TrainDevice), CliError> {
    let data = Mnist::load_dir(&setup.data)?;
    let device = pollster::block_on(select_device(setup.backend))?;
    Ok((data, device))
}

/// The bytes of `path`, read no further than `limit` and one byte more: enough to say the file
/// is too large without reading all of it.
fn read_limited(path: &Path, limit: usize) -> Result<Vec<u8>, CliError> {
    let read = |source| CliError::Read {
        path: path.into(),
        source,
    };
    let mut bytes = Vec::new();
    File::open(path)
        .map_err(read)?
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    Ok(bytes)
}

/// Weights from `path`, read no further than a LeNet's weights can reach.
fn load_weights(path: &Path, model: ModelKind, device: &Device) -> Result<Net, CliError> {
    let bytes = read_limited(path, MAX_WEIGHTS_BYTES)?;
    from_safetensors(bytes, model, device).map_err(|source| CliError::Weights {
        path: path.into(),
        source,
    })
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
    let (data, device) = load(&args.setup)?;
    let model = load_weights(&args.weights, settings.model, &device.device)?;
    let len = data.test.len_within(settings.test_limit);
    let batcher = MnistBatcher::new(device.device.clone());
    let report = pollster::block_on(evaluate(&model, &data.test, len, &batcher, 0))?;
    println!("Backend: {} ({})", device.adapter, device.reason);
    println!("{report}");
    Ok(())
}

fn run_bench(args: BenchArgs) -> Result<(), CliError> {
    let (config, data, device) = prepare(&args.run)?;
    let throughput = pollster::block_on(bench::throughput(
        &config,
        &data,
        &device.device,
        args.warmup,
        args.steps,
        args.repeats,
    ))?;
    let time_to_accuracy = match args.target_accuracy {
        Some(target) => Some(pollster::block_on(bench::time_to_accuracy(
            &config,
            &data,
            &device.device,
            target,
        ))?),
        None => None,
    };
    let kernels = match args.kernels {
        true => Some(pollster::block_on(bench::kernel_profile(
            &config,
            &data,
            &device.device,
            args.warmup,
            args.steps,
        ))?),
        false => None,
    };
    let ops = match args.ops {
        true => Some(cpu_profile(
            config.model,
            config.batch_size,
            &data.train,
            args.steps,
        )?),
        false => None,
    };
    let report = serde_json::json!({
        "adapter": device.adapter,
        "reason": device.reason,
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "model": config.model,
        "throughput": throughput,
        "time_to_accuracy": time_to_accuracy,
        "kernels": kernels,
        "ops": ops,
    });
    println!("{report}");
    Ok(())
}

fn run_training(args: TrainArgs) -> Result<(), CliError> {
    let settings = &args.run.settings;
    let checkpoint = match &args.resume {
        Some(path) => {
            if let Some(name) = settings.given().find(|&name| name != "epochs") {
                return Err(CliError::ResumeWith(name));
            }
            let mut checkpoint = load_checkpoint(path)?;
            checkpoint.config = settings.apply(checkpoint.config)?;
            Some(checkpoint)
        }
        None => None,
    };
    let config = match &checkpoint {
        Some(checkpoint) => checkpoint.config.clone(),
        None => settings.apply(TrainConfig::default())?,
    };
    let (data, device) = load(&args.run.setup)?;
    device.check_batch(config.model, config.batch_size)?;
    println!("Backend: {} ({})", device.adapter, device.reason);
    let folder = match (&args.resume, &checkpoint) {
        (Some(path), Some(checkpoint)) => {
            let position = checkpoint.position;
            println!(
                "Resuming {}: epoch {}, batch {} (step {})",
                path.display(),
                position.epoch,
                position.batch,
                position.step
            );
            RunFolder::for_resumed_run(args.out, path)?
        }
        _ => RunFolder::for_new_run(args.out)?,
    };
    // Resumed where it ran before, the run's metrics and chart go on from what it did there.
    let earlier = checkpoint
        .as_ref()
        .and_then(|checkpoint| folder.metrics_until(&checkpoint.position));
    let mut metrics = match earlier {
        Some(earlier) => RunMetrics {
            config: config.clone(),
            backend: device.to_string(),
            ..earlier
        },
        None => RunMetrics::new(config.clone(), device.to_string()),
    };
    let control = TrainControl::default();
    let interrupted = stop_on_interrupt(&control)?;

    let total = (data.train.len_within(config.train_limit) * config.epochs) as u64;
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} samples, epoch {prefix} {msg}")
            .expect("valid template"),
    );
    // Log lines go to stdout whether or not the bar is drawn (it is not when stderr is no terminal).
    let print = |line: String| bar.suspend(|| println!("{line}"));
    let mut checkpoints = CheckpointWrites::default();
    let mut stopped_at = None;
    let on_event = |event: TrainEvent| {
        match &event {
            TrainEvent::Step(step) => {
                bar.set_position(((step.epoch - 1) * step.epoch_len + step.seen) as u64);
                bar.set_prefix(step.epoch.to_string());
                bar.set_message(format!("{:.0} samples/s", step.samples_per_sec));
                if let Some(line) = step.log_line() {
                    print(line);
                }
            }
            TrainEvent::Epoch(report) => print(format!("\n{report}\n")),
            TrainEvent::Interval(_) | TrainEvent::Memory(_) => {}
            TrainEvent::Paused { step } => print(format!("Paused before step {step}")),
            TrainEvent::Resumed { step } => print(format!("Resumed at step {step}")),
            TrainEvent::LrChanged { step, lr } => {
                print(format!("Learning rate {lr} from step {step}"))
            }
            TrainEvent::Checkpoint(checkpoint) => {
                stopped_at = Some(checkpoint.position);
                checkpoints.write(&folder, checkpoint, |line| {
                    bar.suspend(|| eprintln!("webtrain: {line}"))
                });
            }
            TrainEvent::DeviceLost {
                reason,
                resumed_at_step,
                cpu_threads,
            } => print(format!(
                "The GPU was lost ({reason}); going on on the CPU ({cpu_threads}) from step \
                 {resumed_at_step}"
            )),
            TrainEvent::Diverged(divergence) => print(format!("Training {divergence}")),
            TrainEvent::Done {
                samples_per_sec, ..
            } => bar.finish_with_message(format!("{samples_per_sec:.0} samples/s")),
        }
        metrics.record(&event);
    };
    let trained = pollster::block_on(async {
        match &checkpoint {
            Some(checkpoint) => resume(checkpoint, &data, &device.device, &control, on_event).await,
            None => {
                let model = match &args.init {
                    Some(path) => load_weights(path, config.model, &device.device)?,
                    None => NetConfig::from(config.model).init(&device.device, config.seed),
                };
                train_from(model, &config, &data, &device.device, &control, on_event).await
            }
        }
        .map_err(CliError::from)
    });

    // Whatever the run produced is written before any error is reported: the model first.
    let model = trained.as_ref().ok().map(|trained| &trained.model);
    let saved = save_results(&folder, model, &metrics, checkpoints.failure);
    if let (Err(_), Err(not_saved)) = (&trained, &saved) {
        eprintln!("webtrain: {not_saved}");
    }
    let trained = trained?;
    saved?;
    if let (Outcome::Diverged, Some(divergence)) = (trained.outcome, metrics.divergence) {
        return Err(CliError::Diverged {
            divergence,
            out: folder.path().into(),
        });
    }
    if interrupted.load(Ordering::SeqCst) {
        let Position { epoch, step, .. } = stopped_at.unwrap_or(Position::START);
        return Err(CliError::Interrupted {
            epoch,
            step,
            checkpoint: folder.file(CHECKPOINT),
        });
    }
    println!("Wrote {}", folder.path().display());
    Ok(())
}

/// Ctrl-C (or SIGTERM) stops the run at its next step, and its files are written; a second one
/// ends the process at once.
fn stop_on_interrupt(control: &TrainControl) -> Result<Arc<AtomicBool>, CliError> {
    let interrupted = Arc::new(AtomicBool::new(false));
    let (flag, control) = (interrupted.clone(), control.clone());
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(INTERRUPTED_EXIT);
        }
        eprintln!(
            "webtrain: stopping at the next step and writing the run's files (again to quit now)"
        );
        control.stop();
    })
    .map_err(|e| CliError::Signal(e.to_string()))?;
    Ok(interrupted)
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
            let message = error.to_string();
            let first = message.lines().next().unwrap_or_default();
            eprintln!("webtrain: {}", first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Train(args) => run_training(args),
        Command::Bench(args) => run_bench(args),
        Command::Eval(args) => run_eval(args),
        Command::Ui(args) => ui::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
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
