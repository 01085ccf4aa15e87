//! A run that spans several processes (MPI's ranks, natively), as the loop sees it: each
//! process takes its shard of every batch, and one sum over the processes a step carries the
//! batch's gradients, its figures and whether any process was asked to stop. The loop knows
//! nothing of how the sum is made; the `mpi` feature makes it with MPI's all-reduce.

use std::ops::Range;

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;

use super::{EpochReport, TrainError};
use crate::model::{CLASSES, Net};

/// The processes of one run. Every process calls each method at the same point of the run,
/// with buffers of the same length: it is a collective operation.
pub trait ProcessGroup {
    /// This process's place among them, from 0; process 0 alone prints and writes.
    fn rank(&self) -> usize;
    /// How many processes the run spans.
    fn size(&self) -> usize;
    /// Sums `values` element by element over every process, in place.
    fn sum(&self, values: &mut [f32]);
    /// Sums `values` element by element over every process, in place, in double precision.
    fn sum_f64(&self, values: &mut [f64]);
    /// Each process's `value`, by rank.
    fn gather(&self, value: u64) -> Vec<u64>;
    /// What one step's sum cost: its seconds and bytes, for `webtrain bench`.
    fn record(&self, _seconds: f64, _bytes: usize) {}
    /// What the steps' sums have cost so far.
    fn cost(&self) -> ReduceCost {
        ReduceCost::default()
    }
    /// Keeps `failure`: a step failed on a process, and every process stopped before it.
    fn fail(&self, _failure: StepFailure) {}
    /// The failed step that stopped the run, if one did.
    fn failure(&self) -> Option<StepFailure> {
        None
    }
}

/// A step that failed on one process (a panic in its forward or backward pass: a fault of its
/// device or backend). Every process stops before that step, as if asked to, so that rank 0
/// writes the run's files, and then says so.
#[derive(Clone, Debug, PartialEq)]
pub struct StepFailure {
    /// The first process it failed on.
    pub rank: usize,
    /// The step that failed, from 0: the run stands before it.
    pub step: usize,
    /// Why, on the process it failed on; none on the others.
    pub why: Option<String>,
}

/// What the steps' sums over the processes cost, added up.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ReduceCost {
    pub steps: usize,
    pub seconds: f64,
    pub bytes: usize,
}

/// Where a run trains: the devices each batch is split over in this process (the first holds
/// the model), and the other processes of the run, if it spans several.
#[derive(Clone, Copy)]
pub struct Placement<'a> {
    pub devices: &'a [Device],
    pub group: Option<&'a dyn ProcessGroup>,
}

impl<'a> Placement<'a> {
    /// `devices` in this process alone.
    pub fn on(devices: &'a [Device]) -> Self {
        Self {
            devices,
            group: None,
        }
    }

    /// The device that holds the model.
    pub fn main(&self) -> &'a Device {
        &self.devices[0]
    }

    /// The part of a batch (or a test set) of `len` that this process takes: all of it alone.
    pub fn share(&self, len: usize) -> Range<usize> {
        match self.group {
            Some(group) => shard_ranges(len, group.size())[group.rank()].clone(),
            None => 0..len,
        }
    }
}

/// The ranges of a batch of `len` that `shards` devices take, in order: sizes differ by one at
/// most, the larger first.
pub fn shard_ranges(len: usize, shards: usize) -> Vec<Range<usize>> {
    let (base, extra) = (len / shards, len % shards);
    let mut start = 0;
    (0..shards)
        .map(|shard| {
            let size = base + usize::from(shard < extra);
            start += size;
            start - size..start
        })
        .collect()
}

/// A parameter's gradient as it travels: where it goes back to, and its shape.
struct Slot {
    id: ParamId,
    dims: Vec<usize>,
    device: Device,
}

/// Gathers the gradients of `grads`, in the model's order, into one buffer.
struct Flatten<'a> {
    grads: &'a mut GradientsParams,
    values: Vec<f32>,
    slots: Vec<Slot>,
}

impl ModuleVisitor for Flatten<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        // A process with no samples in the step gives nothing, as zeros: every process's
        // buffer has every parameter.
        let grad = match self.grads.remove::<D>(param.id) {
            Some(grad) => grad,
            None => Tensor::zeros(param.val().shape(), &param.val().device().inner()),
        };
        self.slots.push(Slot {
            id: param.id,
            dims: grad.dims().to_vec(),
            device: grad.device(),
        });
        let data = grad.into_data().convert::<f32>();
        self.values
            .extend_from_slice(data.as_slice::<f32>().expect("converted to f32"));
    }
}

/// Puts the summed buffer back as gradients, slot by slot.
struct Unflatten<'a> {
    values: &'a [f32],
    slots: std::slice::Iter<'a, Slot>,
    grads: GradientsParams,
}

impl ModuleVisitor for Unflatten<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let Some(slot) = self.slots.as_slice().first().filter(|s| s.id == param.id) else {
            return;
        };
        self.slots.next();
        let len: usize = slot.dims.iter().product();
        let (values, rest) = self.values.split_at(len);
        self.values = rest;
        let data = TensorData::new(values.to_vec(), slot.dims.clone());
        self.grads
            .register::<D>(slot.id, Tensor::from_data(data, &slot.device));
    }
}

