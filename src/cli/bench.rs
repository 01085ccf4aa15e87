//! `webtrain bench`: throughput, the time to a test accuracy and the kernel and op profiles of
//! a run, printed as one JSON object.

use crate::measure::bench;
use crate::measure::op_profile::cpu_profile;

use crate::config::TrainConfig;
use crate::train::Placement;

use super::distributed::join;
use super::train::Distribution;

use super::{CliError, RunArgs, load};

#[derive(clap::Args)]
pub struct BenchArgs {
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
    /// none, or mpi: one of the processes `mpirun` starts, each taking its share of every
    /// batch; rank 0 prints, with what the all-reduce cost.
    #[arg(long, default_value = "none")]
    distributed: Distribution,
}

pub fn run_bench(args: BenchArgs) -> Result<(), CliError> {
    let config = args.run.settings.apply(TrainConfig::default())?;
    let (data, devices) = load(&args.run.setup, &config)?;
    let device = devices.main();
    let on = devices.devices();
    let group = join(args.distributed)?;
    let placement = Placement {
        devices: &on,
        group: group.as_deref(),
    };
    let throughput = pollster::block_on(bench::throughput(
        &config,
        &data,
        placement,
        args.warmup,
        args.steps,
        args.repeats,
    ))?;
    let time_to_accuracy = match args.target_accuracy {
        Some(target) => Some(pollster::block_on(bench::time_to_accuracy(
            &config, &data, placement, target,
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
    let processes = group.as_ref().map(|group| {
        let cost = group.cost();
        let steps = cost.steps.max(1) as f64;
        serde_json::json!({
            "processes": group.size(),
            "all_reduce_ms_per_step": 1000.0 * cost.seconds / steps,
            "all_reduce_bytes_per_step": cost.bytes as f64 / steps,
        })
    });
    if group.as_ref().is_some_and(|group| group.rank() != 0) {
        return Ok(());
    }
    let report = serde_json::json!({
        "adapter": device.adapter,
        "reason": device.reason,
        "devices": devices.all().iter().map(|d| d.adapter.clone()).collect::<Vec<_>>(),
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "model": config.model,
        "throughput": throughput,
        "time_to_accuracy": time_to_accuracy,
        "kernels": kernels,
        "ops": ops,
        "distributed": processes,
    });
    println!("{report}");
    Ok(())
}
