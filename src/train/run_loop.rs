//! The loop itself, on one device: a run between its steps, and the steps it takes, each
//! named: a training step, a stop asked for, a divergence, an epoch's end, and the end.

use std::sync::Arc;

use burn::prelude::*;
use web_time::{Duration, Instant};

use super::checkpoint::{Checkpoint, Position};
use super::early_stop::{EarlyStopState, Verdict};
use super::end::End;
use super::group::{Placement, ProcessGroup, check_in_step, sum_reports};
use super::interval::IntervalMeter;
use super::optimizer::Optimizer;
use super::optimizer::Rates;
use super::schedule;
use super::step::Stepper;
use super::{
    Divergence, MemoryReport, Outcome, Start, StepReport, TrainControl, TrainError, TrainEvent,
    Trained, evaluate, evaluate_range,
};
use crate::config::TrainConfig;
use crate::data::Mnist;
use crate::data::batcher::{MnistBatcher, epoch_order};
use crate::inspect::probe::LearningProbe;
use crate::inspect::watch::LearningWatch;
use crate::model::{LAYERS, Net};
use crate::platform;

/// A run between two steps on one device, but for its model, which each step takes and gives
/// back: a step that held a second reference to the weights would keep the backend from
/// updating them in place.
pub(super) struct RunLoop<'a> {
    /// The settings as they stand: the learning rate may change while the run goes.
    config: TrainConfig,
    data: &'a Mnist,
    device: &'a Device,
    /// The other processes of a run that spans several.
    group: Option<&'a dyn ProcessGroup>,
    stepper: Stepper<'a>,
    optim: Optimizer,
    early: EarlyStopState,
    /// What a diverged run returns: the last weights whose loss was read and finite.
    last_finite: Net,
    meter: IntervalMeter,
    /// Warns of the learning figures that mean trouble.
    watch: LearningWatch,
    /// The step whose learning figures were taken last.
    learned_at: Option<usize>,
    test_batcher: MnistBatcher,
    position: Position,
    /// Wall-clock time spent training: pauses, evaluation and checkpoints are out.
    training_time: Duration,
    epoch_len: usize,
    batches_per_epoch: usize,
}

/// Learning figures come at most this many steps apart, at log lines: gathering them costs
/// about a step or two, which a run that logs every step would pay at each.
const LEARNING_EVERY: usize = 10;

/// What a step leaves the loop to do.
enum Next {
    Train(Net),
    /// A process of the run was asked to stop, or its step failed: all stop at the same step.
    Stop(Net),
    End(Result<Trained, TrainError>),
}

impl<'a> RunLoop<'a> {
    /// The loop from `start`, and the model it trains: `start`'s, on the first of `devices`,
    /// over which each batch is split.
    pub(super) fn new(
        start: Start,
        config: &TrainConfig,
        data: &'a Mnist,
        placement: Placement<'a>,
    ) -> (Self, Net) {
        let device = placement.main();
        let epoch_len = data.train.len_within(config.train_limit);
        let stepper = Stepper::over(placement, &data.train, epoch_len)
            .augmented(&config.augment, config.seed);
        let model = stepper.trainable(start.model);
        let reads_are_free = *device == Device::flex();
        let run = Self {
            config: config.clone(),
            data,
            device,
            group: placement.group,
            last_finite: model.clone(),
            stepper,
            optim: start.optimizer,
            early: start.early_stop,
            meter: IntervalMeter::new(epoch_len, config.batch_size, reads_are_free),
            watch: LearningWatch::default(),
            learned_at: None,
            test_batcher: MnistBatcher::new(device.clone()),
            training_time: Duration::from_secs_f64(start.position.training_secs),
            position: start.position,
            epoch_len,
            batches_per_epoch: epoch_len.div_ceil(config.batch_size),
        };
        (run, model)
    }

    /// Trains to the run's end; `last` is kept up to date with the run's checkpoints.
    pub(super) async fn run(
        mut self,
        mut model: Net,
        control: &TrainControl,
        on_event: &mut impl FnMut(TrainEvent),
        last: &mut Checkpoint,
    ) -> Result<Trained, TrainError> {
        while self.position.epoch <= self.config.epochs {
            let order = epoch_order(self.epoch_len, self.config.seed, self.position.epoch);
            let batch_size = self.config.batch_size;
            let first = self.position.batch;
            for (batch, indices) in order.chunks(batch_size).enumerate().skip(first) {
                // A rate asked for from outside scales the schedule from this step on.
                let scheduled = self.rates().lr;
                let mut asked = scheduled;
                let proceed = control.between_steps(self.position.step + 1, &mut asked, on_event);
                let proceed = proceed.await;
                // The processes of a run stop together: the request travels with the step.
                if !proceed && self.group.is_none() {
                    return self.stop(model, &order, on_event, last).await;
                }
                if asked != scheduled {
                    schedule::rescale(&mut self.config, asked, scheduled);
                }
                let step = (batch, indices, order.as_slice());
                model = match self.step(model, step, !proceed, on_event, last).await? {
                    Next::Train(model) => model,
                    Next::Stop(model) => return self.stop(model, &order, on_event, last).await,
                    Next::End(end) => return end,
                };
            }
            model = match self.end_epoch(model, on_event, last).await? {
                Next::Train(model) => model,
                Next::Stop(_) => unreachable!("an epoch's end asks no process"),
                Next::End(end) => return end,
            };
        }
        self.end(model, Outcome::Completed, on_event)
    }

