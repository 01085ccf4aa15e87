//! `webtrain train`: a run from fresh weights, given weights or a checkpoint, with a progress
//! bar, its files written whatever ended it, and Ctrl-C that keeps it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{ProgressBar, ProgressStyle};

use crate::config::TrainConfig;
use crate::metrics::RunMetrics;
use crate::model::NetConfig;
use crate::train::checkpoint::Position;
use crate::train::{Outcome, TrainControl, TrainEvent, kept_line, resume, train_from};

use super::error::INTERRUPTED_EXIT;
use super::own_data::{measured, report, run_data};
use super::run_folder::{CHECKPOINT, CheckpointWrites, RunFolder, save_results};
use super::{CliError, RunArgs, load_checkpoint, load_weights};
use crate::device::select_device;

#[derive(clap::Args)]
pub struct TrainArgs {
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

pub fn run_training(args: TrainArgs) -> Result<(), CliError> {
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
    let run = run_data(&args.run.setup, &config)?;
    let data = &run.data;
    let device = pollster::block_on(select_device(args.run.setup.backend))?;
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
            TrainEvent::BestKept { .. } => print(kept_line(&event).unwrap_or_default()),
            TrainEvent::Done {
                samples_per_sec, ..
            } => bar.finish_with_message(format!("{samples_per_sec:.0} samples/s")),
        }
        metrics.record(&event);
    };
    let start = match (&checkpoint, &args.init) {
        (Some(_), _) => None,
        (None, Some(path)) => Some(load_weights(path, config.model, &device.device)?),
        (None, None) => Some(NetConfig::from(config.model).init(&device.device, config.seed)),
    };
    // On one's own digits, the model before and after: what fine-tuning changed.
    let before = match &start {
        Some(model) => measured(model, &run, &device.device)?,
        None => None,
    };
    let trained = pollster::block_on(async {
        match (&checkpoint, start) {
            (Some(checkpoint), _) => {
                resume(checkpoint, data, &device.device, &control, on_event).await
            }
            (None, Some(model)) => {
                train_from(model, &config, data, &device.device, &control, on_event).await
            }
            (None, None) => unreachable!("a run starts from a checkpoint or a model"),
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
    if let (Some(before), Some(after)) = (&before, measured(&trained.model, &run, &device.device)?)
    {
        report(before, &after, &data.test);
    }
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
