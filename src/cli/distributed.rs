//! `webtrain train --distributed mpi`, one of the processes `mpirun` starts: each takes its
//! share of every batch, rank 0 alone prints and writes the run's folder, and a failure that
//! is one process's own ends them all (MPI's abort) rather than leave the others waiting.

use super::CliError;
use super::train::TrainArgs;

use std::rc::Rc;

use super::train::Distribution;
use crate::train::ProcessGroup;

#[cfg(not(feature = "mpi"))]
pub fn run_training(_args: TrainArgs) -> Result<(), CliError> {
    Err(CliError::NoMpi)
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
    use std::rc::Rc;

    use super::{CliError, TrainArgs};
    use std::path::Path;

    use crate::cli::train::{StartFiles, asked_start, drive_shown, stop_on_interrupt};
    use crate::cli::{own_data, read_limited};
    use crate::config::DeviceList;
    use crate::data::Mnist;
    use crate::device::{BackendChoice, hardware_gpus};
    use crate::distributed::{Agreement, MpiGroup, devices_for_rank};
    use crate::session::driver::{Prepared, prepare};
    use crate::train::checkpoint::Checkpoint;
    use crate::train::checkpoint::format::MAX_CHECKPOINT_BYTES;
    use crate::train::{ProcessGroup, TrainControl};
    use crate::weights::MAX_WEIGHTS_BYTES;

    pub fn run_training(args: TrainArgs) -> Result<(), CliError> {
        let group = Rc::new(MpiGroup::join()?);
        let rank = group.rank();
        let ready = shared_start(&group, &args).and_then(|files| get_ready(&args, files, &group));
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
            0 => drive_shown(&args, prepared),
            _ => drive_quietly(prepared),
        };
        match ended {
            // Every process ends a run the same way: each was stopped, or diverged, at the
            // same step.
            Ok(()) | Err(CliError::Interrupted { .. } | CliError::Diverged { .. }) => ended,
            Err(error) => {
                eprintln!("webtrain: rank {rank}: {error}");
                group.abort(2)
            }
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