    /// The rates of the step to take.
    fn rates(&self) -> Rates {
        schedule::rates(&self.config, self.position.step, self.batches_per_epoch)
    }

    fn samples_per_sec(&self, time: Duration) -> f64 {
        self.position.trained_samples as f64 / time.as_secs_f64().max(1e-9)
    }

    /// A checkpoint of `model` where the run stands, with the order of the epoch it is in.
    async fn checkpoint(
        &self,
        model: &Net,
        order: &[usize],
        on_event: &mut impl FnMut(TrainEvent),
        last: &mut Checkpoint,
    ) -> Result<(), TrainError> {
        let (config, position) = (&self.config, self.position);
        *last =
            Checkpoint::capture(config, position, order, model, &self.optim, &self.early).await?;
        on_event(TrainEvent::Checkpoint(Arc::new(last.clone())));
        Ok(())
    }

    /// Stopped before a step: its open interval read, and a checkpoint of the step it stopped
    /// at, where it goes on from.
    async fn stop(
        mut self,
        model: Net,
        order: &[usize],
        on_event: &mut impl FnMut(TrainEvent),
        last: &mut Checkpoint,
    ) -> Result<Trained, TrainError> {
        self.meter.end_open();
        for interval in self.meter.read(None).await?.1 {
            on_event(TrainEvent::Interval(interval));
        }
        self.checkpoint(&model, order, on_event, last).await?;
        self.end(model, Outcome::Stopped, on_event)
    }

    /// One training step of `model` on the samples at `indices`, the `batch`th of the epoch
    /// whose order is `order`.
    async fn step(
        &mut self,
        model: Net,
        (batch, indices, order): (usize, &[usize], &[usize]),
        stop: bool,
        on_event: &mut impl FnMut(TrainEvent),
        last: &mut Checkpoint,
    ) -> Result<Next, TrainError> {
        let rates = self.rates();
        let started = Instant::now();
        // Reading the loss waits for the device: only every log interval, so the queue stays
        // full, and at the end of an epoch, so that the epoch's training time holds all its
        // work rather than leaving some to the evaluation.
        let logged = batch % self.config.log_interval == 0;
        let checked = logged || batch + 1 == self.batches_per_epoch;
        // The weights this loss is computed with: kept if it is finite.
        let weights = checked.then(|| model.clone());
        // A log line's learning figures, at most every `LEARNING_EVERY` steps.
        let number = self.position.step + 1;
        let watched = logged
            && self
                .learned_at
                .is_none_or(|at| number >= at + LEARNING_EVERY);
        if watched {
            self.learned_at = Some(number);
        }
        let at = (self.position.step, indices);
        let stepped = (self.stepper).step_watched(model, &mut self.optim, rates, at, stop, watched);
        if stepped.failed {
            // No process took the step: the run stands before it.
            return Ok(Next::Stop(stepped.model));
        }
        let (model, stats, stop) = (stepped.model, stepped.stats, stepped.stop);
        self.position.step += 1;
        let probe = stepped
            .gradients
            .zip(weights.as_ref())
            .map(|(gradients, before)| {
                let place = (self.position.epoch, self.position.step);
                let images = self.stepper.images(indices);
                let outputs = model.valid().layer_outputs(images);
                let frozen = LAYERS.map(|layer| self.optim.frozen(layer));
                LearningProbe::gather(place, (before, &model), gradients, frozen, &outputs)
            });
        self.position.batch = batch + 1;
        let at_step = self.training_time + started.elapsed();
        let epoch = self.position.epoch;
        let place = (epoch, self.position.step, batch);
        self.meter.add(&stats, place, at_step.as_secs_f64());
        let (read, intervals) = match checked || self.meter.wants_read() {
            true => self.meter.read(checked.then(|| stats.loss())).await?,
            false => (None, Vec::new()),
        };
        let intervals = intervals.into_iter().map(TrainEvent::Interval);
        self.position.trained_samples += indices.len();
        let so_far = self.training_time + started.elapsed();
        if let Some(loss) = read.filter(|l| !l.is_finite()) {
            intervals.for_each(&mut *on_event);
            return Ok(Next::End(self.diverge(loss, rates, on_event)));
        }
        if let Some(weights) = weights {
            self.last_finite = weights;
        }
        on_event(TrainEvent::Step(StepReport {
            epoch,
            step: self.position.step,
            batch,
            batches_per_epoch: self.batches_per_epoch,
            batch_size: self.config.batch_size,
            seen: batch * self.config.batch_size + indices.len(),
            epoch_len: self.epoch_len,
            loss: read.filter(|_| logged),
            samples_per_sec: self.samples_per_sec(so_far),
            training_secs: so_far.as_secs_f64(),
            lr: rates.lr,
        }));
        intervals.for_each(&mut *on_event);
        if let Some(probe) = probe {
            let report = probe.read().await?;
            for warning in self.watch.observe(&report) {
                on_event(TrainEvent::Warning(warning));
            }
            on_event(TrainEvent::Learning(Box::new(report)));
        }
        platform::yield_now().await;
        // Wall-clock, the yield included: the device works on while the loop waits, and what
        // the browser does between steps delays the run too.
        self.training_time += started.elapsed();
        self.position.training_secs = self.training_time.as_secs_f64();
        if stop {
            return Ok(Next::Stop(model));
        }
        // The epoch's last batch is followed by its evaluation, and a checkpoint after it.
        if logged && self.position.batch < self.batches_per_epoch {
            self.checkpoint(&model, order, on_event, last).await?;
        }
        Ok(Next::Train(model))
    }

