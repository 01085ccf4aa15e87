//! `webtrain train`: a run from fresh weights, given weights or a checkpoint, with a progress
//! bar, its files written whatever ended it, and Ctrl-C that keeps it.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use burn::prelude::Device;
use indicatif::{ProgressBar, ProgressStyle};

use crate::config::TrainConfig;
use crate::metrics::RunMetrics;
use crate::session::driver::{Driven, Prepared, RunStart, prepare};
use crate::train::checkpoint::{Checkpoint, Position};
use crate::train::{Divergence, Outcome, TrainControl, TrainEvent};

use super::error::INTERRUPTED_EXIT;
use super::own_data::{self, report};
use super::{CliError, RunArgs, load_checkpoint, read_limited, weights_from};
use crate::native::record::FolderRecord;
use crate::native::run_folder::{CHECKPOINT, RunFolder};
use crate::weights::MAX_WEIGHTS_BYTES;

#[derive(clap::Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// Where to write the run's files [default: runs/<timestamp>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Start from these weights (.safetensors with PyTorch's names) instead of a fresh model.
    #[arg(long)]
    pub(super) init: Option<PathBuf>,
    /// Go on with the run a checkpoint.safetensors was taken from, with its settings; --epochs
    /// may extend it.
    #[arg(long, conflicts_with = "init")]
    pub(super) resume: Option<PathBuf>,
    /// none, or mpi: one of the processes `mpirun` starts, each taking its share of every
    /// batch (a build with the `mpi` feature).
    #[arg(long, default_value = "none")]
    pub(super) distributed: Distribution,
}

/// How a run spans processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Distribution {
    /// One process.
    None,
    /// The processes `mpirun` starts, on MPI.
    Mpi,
}

/// A run in this process alone (`--distributed none`).
pub fn run_training(args: TrainArgs) -> Result<(), CliError> {
    let (config, start) = asked_start(&args, None)?;
    let data = own_data::load(&args.run.setup, &config)?;
    let backend = args.run.setup.backend;
    let prepared = pollster::block_on(prepare(&config, start, data, backend))?;
    drive_shown(&args, prepared).map(drop)
}

/// Trains `prepared` as the terminal shows it: its progress and log, its folder written, and
/// how it ended.
pub(super) fn drive_shown(args: &TrainArgs, prepared: Prepared) -> Result<PathBuf, CliError> {
    let config = prepared.config().clone();
    let position = prepared.resumed_at();
    let train_len = prepared.train_len();
    let device = prepared.devices.to_string();
    println!("Backend: {}", prepared.devices.described());
    let (folder, metrics) = folder_and_metrics(args, position, &config, device)?;
    let path = folder.path().to_path_buf();
    let control = TrainControl::default();
    let interrupted = stop_on_interrupt(&control)?;
    let bar = progress_bar(train_len * config.epochs);
    let warn = {
        let bar = bar.clone();
        move |line: String| bar.suspend(|| eprintln!("webtrain: {line}"))
    };
    let record = FolderRecord::new(folder, metrics, warn);
    let shown = Shown::default();
    let fault = Fault::from_env();
    let driven = pollster::block_on(prepared.drive(Some(Box::new(record)), &control, |event| {
        fault.at(&event);
        shown.show(&event, &bar)
    }));
    let interrupted = interrupted.load(Ordering::SeqCst);
    end(driven, shown, interrupted, &path)?;
    println!("Wrote {}", path.display());
    Ok(path)
}

/// The files a run starts from, read: the checkpoint it resumes, and the weights it starts
/// from. Under MPI rank 0 reads them and every process takes its copy (cli/distributed.rs).
#[derive(Default)]
pub(super) struct StartFiles {
    pub checkpoint: Option<Checkpoint>,
    pub init: Option<Vec<u8>>,
}

impl StartFiles {
    /// The files `--resume` and `--init` name, read here.
    fn read(args: &TrainArgs) -> Result<Self, CliError> {
        Ok(Self {
            checkpoint: args.resume.as_deref().map(load_checkpoint).transpose()?,
            init: args
                .init
                .as_deref()
                .map(|path| read_limited(path, MAX_WEIGHTS_BYTES))
                .transpose()?,
        })
    }
}

/// The run the flags ask for: its settings, and where it starts (a checkpoint, weights, or
/// fresh), from the files `--resume` and `--init` name, or from the files `shared` when another
/// process read them.
pub(super) fn asked_start(
    args: &TrainArgs,
    shared: Option<StartFiles>,
) -> Result<(TrainConfig, RunStart), CliError> {
    let settings = &args.run.settings;
    if args.resume.is_some() {
        // More epochs extend the run; other devices train the same run.
        let changes_the_run = |name: &&str| !["epochs", "devices"].contains(name);
        if let Some(name) = settings.given().find(changes_the_run) {
            return Err(CliError::ResumeWith(name));
        }
    }
    let files = match shared {
        Some(files) => files,
        None => StartFiles::read(args)?,
    };
    if let Some(mut checkpoint) = files.checkpoint {
        checkpoint.config = settings.apply(checkpoint.config)?;
        let config = checkpoint.config.clone();
        return Ok((config, RunStart::Checkpoint(Box::new(checkpoint))));
    }
    let config = settings.apply(TrainConfig::default())?;
    let start = match files.init {
        Some(bytes) => {
            let path = args.init.clone().unwrap_or_else(|| "--init".into());
            RunStart::Weights(Box::new(weights_from(
                bytes,
                &path,
                config.model,
                &Device::flex(),
            )?))
        }
        None => RunStart::Fresh,
    };
    Ok((config, start))
}

