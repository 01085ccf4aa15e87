//! The session's run, and who follows it; the warm-up that builds a run's kernels ahead of it.

use std::rc::Rc;
use std::sync::Arc;

use futures_channel::oneshot;
use web_time::Instant;

use super::driver::{Driven, Ended, RunData, RunStart, prepare};
use super::protocol::{
    Followed, Payload, RunEnded, RunFiles, Train, WarmUp as WarmUpRequest, WarmedUp,
};
use super::{Busy, Host, Model, Session, SessionError};
use crate::config::{ModelKind, TrainConfig};
use crate::device::{BackendKind, select_device};
use crate::model::Net;
use crate::platform::provoked_panic;
use crate::session::warm_up::warm_up;
use crate::train::checkpoint::Checkpoint;
use crate::train::{Outcome, TrainControl, TrainEvent};
use crate::weights::to_safetensors;

/// The run going: its control, and who follows it.
pub(super) struct Run {
    pub(super) control: TrainControl,
    config: TrainConfig,
    device: String,
    /// Its events so far, for a follower who joins late.
    history: Vec<TrainEvent>,
    followers: Vec<Follower>,
    /// Its last checkpoint, taken at its last log line: the model the views of the network
    /// look into while it trains, with no read of the device of their own.
    pub(super) latest: Option<Arc<Checkpoint>>,
}

/// Who hears a run's events: the request that started it, and each that follows it.
struct Follower {
    events: Rc<dyn Fn(TrainEvent)>,
    /// Where a follower's end goes; none for the request that started the run, which gets its
    /// end as its own answer.
    end: Option<oneshot::Sender<Result<RunEnded, String>>>,
}

impl Follower {
    fn gone(&self) -> bool {
        self.end.as_ref().is_some_and(oneshot::Sender::is_canceled)
    }
}

/// The warm-up going.
pub(super) struct WarmUp {
    /// The request it answers.
    id: u32,
    control: TrainControl,
    /// Ends (its sender is dropped) when the warm-up has stopped.
    stopped: oneshot::Receiver<()>,
}

impl WarmUp {
    async fn stop(self) {
        self.control.stop();
        let _ = self.stopped.await;
    }
}

