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
    use crate::cli::train::{asked_start, drive_shown, stop_on_interrupt};
    use crate::cli::{own_data, read_limited};
    use crate::config::DeviceList;
    use crate::device::{BackendChoice, hardware_gpus};
    use crate::distributed::{MpiGroup, devices_for_rank};
    use crate::session::driver::{Prepared, prepare};
    use crate::train::checkpoint::Checkpoint;
    use crate::train::checkpoint::format::MAX_CHECKPOINT_BYTES;
    use crate::train::{ProcessGroup, TrainControl};

    pub fn run_training(args: TrainArgs) -> Result<(), CliError> {
        let group = Rc::new(MpiGroup::join()?);
        let rank = group.rank();
        let ready = shared_checkpoint(&group, &args)
            .and_then(|checkpoint| get_ready(&args, checkpoint, &group));
        if let (Err(error), true) = (&ready, rank != 0) {
            eprintln!("webtrain: rank {rank}: {error}");
        }
        let agreed = group.agree(ready.as_ref().ok().map(|p| (p.config(), p.mnist())));
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

    /// The checkpoint a resumed run goes on from, as rank 0 read it: the other machines need
    /// no copy of the file.
    fn shared_checkpoint(
        group: &MpiGroup,
        args: &TrainArgs,
    ) -> Result<Option<Checkpoint>, CliError> {
        let Some(path) = &args.resume else {
            return Ok(None);
        };
        let read = match group.rank() {
            0 => read_limited(path, MAX_CHECKPOINT_BYTES),
            _ => Ok(Vec::new()),
        };
        let mut bytes = read.as_ref().map_or_else(|_| Vec::new(), Clone::clone);
        group.broadcast(&mut bytes);
        read?;
        let checkpoint = Checkpoint::from_bytes(&bytes).map_err(|source| CliError::Checkpoint {
            path: path.into(),
            source,
        })?;
        Ok(Some(checkpoint))
    }

    /// This process's run, prepared on its own devices: where the run names none, one
    /// hardware GPU a process by its place on its machine, when the machine has any.
    fn get_ready(
        args: &TrainArgs,
        checkpoint: Option<Checkpoint>,
        group: &MpiGroup,
    ) -> Result<Prepared, CliError> {
        let (mut config, start) = asked_start(args, checkpoint)?;
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
