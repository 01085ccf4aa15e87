//! The native engine: a [`Session`] on a thread of its own, fed by every page `webtrain ui`
//! serves, with MNIST from a folder and each run's files written under `out` as the CLI writes
//! them: a run's folder is `run_folder`'s, what goes in it as the run goes `record`'s.

mod executor;
pub mod record;
pub mod run_folder;

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::mpsc as mpsc_std;

use crate::config::TrainConfig;
use crate::data::Mnist;
use crate::metrics::RunMetrics;
use crate::model::Net;
use crate::platform::catch_panic;
use crate::runs::RunRecord;
use crate::session::envelope::Envelope;
use crate::session::protocol::{Ask, Reply, Request, RunFiles};
use crate::session::{Host, Outbox, RunRecorder, Session, SessionError, failure};
use crate::train::TrainEvent;
use tokio::sync::mpsc;

use executor::Doorbell;
use record::FolderRecord;
use run_folder::{RunFolder, runs_in};

/// Says `line` on the terminal. A server goes on when no one reads its output any more (a
/// closed pipe): `println!` would panic then.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// Says a problem on the terminal, as `say` does.
pub fn warn(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "webtrain: {line}");
}

/// A request, and where its replies go: each one's bytes, as the WebSocket carries them.
pub struct Job {
    pub request: Envelope,
    pub replies: mpsc::UnboundedSender<Envelope>,
}

/// The engine's door: clones go to each connection.
#[derive(Clone)]
pub struct Engine {
    jobs: mpsc_std::Sender<Job>,
    doorbell: Doorbell,
}

impl Engine {
    /// Starts the engine's thread.
    pub fn start(data: PathBuf, out: PathBuf) -> Self {
        let (jobs, queue) = mpsc_std::channel::<Job>();
        let (bell, doorbell) = mpsc_std::sync_channel(1);
        std::thread::Builder::new()
            .name("engine".into())
            .spawn(move || {
                let own = Doorbell::new(std::thread::current());
                let _ = bell.send(own.clone());
                let session = Session::new(Native { data, out });
                executor::run(queue, own, |job| Box::pin(answer(session.clone(), job)));
            })
            .expect("the engine's thread starts");
        Self {
            jobs,
            doorbell: doorbell
                .recv()
                .expect("the engine's thread says where it is"),
        }
    }

    /// Hands a request to the engine; false once it is gone.
    pub fn ask(&self, job: Job) -> bool {
        let sent = self.jobs.send(job).is_ok();
        self.doorbell.ring();
        sent
    }

    /// Asks `request` and waits for its answer, on a thread that is not the server's; none when
    /// the engine is gone or could not say it.
    pub fn ask_and_wait<R: Ask>(&self, request: R) -> Option<R::Answer> {
        let (replies, mut answers) = mpsc::unbounded_channel();
        let request: Request = request.into();
        let request = Envelope::seal(1, request).ok()?;
        self.ask(Job { request, replies });
        while let Some(reply) = answers.blocking_recv() {
            match reply.open::<Reply<R::Progress, R::Answer>>() {
                Ok(Reply::Progress(_)) => continue,
                Ok(Reply::Answer(answer)) => return Some(answer),
                Ok(Reply::Failed { .. }) | Err(_) => return None,
            }
        }
        None
    }
}

/// Answers one request. One that panics is answered with the panic's message, and the engine
/// goes on: the run going, if another request started one, goes on too and keeps its files.
async fn answer(session: Rc<Session<Native>>, job: Job) {
    let Job { request, replies } = job;
    let id = request.id;
    // A page that has gone hears nothing; the run it started goes on.
    let outbox: Outbox = Rc::new(move |reply| {
        let _ = replies.send(reply);
    });
    if let Err(panic) = catch_panic(session.answer(request, outbox.clone())).await {
        warn(&format!("a request ended on an internal fault: {panic}"));
        outbox(failure(id, format!("the engine failed inside: {panic}")));
    }
}

/// MNIST from a folder; each run's files in a folder of its own under `out`.
struct Native {
    data: PathBuf,
    out: PathBuf,
}

impl Host for Native {
    async fn mnist(&self, on_progress: &dyn Fn(f64, &str)) -> Result<Mnist, SessionError> {
        on_progress(0.0, &self.data.display().to_string());
        Ok(Mnist::load_dir(&self.data)?)
    }

    fn record(
        &self,
        config: &TrainConfig,
        device: &str,
    ) -> Result<Option<Box<dyn RunRecorder>>, SessionError> {
        let folder =
            RunFolder::timestamped(&self.out).map_err(|e| SessionError::Files(e.to_string()))?;
        say(&format!(
            "A run from the page: writing {}",
            folder.path().display()
        ));
        let metrics = RunMetrics::new(config.clone(), device.to_string());
        let record = FolderRecord::new(folder, metrics, |line| warn(&line));
        Ok(Some(Box::new(Announced(record))))
    }
    fn kept_runs(&self) -> Result<Vec<RunRecord>, SessionError> {
        Ok(runs_in(&self.out))
    }
}

/// A run's folder, written as the CLI writes it, and said on the terminal.
struct Announced(FolderRecord);

impl RunRecorder for Announced {
    fn event(&mut self, event: &TrainEvent) {
        self.0.event(event);
    }

    fn finish(self: Box<Self>, model: Option<&Net>) -> RunFiles {
        let files = Box::new(self.0).finish(model);
        match &files.error {
            Some(error) => warn(error),
            None => say(&format!("Wrote {}", files.folder)),
        }
        files
    }
}