    /// The loss is not finite: the run ends with the last weights whose loss was.
    fn diverge(
        &mut self,
        loss: f32,
        rates: Rates,
        on_event: &mut impl FnMut(TrainEvent),
    ) -> Result<Trained, TrainError> {
        on_event(TrainEvent::Diverged(Divergence {
            epoch: self.position.epoch,
            step: self.position.step,
            lr: rates.lr,
            loss,
        }));
        let end = End::new(Outcome::Diverged, 0.0, &self.early);
        end.finish(
            self.last_finite.clone(),
            &self.config,
            self.device,
            on_event,
        )
    }

    /// The test set evaluated, early stopping asked, and a checkpoint of the next epoch's start.
    async fn end_epoch(
        &mut self,
        model: Net,
        on_event: &mut impl FnMut(TrainEvent),
        last: &mut Checkpoint,
    ) -> Result<Next, TrainError> {
        let epoch = self.position.epoch;
        let test_len = self.data.test.len_within(self.config.test_limit);
        let report = match self.group {
            None => evaluate(&model, &self.data.test, test_len, &self.test_batcher, epoch).await?,
            Some(group) => {
                check_in_step(group, &model, epoch)?;
                let share = self.stepper.share(test_len);
                let part =
                    evaluate_range(&model, &self.data.test, share, &self.test_batcher, epoch);
                sum_reports(group, part.await?)
            }
        };
        let verdict = self.early.observe(&self.config.early_stop, &report);
        on_event(TrainEvent::Epoch(report));
        on_event(TrainEvent::Memory(MemoryReport::sample(epoch, self.device)));
        self.position.epoch += 1;
        self.position.batch = 0;
        let next_order = epoch_order(self.epoch_len, self.config.seed, self.position.epoch);
        let (config, position) = (&self.config, self.position);
        *last = Checkpoint::capture(
            config,
            position,
            &next_order,
            &model,
            &self.optim,
            &self.early,
        )
        .await?;
        // The best epoch's weights are this checkpoint's: read back once, kept on the host.
        if let (Verdict::Improved, Some(best)) = (verdict, &mut self.early.best) {
            best.weights = Arc::new(last.weights.clone());
            last.early_stop = self.early.clone();
        }
        on_event(TrainEvent::Checkpoint(Arc::new(last.clone())));
        match verdict {
            Verdict::Stop => Ok(Next::End(self.end(model, Outcome::EarlyStopped, on_event))),
            _ => Ok(Next::Train(model)),
        }
    }

    /// The run's end: its outcome said, and the model it keeps (`model`, or early stopping's
    /// best epoch's).
    fn end(
        &self,
        model: Net,
        outcome: Outcome,
        on_event: &mut impl FnMut(TrainEvent),
    ) -> Result<Trained, TrainError> {
        let end = End::new(
            outcome,
            self.samples_per_sec(self.training_time),
            &self.early,
        );
        end.finish(model, &self.config, self.device, on_event)
    }
}
