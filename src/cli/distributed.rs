//! `webtrain train --distributed mpi`, one of the processes `mpirun` starts: each takes its
//! share of every batch, rank 0 alone prints and writes the run's folder. A step that fails on
//! one process stops them all before it, rank 0's files written; any other failure that is one
//! process's own ends them all (MPI's abort) rather than leave the others waiting.

use super::CliError;
use super::train::TrainArgs;

use std::rc::Rc;

use super::train::Distribution;
use crate::train::ProcessGroup;

#[cfg(not(feature = "mpi"))]
pub fn run_training(_args: TrainArgs) -> std::process::ExitCode {
    super::said(Err(CliError::NoMpi))
}

/// The processes of a benchmark that spans several, or none.
#[cfg(not(feature = "mpi"))]
pub fn join(how: Distribution) -> Result<Option<Rc<dyn ProcessGroup>>, CliError> {
    match how {
        Distribution::None => Ok(None),
        Distribution::Mpi => Err(CliError::NoMpi),
    }
}

#[cfg(feature = "mpi")]
pub use with_mpi::run_training;

/// The processes of a benchmark that spans several, or none.
#[cfg(feature = "mpi")]
pub fn join(how: Distribution) -> Result<Option<Rc<dyn ProcessGroup>>, CliError> {
    match how {
        Distribution::None => Ok(None),
        Distribution::Mpi => Ok(Some(Rc::new(crate::distributed::MpiGroup::join()?))),
    }
}

#[cfg(feature = "mpi")]
mod with_mpi {
    use std::path::{Path, PathBuf};
    use std::rc::Rc;

    use super::{CliError, TrainArgs};
    use crate::cli::said;
    use std::process::ExitCode;

    use crate::cli::train::{StartFiles, asked_start, drive_shown, stop_on_interrupt};
    use crate::cli::{own_data, read_limited};
    use crate::config::DeviceList;
    use crate::data::Mnist;
    use crate::device::{BackendChoice, hardware_gpus};
    use crate::distributed::{Agreement, DistributedError, MpiGroup, devices_for_rank};
    use crate::native::run_folder::CHECKPOINT;
    use crate::session::driver::{Prepared, prepare};
    use crate::train::checkpoint::Checkpoint;
    use crate::train::checkpoint::format::MAX_CHECKPOINT_BYTES;
    use crate::train::{ProcessGroup, StepFailure, TrainControl};
    use crate::weights::MAX_WEIGHTS_BYTES;

    /// This process's share of the run, and how it ended: said, and waited for on every
    /// process, before any ends. mpirun ends the whole job as soon as one process exits with
    /// other than 0, which would cut another's last words, or its files, short.
    pub fn run_training(args: TrainArgs) -> ExitCode {
        let group = match MpiGroup::join() {
            Ok(group) => Rc::new(group),
            Err(error) => return said(Err(error.into())),
        };
        let ended = said(train(&group, args));
        group.barrier();
        ended
    }

    fn train(group: &Rc<MpiGroup>, args: TrainArgs) -> Result<(), CliError> {
        let rank = group.rank();
        let ready = shared_start(group, &args).and_then(|files| get_ready(&args, files, group));
        if let (Err(error), true) = (&ready, rank != 0) {
            eprintln!("webtrain: rank {rank}: {error}");
        }
        let test_files = Mnist::has_test_split(&args.run.setup.data);
        let agreement = ready
            .as_ref()
            .ok()
            .map(|p| Agreement::new(p.config(), p.mnist(), test_files, p.devices.main()));
        let agreed = group.agree(agreement.as_ref());
        let prepared = match (ready, agreed) {
            (Ok(prepared), Ok(())) => prepared,
            // Rank 0 says what is wrong; a rank that failed on its own has said why.
            (Err(error), _) if rank == 0 => return Err(error),
            (Ok(_), Err(error)) if rank == 0 => return Err(error.into()),
            _ => return Err(CliError::SaidByAnotherRank),
        };
        if rank == 0 {
            println!(
                "Distributed: {} processes on MPI, each taking its share of every batch",
                group.size()
            );
        }
        let prepared = prepared.in_group(group.clone());
        let ended = match rank {
            0 => drive_shown(&args, prepared).map(Some),
            _ => drive_quietly(prepared).map(|()| None),
        };
        match (ended, group.failure()) {
            (Ok(written), Some(failure)) => Err(step_failed(rank, failure, written)),
            // Every process ends a run the same way: each was stopped, or diverged, at the
            // same step.
            (Ok(_), None) => Ok(()),
            (Err(error @ (CliError::Interrupted { .. } | CliError::Diverged { .. })), _) => {
                Err(error)
            }
            (Err(error), _) => {
                eprintln!("webtrain: rank {rank}: {error}");
                group.abort(2)
            }
        }
    }

