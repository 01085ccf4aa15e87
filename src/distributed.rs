//! A run over several processes and machines on MPI (the `mpi` feature): `mpirun -np N
//! webtrain train --distributed mpi …`. Open MPI starts the processes and carries every byte
//! between them; here its collectives are the loop's [`ProcessGroup`], and the processes check
//! before the first step that they train the same run.

use std::cell::Cell;

use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use thiserror::Error;

use crate::config::settings::SETTINGS;
use crate::config::{DeviceList, DeviceName, TrainConfig};
use crate::data::Mnist;
use crate::train::group::{ProcessGroup, ReduceCost};

#[derive(Debug, Error)]
pub enum DistributedError {
    #[error("MPI did not start: is this process started by mpirun, and only once?")]
    NotStarted,
    #[error(
        "rank {rank} was given another --{setting} than rank 0: every process must train the \
         same run"
    )]
    OtherSetting { rank: usize, setting: String },
    #[error(
        "rank {rank} has other MNIST files than rank 0: every process must train on the same data"
    )]
    OtherData { rank: usize },
    #[error("rank {rank} could not start (it said why)")]
    RankFailed { rank: usize },
}

/// This process's place in the run: MPI's world, kept open while the run lasts.
pub struct MpiGroup {
    world: SimpleCommunicator,
    cost: Cell<ReduceCost>,
    /// Closes MPI when the group is dropped: the last thing the process does with it.
    _universe: Universe,
}

impl MpiGroup {
    /// Joins the processes mpirun started.
    pub fn join() -> Result<Self, DistributedError> {
        let universe = mpi::initialize().ok_or(DistributedError::NotStarted)?;
        Ok(Self {
            world: universe.world(),
            cost: Cell::new(ReduceCost::default()),
            _universe: universe,
        })
    }

    /// Ends every process of the run at once, with `code`: what a process that failed mid-run
    /// does, rather than leave the others waiting for it.
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    /// This process's place among those on its machine, as Open MPI numbers them.
    pub fn local_rank(&self) -> usize {
        std::env::var("OMPI_COMM_WORLD_LOCAL_RANK")
            .ok()
            .and_then(|rank| rank.parse().ok())
            .unwrap_or(self.rank())
    }

    /// Rank 0's bytes, on every process.
    pub fn broadcast(&self, bytes: &mut Vec<u8>) {
        let root = self.world.process_at_rank(0);
        let mut len = bytes.len() as u64;
        root.broadcast_into(&mut len);
        bytes.resize(len as usize, 0);
        // Every process knows the length now: none sends an empty buffer, which MPI refuses.
        if len > 0 {
            root.broadcast_into(&mut bytes[..]);
        }
    }

    /// Checks that every process trains the run rank 0 trains: the same settings (their
    /// devices aside: each machine has its own) and the same data. `ready` is none where this
    /// process could not get ready, and has said why: no process waits on one that gave up.
    pub fn agree(&self, ready: Option<(&TrainConfig, &Mnist)>) -> Result<(), DistributedError> {
        let mine = ready
            .map(|(config, _)| agreed_pairs(config))
            .unwrap_or_default();
        let fingerprint = ready.map(|(_, data)| data_fingerprint(data));
        let mut theirs = serde_json::to_vec(&(&mine, fingerprint)).unwrap_or_default();
        self.broadcast(&mut theirs);
        let (rank0, rank0_data): (Vec<(String, String)>, Option<u64>) =
            serde_json::from_slice(&theirs).unwrap_or_default();
        // 0: as rank 0; 1 + a setting's index: that setting differs; DATA: the data; FAILED.
        const DATA: u64 = 1000;
        const FAILED: u64 = 1001;
        let differing = mine.iter().zip(&rank0).position(|(a, b)| a != b);
        let code = match (ready, differing) {
            (None, _) => FAILED,
            (Some(_), Some(index)) => 1 + index as u64,
            (Some(_), None) if fingerprint != rank0_data => DATA,
            (Some(_), None) => 0,
        };
        let codes = self.gather(code);
        let Some((rank, &code)) = codes.iter().enumerate().find(|(_, code)| **code != 0) else {
            return Ok(());
        };
        Err(match code {
            FAILED => DistributedError::RankFailed { rank },
            DATA => DistributedError::OtherData { rank },
            index => DistributedError::OtherSetting {
                rank,
                setting: mine
                    .get(index as usize - 1)
                    .map_or_else(String::new, |(name, _)| name.replace('_', "-")),
            },
        })
    }
}

/// Every setting but the devices, as (name, text).
fn agreed_pairs(config: &TrainConfig) -> Vec<(String, String)> {
    let settings = SETTINGS.iter().filter(|s| s.name != "devices");
    settings
        .map(|s| (s.name.to_string(), s.text(config)))
        .collect()
}

/// A hash of the training and test images and labels: equal where the files are.
fn data_fingerprint(data: &Mnist) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    for split in [&data.train, &data.test] {
        for index in 0..split.len() {
            for &byte in split.image(index).iter().chain([&split.label(index)]) {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    hash
}

/// The devices of this process: as asked, but where the run asks for none, one hardware GPU
/// each, by the process's place on its machine, when the machine has any.
pub fn devices_for_rank(asked: &DeviceList, local_rank: usize, gpus: usize) -> DeviceList {
    match asked {
        DeviceList::Auto if gpus > 0 => {
            DeviceList::Named(vec![DeviceName::Gpu(Some(local_rank % gpus))])
        }
        other => other.clone(),
    }
}

impl ProcessGroup for MpiGroup {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn sum(&self, values: &mut [f32]) {
        let mine = values.to_vec();
        self.world
            .all_reduce_into(&mine[..], values, SystemOperation::sum());
    }

    fn sum_f64(&self, values: &mut [f64]) {
        let mine = values.to_vec();
        self.world
            .all_reduce_into(&mine[..], values, SystemOperation::sum());
    }

    fn gather(&self, value: u64) -> Vec<u64> {
        let mut values = vec![0u64; self.size()];
        self.world.all_gather_into(&value, &mut values[..]);
        values
    }

    fn cost(&self) -> ReduceCost {
        self.cost.get()
    }

    fn record(&self, seconds: f64, bytes: usize) {
        let mut cost = self.cost.get();
        cost.steps += 1;
        cost.seconds += seconds;
        cost.bytes += bytes;
        self.cost.set(cost);
    }
}