/// What a step's sum over the processes gives every process alike.
pub(crate) struct Summed {
    /// The gradients of the whole batch.
    pub(crate) grads: GradientsParams,
    /// The batch's per-sample losses and hits, [rows, classes], in the batch's order.
    pub(crate) figures: [Tensor<2>; 2],
    /// Whether any process was asked to stop.
    pub(crate) stop: bool,
    /// The first process whose step failed, if one did: the sums then mean nothing.
    pub(crate) failed: Option<usize>,
}

/// One step's gradients and figures summed over `group`, whether any process asked to stop,
/// and whether its step failed on any (`failed` on this one: its gradients and figures are
/// none). This process's `figures` sit at `at` in a batch of `batch`.
pub(crate) fn sum_step(
    group: &dyn ProcessGroup,
    model: &Net,
    mut grads: GradientsParams,
    figures: Option<[Tensor<2>; 2]>,
    (at, batch): (Range<usize>, usize),
    (stop, failed): (bool, bool),
) -> Summed {
    let started = web_time::Instant::now();
    let mut flat = Flatten {
        grads: &mut grads,
        values: Vec::new(),
        slots: Vec::new(),
    };
    model.visit(&mut flat);
    let Flatten {
        mut values, slots, ..
    } = flat;
    let gradients = values.len();
    let device = model.devices()[0].clone().inner();
    // Each figure in its sample's row of the whole batch, zero elsewhere: the sum is the
    // batch's.
    for n in 0..2 {
        let mut rows = vec![0.0; batch * CLASSES];
        if let Some(figures) = &figures {
            let data = figures[n].clone().into_data().convert::<f32>();
            rows[at.start * CLASSES..at.end * CLASSES]
                .copy_from_slice(data.as_slice::<f32>().expect("converted to f32"));
        }
        values.extend(rows);
    }
    values.push(f32::from(u8::from(stop)));
    // One place a process, where it says whether its step failed: the sum names the first.
    let mut failures = vec![0.0; group.size()];
    failures[group.rank()] = f32::from(u8::from(failed));
    values.extend(failures);
    group.sum(&mut values);
    let mut back = Unflatten {
        values: &values[..gradients],
        slots: slots.iter(),
        grads: GradientsParams::new(),
    };
    model.visit(&mut back);
    let figure = |n: usize| {
        let from = gradients + n * batch * CLASSES;
        let rows = values[from..from + batch * CLASSES].to_vec();
        Tensor::from_data(TensorData::new(rows, [batch, CLASSES]), &device)
    };
    let flags = &values[gradients + 2 * batch * CLASSES..];
    let summed = Summed {
        grads: back.grads,
        figures: [figure(0), figure(1)],
        stop: flags[0] > 0.0,
        failed: flags[1..].iter().position(|&failed| failed > 0.0),
    };
    group.record(
        started.elapsed().as_secs_f64(),
        values.len() * size_of::<f32>(),
    );
    summed
}

/// Checks, at `epoch`'s end, that every process holds the same weights: they step the same
/// optimizer on the same sums, so that a difference is a fault (a process on other settings
/// or other data), which ends the run.
pub(crate) fn check_in_step(
    group: &dyn ProcessGroup,
    model: &Net,
    epoch: usize,
) -> Result<(), TrainError> {
    let hashes = group.gather(weights_hash(model));
    match hashes.iter().position(|hash| *hash != hashes[0]) {
        None => Ok(()),
        Some(rank) => Err(TrainError::Drifted { epoch, rank }),
    }
}

/// The test set's figures over every process, from each one's share.
pub(crate) fn sum_reports(group: &dyn ProcessGroup, report: EpochReport) -> EpochReport {
    let mut values = vec![
        f64::from(report.test_loss) * report.total as f64,
        report.total as f64,
    ];
    values.extend(report.confusion.iter().flatten().map(|&n| n as f64));
    group.sum_f64(&mut values);
    let mut confusion = [[0; CLASSES]; CLASSES];
    for (cell, value) in confusion.iter_mut().flatten().zip(&values[2..]) {
        *cell = *value as usize;
    }
    let total = values[1] as usize;
    EpochReport {
        epoch: report.epoch,
        test_loss: (values[0] / values[1].max(1.0)) as f32,
        correct: (0..CLASSES).map(|digit| confusion[digit][digit]).sum(),
        total,
        confusion: Box::new(confusion),
    }
}

/// A hash of `model`'s weights, as their bytes: equal on every process while none drifts.
fn weights_hash(model: &Net) -> u64 {
    struct Hash(u64);
    impl ModuleVisitor for Hash {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let data = param.val().into_data().convert::<f32>();
            for byte in data.as_bytes() {
                // FNV-1a.
                self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    let mut hash = Hash(0xcbf2_9ce4_8422_2325);
    model.visit(&mut hash);
    hash.0
}
