//! A run over several processes and machines on MPI (the `mpi` feature): `mpirun -np N
//! webtrain train --distributed mpi …`. Open MPI starts the processes and carries every byte
//! between them; here its collectives are the loop's [`ProcessGroup`], and the processes check
//! before the first step that they train the same run.

use std::cell::{Cell, RefCell};

use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use thiserror::Error;

use crate::config::settings::SETTINGS;
use crate::config::{DeviceList, DeviceName, TrainConfig};
use crate::data::Mnist;
use crate::device::{BackendKind, TrainDevice};
use crate::train::group::{ProcessGroup, ReduceCost, StepFailure};

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
        "rank {rank} runs another build of webtrain than rank 0 (webtrain {}): every process \
         must run the same build",
        env!("CARGO_PKG_VERSION")
    )]
    OtherBuild { rank: usize },
    #[error(
        "rank {rank} computes on another device than rank 0 ({rank0}), and processes that \
         compute differently part ways: every process must compute on the same kind of device \
         (the same kind of GPU, or CPUs with the same vectors), by its --backend and --devices"
    )]
    OtherDevice { rank: usize, rank0: String },
    #[error(
        "rank {rank} has other MNIST files than rank 0: every process must train on the same data"
    )]
    OtherData { rank: usize },
    #[error(
        "rank {rank}'s --data folder lacks MNIST's test files (t10k-images-idx3-ubyte, \
         t10k-labels-idx1-ubyte), which rank 0's holds: every process must train on the same data"
    )]
    NoTestFiles { rank: usize },
    #[error(
        "rank {rank}'s --data folder holds MNIST's test files and rank 0's does not: every \
         process must train on the same data"
    )]
    OnlyItsTestFiles { rank: usize },
    #[error("rank {rank} could not start (it said why)")]
    RankFailed { rank: usize },
    #[error(
        "rank {rank} failed in step {step} (it said why): every process stopped before that \
         step, and rank 0 wrote the run; go on with: mpirun … webtrain train --distributed mpi \
         --resume {}",
        .checkpoint.display()
    )]
    StepFailed {
        rank: usize,
        step: usize,
        checkpoint: std::path::PathBuf,
    },
}

/// This process's place in the run: MPI's world, kept open while the run lasts.
pub struct MpiGroup {
    world: SimpleCommunicator,
    /// Its place among the processes on its machine.
    local_rank: usize,
    cost: Cell<ReduceCost>,
    /// The step that failed on a process and stopped the run, once one has.
    failure: RefCell<Option<StepFailure>>,
    /// Closes MPI when the group is dropped: the last thing the process does with it.
    _universe: Universe,
}

/// What every process must share with rank 0 before the first step: its settings (their
/// devices aside: each machine has its own), the build, the kind of device that does its
/// arithmetic, and its data.
pub struct Agreement {
    /// (name, text): the build, the device, then every setting but the devices.
    pairs: Vec<(String, String)>,
    data: DataPrint,
}

/// The data a process trains on, as much as the agreement needs of it.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct DataPrint {
    /// Whether the data folder holds MNIST's test files (without them it is one's own digits,
    /// a fifth held out).
    test_files: bool,
    /// A hash of the training and test images and labels: equal where the files are.
    fingerprint: u64,
}

const BUILD: &str = "build";
const DEVICE: &str = "device";

impl Agreement {
    /// The agreement of a run of `config` on `data`, whose arithmetic `device` does.
    pub fn new(config: &TrainConfig, data: &Mnist, test_files: bool, device: &TrainDevice) -> Self {
        let mut pairs = vec![
            (BUILD.to_string(), build()),
            (DEVICE.to_string(), arithmetic(device)),
        ];
        let settings = SETTINGS.iter().filter(|s| s.name != "devices");
        pairs.extend(settings.map(|s| (s.name.to_string(), s.text(config))));
        Self {
            pairs,
            data: DataPrint {
                test_files,
                fingerprint: data_fingerprint(data),
            },
        }
    }
}

/// This build of webtrain, as the agreement compares it.
fn build() -> String {
    let version = format!("webtrain {}", env!("CARGO_PKG_VERSION"));
    // A build that says it is another: what the tests provoke, in debug builds only.
    #[cfg(debug_assertions)]
    if let Ok(pretended) = std::env::var("WEBTRAIN_PRETEND_BUILD") {
        return pretended;
    }
    version
}

/// What does a process's arithmetic: the CPU by the vectors its kernels use, or a GPU by its
/// adapter, whichever of the machine's GPUs it is (`gpu:1, X` computes as `gpu:0, X` does).
fn arithmetic(device: &TrainDevice) -> String {
    match device.kind {
        BackendKind::Cpu => format!("the CPU, {}", cpu_vectors()),
        BackendKind::Gpu => match device.adapter.split_once(", ") {
            Some((index, adapter)) if index.starts_with("gpu:") => adapter.to_string(),
            _ => device.adapter.clone(),
        },
    }
}

