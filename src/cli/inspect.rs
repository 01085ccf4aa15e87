//! `webtrain inspect RUN --digit N`: a run's model seen from inside, as SVGs: for each test
//! digit asked for, its layers, conv1's filters and a class's saliency (`digit-N.svg`); and
//! where the first test digits lie on fc1's principal plane, before training (fresh weights of
//! the run's seed) and after (`digits.svg`).

use std::path::{Path, PathBuf};

use burn::prelude::*;

use crate::chart::{digit_map, inside as inside_chart};
use crate::data::{IMAGE_PIXELS, Mnist};
use crate::inspect::inside::look_inside;
use crate::inspect::projector::{DIGITS, digit_map as map_digits};
use crate::inspect::saliency::Smoothing;
use crate::model::{CLASSES, NetConfig};
use crate::native::run_folder::{WEIGHTS, read_run, write_whole};

use super::{CliError, load_weights};

/// The digits' map's name.
const MAP: &str = "digits.svg";

#[derive(clap::Args)]
pub struct InspectArgs {
    /// A run's folder: its model.safetensors and metrics.json.
    run: PathBuf,
    /// A test digit to look inside, by its index in the test set; again for more.
    #[arg(long = "digit", value_name = "N")]
    digits: Vec<usize>,
    /// The class whose saliency is drawn [default: the model's guess].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..CLASSES as i64))]
    class: Option<u8>,
    /// SmoothGrad's noisy copies of the digit, their mean gradient drawn (1: the plain
    /// gradient).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=Smoothing::MAX_COPIES as i64))]
    smoothgrad: u16,
    /// Test digits on the map of where the digits lie.
    #[arg(long, default_value_t = DIGITS as u16, value_parser = clap::value_parser!(u16).range(2..=10_000))]
    map_digits: u16,
    /// The folder the SVGs go to [default: the run's folder].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Directory with the four MNIST IDX files (raw or .gz).
    #[arg(long, default_value = "data/mnist")]
    data: PathBuf,
}

pub fn run_inspect(args: InspectArgs) -> Result<(), CliError> {
    let record = read_run(&args.run, String::new())?;
    let config = &record.metrics.config;
    let device = Device::flex();
    let net = load_weights(&args.run.join(WEIGHTS), config.model, &device)?;
    let data = Mnist::load_dir(&args.data)?;
    let out = args.out.clone().unwrap_or_else(|| args.run.clone());
    let test = &data.test;
    if let Some(&digit) = args.digits.iter().find(|&&d| d >= test.len()) {
        return Err(CliError::NoSuchDigit {
            digit,
            len: test.len(),
        });
    }
    let smoothing = Smoothing {
        copies: usize::from(args.smoothgrad),
        ..Smoothing::SMOOTHGRAD
    };
    let class = args.class.map(usize::from);
    for &digit in &args.digits {
        let pixels: &[u8; IMAGE_PIXELS] = test.image(digit).try_into().expect("a test image");
        let seen = pollster::block_on(look_inside(&net, pixels, class, smoothing, 0))
            .map_err(crate::inspect::InspectError::from)?;
        let path = out.join(format!("digit-{digit}.svg"));
        write(&path, inside_chart::render_svg(&seen)?.as_bytes())?;
        let label = test.label(digit);
        println!(
            "Wrote {} (digit {digit}, a {label}, taken for {} at {:.1}%)",
            path.display(),
            seen.guess(),
            seen.probabilities[seen.guess()] * 100.0
        );
    }
    let fresh = NetConfig::from(config.model).init(&device, config.seed);
    let before = pollster::block_on(map_digits(&fresh, test, usize::from(args.map_digits)))?;
    let after = pollster::block_on(map_digits(&net, test, usize::from(args.map_digits)))?;
    let titles = [
        format!("Before training (seed {})", config.seed),
        format!("After: {}", record.name),
    ];
    let svg = digit_map::render_svg((&titles[0], &before), (&titles[1], &after))?;
    let path = out.join(MAP);
    write(&path, svg.as_bytes())?;
    println!(
        "Wrote {} ({} test digits on fc1's first two principal axes: {:.0}% of its variance before training, {:.0}% after)",
        path.display(),
        after.points.len(),
        (before.explained[0] + before.explained[1]) * 100.0,
        (after.explained[0] + after.explained[1]) * 100.0
    );
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    write_whole(path, bytes).map_err(|source| CliError::Write {
        path: path.to_path_buf(),
        source,
    })
}
