//! `webtrain lr-find`: the learning-rate range test from the run's settings (and given
//! weights), its suggestion printed and its curve written as SVG.

use std::path::PathBuf;

use crate::chart::lr_find::{render_svg, short};
use crate::config::TrainConfig;
use crate::model::NetConfig;
use crate::train::lr_find::{LrRange, SUGGESTION_RULE, find_lr};
use crate::train::{Placement, TrainControl};

use super::{CliError, RunArgs, load, load_weights, write_svg};

#[derive(clap::Args)]
pub struct LrFindArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Test these weights (.safetensors with PyTorch's names) instead of a fresh model.
    #[arg(long)]
    init: Option<PathBuf>,
    /// The first step's learning rate.
    #[arg(long, default_value_t = LrRange::default().start)]
    start_lr: f64,
    /// The last step's learning rate, if the loss has not diverged before.
    #[arg(long, default_value_t = LrRange::default().end)]
    end_lr: f64,
    /// Steps from the first rate to the last, rising exponentially.
    #[arg(long, default_value_t = LrRange::default().steps)]
    steps: usize,
    /// Where to write the loss against the learning rate.
    #[arg(long, default_value = "lr-find.svg")]
    svg: PathBuf,
}

pub fn run_lr_find(args: LrFindArgs) -> Result<(), CliError> {
    let config = args.run.settings.apply(TrainConfig::default())?;
    let range = LrRange {
        start: args.start_lr,
        end: args.end_lr,
        steps: args.steps,
    };
    range.validate().map_err(crate::train::TrainError::from)?;
    let (data, devices) = load(&args.run.setup, &config)?;
    println!("Backend: {}", devices.described());
    let main = &devices.main().device;
    let model = match &args.init {
        Some(path) => load_weights(path, config.model, main)?,
        None => NetConfig::from(config.model).init(main, config.seed),
    };
    let finding = pollster::block_on(find_lr(
        &model,
        &config,
        range,
        &data,
        Placement::on(&devices.devices()),
        &TrainControl::default(),
        |point| {
            // Every tenth step, as the curve is drawn.
            println!(
                "lr {:<10} loss {:.4}  smoothed {:.4}",
                short(point.lr),
                point.loss,
                point.smoothed
            );
        },
    ))?;
    let last = finding.points.last().map_or(range.start, |p| p.lr);
    match finding.diverged {
        true => println!(
            "{} steps, up to {}: the loss diverged there, so the test ended",
            finding.points.len(),
            short(last)
        ),
        false => println!("{} steps, up to {}", finding.points.len(), short(last)),
    }
    match finding.suggestion {
        Some(lr) => println!("Suggested learning rate: {} ({SUGGESTION_RULE})", short(lr)),
        None => println!("No suggestion: no loss was finite"),
    }
    write_svg(&args.svg, render_svg(&finding)?)
}