impl<H: Host> Session<H> {
    /// Busy from here, with `control` for a pause or stop asked meanwhile, until the value
    /// returned is dropped.
    pub(super) fn hold_starting(&self, control: TrainControl) -> Busy<'_> {
        self.state.borrow_mut().starting = Some(control);
        Busy {
            state: &self.state,
            free: |state| state.starting = None,
        }
    }

    /// Busy with `run` from here until the value returned is dropped.
    fn hold_run(&self, run: Run) -> Busy<'_> {
        self.state.borrow_mut().run = Some(run);
        Busy {
            state: &self.state,
            free: |state| state.run = None,
        }
    }

    pub(super) fn busy(&self) -> bool {
        let state = self.state.borrow();
        state.run.is_some() || state.starting.is_some()
    }

    /// The net a run trains on from: the current model's, when asked for and of `kind`.
    pub(super) fn start_from(
        &self,
        kind: ModelKind,
        from_model: bool,
    ) -> Result<Option<Net>, SessionError> {
        if !from_model {
            return Ok(None);
        }
        let model = self.model()?;
        match model.kind == kind {
            true => Ok(Some(model.net.clone())),
            false => Err(SessionError::OtherModel {
                loaded: model.kind,
                chosen: kind,
            }),
        }
    }

    /// One run; its events go to whoever follows it as they come, its model stays here as the
    /// current one and goes to them as a `.safetensors` file.
    pub(super) async fn run(
        self: &Rc<Self>,
        request: Train,
        events: Rc<dyn Fn(TrainEvent)>,
    ) -> Result<RunEnded, SessionError> {
        let Train {
            config,
            backend,
            from_model,
            own_digits,
        } = request;
        if self.busy() {
            return Err(SessionError::Busy);
        }
        let start = match self.start_from(config.model, from_model || own_digits.is_some())? {
            Some(net) => RunStart::Weights(Box::new(net)),
            None => RunStart::Fresh,
        };
        let data = match own_digits {
            Some(own) => RunData::Own(Rc::new(self.own_run(own, &config)?)),
            None => RunData::Mnist(self.run_data(&config)?),
        };
        // Taken before the first await: a second request finds the engine busy.
        let control = TrainControl::default();
        let starting = self.hold_starting(control.clone());
        let prepared = async {
            // A warm-up going shares the device: the run starts with what it has built.
            self.stop_warm_up().await;
            let prepared = prepare(&config, start, data, backend).await?;
            let record = self.host.record(&config, &prepared.devices.to_string())?;
            Ok::<_, SessionError>((prepared, record))
        }
        .await;
        drop(starting);
        let (prepared, record) = prepared?;
        let running = self.hold_run(Run {
            control: control.clone(),
            config: config.clone(),
            device: prepared.devices.to_string(),
            history: Vec::new(),
            followers: vec![Follower { events, end: None }],
            latest: None,
        });
        let on_event = |event: TrainEvent| match event {
            TrainEvent::Checkpoint(checkpoint) => {
                if let Some(run) = self.state.borrow_mut().run.as_mut() {
                    run.latest = Some(checkpoint);
                }
            }
            event => self.tell_followers(event),
        };
        let Driven { ended, files } = prepared.drive(record, &control, on_event).await;
        let ended = ended.and_then(|ended| self.keep(ended, config.model, files));
        let followers = self.state.borrow_mut().run.take().map(|run| run.followers);
        drop(running);
        for end in followers.into_iter().flatten().filter_map(|f| f.end) {
            let _ = end.send(ended.as_ref().map_err(ToString::to_string).cloned());
        }
        ended
    }

    /// The run's model made the current one: how the run ended, or why its fine-tune could not
    /// be judged.
    fn keep(
        &self,
        ended: Ended,
        kind: ModelKind,
        files: Option<RunFiles>,
    ) -> Result<RunEnded, SessionError> {
        provoked_panic("Train");
        let Ended {
            net,
            outcome,
            fine_tuned,
        } = ended;
        let weights = Payload::from(to_safetensors(&net)?);
        self.state.borrow_mut().model = Some(Rc::new(Model { net, kind }));
        let fine_tuned = fine_tuned.transpose()?;
        Ok(RunEnded {
            outcome,
            weights,
            files,
            fine_tuned,
        })
    }

    fn tell_followers(&self, event: TrainEvent) {
        let followers: Vec<Rc<dyn Fn(TrainEvent)>> = {
            let mut state = self.state.borrow_mut();
            let Some(run) = state.run.as_mut() else {
                return;
            };
            run.followers.retain(|follower| !follower.gone());
            run.history.push(event.clone());
            run.followers.iter().map(|f| f.events.clone()).collect()
        };
        for events in followers {
            events(event.clone());
        }
    }

    /// Joins the run going: its settings, its events so far and to come, and its end.
    pub(super) async fn follow(
        &self,
        progress: Rc<dyn Fn(Followed)>,
    ) -> Result<Option<RunEnded>, SessionError> {
        let (end, ended) = oneshot::channel();
        let (said, history) = {
            let mut state = self.state.borrow_mut();
            let Some(run) = state.run.as_mut() else {
                return Ok(None);
            };
            let events = progress.clone();
            run.followers.push(Follower {
                events: Rc::new(move |event| events(Followed::Event(event))),
                end: Some(end),
            });
            let said = Followed::Run {
                config: Box::new(run.config.clone()),
                device: run.device.clone(),
            };
            (said, run.history.clone())
        };
        progress(said);
        for event in history {
            progress(Followed::Event(event));
        }
        match ended.await {
            Ok(ended) => ended.map(Some).map_err(SessionError::RunFailed),
            Err(_) => Err(SessionError::RunFailed("the run was lost".into())),
        }
    }

    /// Builds the kernels of a run of `request.config` on the device for `request.backend`, in
    /// place of those of a warm-up going; how long it took, or none when there was nothing to
    /// build or it was stopped.
    pub(super) async fn warm(
        &self,
        id: u32,
        request: WarmUpRequest,
    ) -> Result<WarmedUp, SessionError> {
        let WarmUpRequest { config, backend } = request;
        if self.busy() {
            return Ok(WarmedUp { ms: None });
        }
        let (_warming, stopped) = oneshot::channel::<()>();
        let control = TrainControl::default();
        let warming = WarmUp {
            id,
            control: control.clone(),
            stopped,
        };
        // Registered before waiting for the one it replaces: a run asked for meanwhile stops
        // both.
        let replaced = self.state.borrow_mut().warming.replace(warming);
        if let Some(replaced) = replaced {
            replaced.stop().await;
        }
        provoked_panic("WarmUp");
        let started = Instant::now();
        let warmed: Result<Option<f64>, SessionError> = async {
            let device = select_device(backend).await?;
            if device.kind == BackendKind::Cpu {
                return Ok(None);
            }
            device.check_batch(config.model, config.batch_size)?;
            let outcome = warm_up(&config, &device.device, &control).await?;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            Ok((outcome == Outcome::Completed).then_some(ms))
        }
        .await;
        let mut state = self.state.borrow_mut();
        if state
            .warming
            .as_ref()
            .is_some_and(|warming| warming.id == id)
        {
            state.warming = None;
        }
        warmed.map(|ms| WarmedUp { ms })
    }

    /// Stops the warm-up going, if one is, and waits until it has.
    pub(super) async fn stop_warm_up(&self) {
        let warming = self.state.borrow_mut().warming.take();
        if let Some(warming) = warming {
            warming.stop().await;
        }
    }
}
