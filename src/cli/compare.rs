//! `webtrain compare DIR...`: the runs table for run folders, printed, and their curves
//! overlaid in one SVG.

use std::path::PathBuf;

use crate::chart::overlay::{self as chart, ChartOptions, XAxis};
use crate::runs::RunRecord;
use crate::runs::table::{Column, render_text, sort};

use super::{CliError, write_svg};
use crate::native::run_folder::read_run;

#[derive(clap::Args)]
pub struct CompareArgs {
    /// Run folders, each with the metrics.json a run writes.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Where to write the overlaid charts.
    #[arg(long, default_value = "compare.svg")]
    svg: PathBuf,
    /// The column the table is sorted by.
    #[arg(long, default_value = "started", value_parser = Column::ALL.map(Column::key))]
    sort: String,
    /// Sort from the highest down.
    #[arg(long)]
    descending: bool,
    /// The curves' smoothing: 0 draws the raw values, 0.99 the smoothest.
    #[arg(long, default_value_t = ChartOptions::default().smoothing)]
    smoothing: f64,
    /// A logarithmic loss axis.
    #[arg(long)]
    log_loss: bool,
    /// What the x axis counts.
    #[arg(long, default_value = "epoch", value_parser = ["epoch", "step", "time"])]
    x: String,
    /// Draw runs that differ only by seed as their mean, with a band for their spread.
    #[arg(long)]
    mean_seeds: bool,
}

/// A start time as a terminal shows it: UTC, to the minute.
fn utc(ms: f64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64).map_or_else(
        || "—".into(),
        |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
    )
}

pub fn run_compare(args: CompareArgs) -> Result<(), CliError> {
    let runs = args
        .runs
        .iter()
        .map(|dir| read_run(dir, dir.display().to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut shown: Vec<&RunRecord> = runs.iter().collect();
    let column = Column::from_key(&args.sort).expect("clap allows only the columns' keys");
    sort(&mut shown, column, args.descending);
    println!("{}", render_text(&shown, &utc));
    let options = ChartOptions {
        smoothing: args.smoothing,
        log_loss: args.log_loss,
        x_axis: match args.x.as_str() {
            "step" => XAxis::Step,
            "time" => XAxis::Time,
            _ => XAxis::Epoch,
        },
    };
    let svg = chart::render_svg(&chart::series(&shown, args.mean_seeds), &options)?;
    write_svg(&args.svg, svg)
}