/// The widest vectors the CPU backend's kernels choose on this CPU, as they choose at run time:
/// a matrix product on AVX-512 adds in another order than on AVX2, so processes on CPUs that
/// differ in it would part a little at every step.
fn cpu_vectors() -> String {
    // A CPU that says it is another: what the tests provoke, in debug builds only.
    #[cfg(debug_assertions)]
    if let Ok(pretended) = std::env::var("WEBTRAIN_PRETEND_CPU") {
        return pretended;
    }
    #[cfg(target_arch = "x86_64")]
    let vectors = match (
        std::arch::is_x86_feature_detected!("avx512f"),
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
    ) {
        (true, _) => "x86-64 with AVX-512".to_string(),
        (false, true) => "x86-64 with AVX2".to_string(),
        (false, false) => "x86-64 with SSE".to_string(),
    };
    #[cfg(not(target_arch = "x86_64"))]
    let vectors = std::env::consts::ARCH.to_string();
    vectors
}

impl MpiGroup {
    /// Joins the processes mpirun started.
    pub fn join() -> Result<Self, DistributedError> {
        let universe = mpi::initialize().ok_or(DistributedError::NotStarted)?;
        let world = universe.world();
        // The processes that share this one's memory are those on its machine, whichever MPI
        // started them (Open MPI, MPICH, Slurm's srun): none of their variables is needed.
        let local_rank = world.split_shared(world.rank()).rank() as usize;
        Ok(Self {
            world,
            local_rank,
            cost: Cell::new(ReduceCost::default()),
            failure: RefCell::new(None),
            _universe: universe,
        })
    }

    /// Ends every process of the run at once, with `code`: what a process that failed mid-run
    /// does, rather than leave the others waiting for it.
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    /// Waits until every process has come this far.
    pub fn barrier(&self) {
        self.world.barrier();
    }

    /// This process's place among those on its machine.
    pub fn local_rank(&self) -> usize {
        self.local_rank
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

    /// Checks that every process trains the run rank 0 trains (`Agreement`). `ready` is none
    /// where this process could not get ready, and has said why: no process waits on one that
    /// gave up. A process that differs says how, in its own line.
    pub fn agree(&self, ready: Option<&Agreement>) -> Result<(), DistributedError> {
        let mine = ready.map(|a| a.pairs.clone()).unwrap_or_default();
        let data = ready.map(|a| a.data);
        let mut theirs = serde_json::to_vec(&(&mine, data)).unwrap_or_default();
        self.broadcast(&mut theirs);
        let (rank0, rank0_data): (Vec<(String, String)>, Option<DataPrint>) =
            serde_json::from_slice(&theirs).unwrap_or_default();
        // 0: as rank 0; 1 + a pair's index: that pair differs; then the data's and FAILED.
        const DATA: u64 = 1000;
        const FAILED: u64 = 1001;
        const TEST_FILES: u64 = 1002;
        let differing = mine.iter().zip(&rank0).position(|(a, b)| a != b);
        let code = match (data, differing, rank0_data) {
            (None, _, _) => FAILED,
            (Some(_), Some(index), _) => 1 + index as u64,
            (Some(ours), None, Some(rank0)) if ours.test_files != rank0.test_files => TEST_FILES,
            (Some(ours), None, rank0) if Some(ours) != rank0 => DATA,
            (Some(_), None, _) => 0,
        };
        if let Some(index) = differing
            && let (Some((name, ours)), Some((_, rank0))) = (mine.get(index), rank0.get(index))
        {
            eprintln!(
                "webtrain: rank {}: its {name} is {ours}, rank 0's {rank0}",
                self.rank()
            );
        }
        let codes = self.gather(code);
        let Some((rank, &code)) = codes.iter().enumerate().find(|(_, code)| **code != 0) else {
            return Ok(());
        };
        let name = |index: u64| mine.get(index as usize - 1).cloned().unwrap_or_default();
        Err(match code {
            FAILED => DistributedError::RankFailed { rank },
            DATA => DistributedError::OtherData { rank },
            TEST_FILES if data.is_some_and(|d| d.test_files) => {
                DistributedError::NoTestFiles { rank }
            }
            TEST_FILES => DistributedError::OnlyItsTestFiles { rank },
            index => match name(index) {
                (pair, _) if pair == BUILD => DistributedError::OtherBuild { rank },
                (pair, rank0) if pair == DEVICE => DistributedError::OtherDevice { rank, rank0 },
                (setting, _) => DistributedError::OtherSetting {
                    rank,
                    setting: setting.replace('_', "-"),
                },
            },
        })
    }
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

    fn fail(&self, failure: StepFailure) {
        self.failure.replace(Some(failure));
    }

    fn failure(&self) -> Option<StepFailure> {
        self.failure.borrow().clone()
    }
}