/// The run's folder, and its metrics: a new run's, or, resumed where it ran before, what it did
/// there, so that its metrics and chart hold the whole run.
fn folder_and_metrics(
    args: &TrainArgs,
    resumed_at: Option<Position>,
    config: &TrainConfig,
    device: String,
) -> Result<(RunFolder, RunMetrics), CliError> {
    let (Some(path), Some(position)) = (&args.resume, resumed_at) else {
        let folder = RunFolder::for_new_run(args.out.clone())?;
        return Ok((folder, RunMetrics::new(config.clone(), device)));
    };
    println!(
        "Resuming {}: epoch {}, batch {} (step {})",
        path.display(),
        position.epoch,
        position.batch,
        position.step
    );
    let folder = RunFolder::for_resumed_run(args.out.clone(), path)?;
    let metrics = match folder.metrics_until(&position) {
        Some(earlier) => RunMetrics {
            config: config.clone(),
            backend: device,
            ..earlier
        },
        None => RunMetrics::new(config.clone(), device),
    };
    Ok((folder, metrics))
}

fn progress_bar(samples: usize) -> ProgressBar {
    ProgressBar::new(samples as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} samples, epoch {prefix} {msg}")
            .expect("valid template"),
    )
}

/// How the run ended, said: after its files are written, an error if it failed, diverged or
/// was interrupted; a fine-tune's before and after.
fn end(driven: Driven, shown: Shown, interrupted: bool, path: &Path) -> Result<(), CliError> {
    let Driven { ended, files } = driven;
    let not_saved = files.and_then(|files| files.error);
    if let (Err(_), Some(not_saved)) = (&ended, &not_saved) {
        eprintln!("webtrain: {not_saved}");
    }
    let ended = ended?;
    if let Some(not_saved) = not_saved {
        return Err(CliError::FilesNotWritten(not_saved));
    }
    if let Some(fine_tuned) = ended.fine_tuned {
        report(&fine_tuned?);
    }
    let Shown {
        divergence,
        stopped_at,
    } = shown;
    if let (Outcome::Diverged, Some(divergence)) = (ended.outcome, divergence.take()) {
        let out = path.to_path_buf();
        return Err(CliError::Diverged { divergence, out });
    }
    if interrupted {
        let Position { epoch, step, .. } = stopped_at.take().unwrap_or(Position::START);
        let checkpoint = path.join(CHECKPOINT);
        return Err(CliError::Interrupted {
            epoch,
            step,
            checkpoint,
        });
    }
    Ok(())
}

/// A fault provoked on purpose, in debug builds only: `WEBTRAIN_PANIC_IN_POOL_AT_STEP=N` panics
/// in a thread of the CPU pool after step N, as a fault of the backend would, so that a test
/// sees the run end with the panic's message.
struct Fault {
    #[cfg(debug_assertions)]
    panic_at_step: Option<usize>,
}

impl Fault {
    fn from_env() -> Self {
        Self {
            #[cfg(debug_assertions)]
            panic_at_step: std::env::var("WEBTRAIN_PANIC_IN_POOL_AT_STEP")
                .ok()
                .and_then(|step| step.parse().ok()),
        }
    }

    fn at(&self, _event: &TrainEvent) {
        #[cfg(debug_assertions)]
        if let TrainEvent::Step(step) = _event
            && Some(step.step) == self.panic_at_step
        {
            crate::platform::panic_in_cpu_pool();
        }
    }
}

/// What the terminal shows of a run: its progress bar and its log, PyTorch's example's lines
/// among them; what the end's message needs is kept.
#[derive(Default)]
struct Shown {
    divergence: Cell<Option<Divergence>>,
    /// The position of the last checkpoint: where an interrupted run goes on from.
    stopped_at: Cell<Option<Position>>,
}

impl Shown {
    fn show(&self, event: &TrainEvent, bar: &ProgressBar) {
        // Log lines go to stdout whether or not the bar is drawn (it is not when stderr is no
        // terminal).
        let print = |line: String| bar.suspend(|| println!("{line}"));
        match event {
            TrainEvent::Step(step) => {
                bar.set_position(((step.epoch - 1) * step.epoch_len + step.seen) as u64);
                bar.set_prefix(step.epoch.to_string());
                bar.set_message(format!("{:.0} samples/s", step.samples_per_sec));
            }
            TrainEvent::Checkpoint(checkpoint) => self.stopped_at.set(Some(checkpoint.position)),
            TrainEvent::Diverged(divergence) => self.divergence.set(Some(divergence.clone())),
            TrainEvent::Done {
                samples_per_sec, ..
            } => bar.finish_with_message(format!("{samples_per_sec:.0} samples/s")),
            _ => {}
        }
        match (event, event.log_line()) {
            // As PyTorch's example prints it: a blank line before and after.
            (TrainEvent::Epoch(_), Some(line)) => print(format!("\n{line}\n")),
            (_, Some(line)) => print(line),
            (_, None) => {}
        }
    }
}

/// Ctrl-C (or SIGTERM) stops the run at its next step, and its files are written; a second one
/// ends the process at once.
pub(super) fn stop_on_interrupt(control: &TrainControl) -> Result<Arc<AtomicBool>, CliError> {
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