    /// What a process says once a step failed on `failure.rank` and every process stopped
    /// before it: the one it failed on, why; rank 0, where its run went (`written`).
    fn step_failed(rank: usize, failure: StepFailure, written: Option<PathBuf>) -> CliError {
        let StepFailure {
            rank: failed,
            step,
            why,
        } = failure;
        if let Some(why) = why {
            eprintln!("webtrain: rank {rank}: step {} failed: {why}", step + 1);
        }
        match written {
            Some(path) => DistributedError::StepFailed {
                rank: failed,
                step: step + 1,
                checkpoint: path.join(CHECKPOINT),
            }
            .into(),
            None => CliError::SaidByAnotherRank,
        }
    }

    /// The files the run starts from (`--resume`, `--init`), as rank 0 read them: the other
    /// machines need no copy, and every process starts where rank 0 does.
    fn shared_start(group: &MpiGroup, args: &TrainArgs) -> Result<StartFiles, CliError> {
        // Both broadcasts on every process before either can fail, so that they pair up.
        let checkpoint = shared_file(group, args.resume.as_deref(), MAX_CHECKPOINT_BYTES);
        let init = shared_file(group, args.init.as_deref(), MAX_WEIGHTS_BYTES);
        let checkpoint = checkpoint?
            .map(|bytes| {
                Checkpoint::from_bytes(&bytes).map_err(|source| CliError::Checkpoint {
                    path: args.resume.clone().unwrap_or_else(|| "--resume".into()),
                    source,
                })
            })
            .transpose()?;
        Ok(StartFiles {
            checkpoint,
            init: init?,
        })
    }

    /// The file at `path` as rank 0 read it, on every process; none where rank 0 was given
    /// none. Every process calls it whatever its own arguments say, so that the broadcasts
    /// pair up; a file rank 0 cannot read is rank 0's to report.
    fn shared_file(
        group: &MpiGroup,
        path: Option<&Path>,
        limit: usize,
    ) -> Result<Option<Vec<u8>>, CliError> {
        let read = match (group.rank(), path) {
            (0, Some(path)) => Some(read_limited(path, limit)),
            _ => None,
        };
        // A leading 1 and the file where rank 0 has it; nothing where it has none.
        let mut shared = match &read {
            Some(Ok(bytes)) => [&[1][..], bytes].concat(),
            _ => Vec::new(),
        };
        group.broadcast(&mut shared);
        if let Some(Err(error)) = read {
            return Err(error);
        }
        Ok((!shared.is_empty()).then(|| shared.split_off(1)))
    }

    /// This process's run, prepared on its own devices: where the run names none, one
    /// hardware GPU a process by its place on its machine, when the machine has any.
    fn get_ready(
        args: &TrainArgs,
        files: StartFiles,
        group: &MpiGroup,
    ) -> Result<Prepared, CliError> {
        let (mut config, start) = asked_start(args, Some(files))?;
        let backend = args.run.setup.backend;
        if config.devices == DeviceList::Auto && backend == BackendChoice::Auto {
            let gpus = pollster::block_on(hardware_gpus()).len();
            config.devices = devices_for_rank(&config.devices, group.local_rank(), gpus);
        }
        let data = own_data::load(&args.run.setup, &config)?;
        Ok(pollster::block_on(prepare(&config, start, data, backend))?)
    }

    /// A rank other than 0: it trains its share, prints nothing and writes nothing.
    fn drive_quietly(prepared: Prepared) -> Result<(), CliError> {
        let control = TrainControl::default();
        stop_on_interrupt(&control)?;
        let driven = pollster::block_on(prepared.drive(None, &control, |_| {}));
        driven.ended?;
        Ok(())
    }
}
