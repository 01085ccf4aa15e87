//! The engine thread's executor: each job a task, every task polled in turn, and new jobs taken
//! between turns. A run yields after each step, so a pause or a question waits one step at most
//! (an executor that ran a self-waking task many times per turn, as tokio's LocalSet does, held
//! them for up to 61 steps).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::task::{Context, Wake, Waker};
use std::thread::Thread;

pub type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Says there is work for the thread: a task that can go on, or a job that came.
///
/// The flag, not the thread's park token alone, is what says so: a task may itself park the
/// thread for a moment (a blocking wait in a backend, `pollster`), and that takes the token an
/// unpark left; a job that came meanwhile would then wait for the next, perhaps forever.
#[derive(Clone)]
pub struct Doorbell {
    rung: Arc<AtomicBool>,
    thread: Thread,
}

impl Doorbell {
    /// A doorbell for `thread`, the executor's.
    pub fn new(thread: Thread) -> Self {
        Self {
            rung: Arc::new(AtomicBool::new(false)),
            thread,
        }
    }

    pub fn ring(&self) {
        self.rung.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

impl Wake for Doorbell {
    fn wake(self: Arc<Self>) {
        self.ring();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ring();
    }
}

/// Runs on the calling thread, which `doorbell` rings, until the jobs' senders are gone and
/// every task has ended; `task` makes each job's task.
pub fn run<J>(jobs: mpsc::Receiver<J>, doorbell: Doorbell, mut task: impl FnMut(J) -> Task) {
    let rung = doorbell.rung.clone();
    let waker = Waker::from(Arc::new(doorbell));
    let mut context = Context::from_waker(&waker);
    let mut tasks: Vec<Task> = Vec::new();
    loop {
        rung.store(false, Ordering::SeqCst);
        loop {
            match jobs.try_recv() {
                Ok(job) => tasks.push(task(job)),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) if tasks.is_empty() => return,
                Err(mpsc::TryRecvError::Disconnected) => break,
            }
        }
        tasks.retain_mut(|task| task.as_mut().poll(&mut context).is_pending());
        // Until the doorbell rings; a wake-up without it (spurious, or a token a task's own
        // parking left) only turns the loop once more.
        while !rung.load(Ordering::SeqCst) {
            std::thread::park();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A job sent while a task runs is taken, even when that task parks the thread itself and
    /// so takes the unpark the job's ring left.
    #[test]
    fn a_job_that_comes_while_a_task_parks_the_thread_is_taken() {
        let (jobs, queue) = mpsc::channel::<u32>();
        let (done, finished) = mpsc::channel::<u32>();
        let (bell, doorbell) = mpsc::channel::<Doorbell>();
        let (first_running, running) = mpsc::channel::<()>();
        let executor = std::thread::spawn(move || {
            let own = Doorbell::new(std::thread::current());
            bell.send(own.clone()).unwrap();
            run(queue, own, |job| {
                let (done, first_running) = (done.clone(), first_running.clone());
                Box::pin(async move {
                    if job == 1 {
                        first_running.send(()).unwrap();
                        // The second job comes now; this task then takes its ring's token.
                        std::thread::sleep(Duration::from_millis(200));
                        std::thread::park_timeout(Duration::ZERO);
                    }
                    done.send(job).unwrap();
                })
            });
        });
        let doorbell = doorbell.recv().unwrap();
        jobs.send(1).unwrap();
        doorbell.ring();
        running.recv().unwrap();
        jobs.send(2).unwrap();
        doorbell.ring();
        let wait = Duration::from_secs(5);
        assert_eq!(finished.recv_timeout(wait), Ok(1));
        assert_eq!(
            finished.recv_timeout(wait),
            Ok(2),
            "the second job was not taken"
        );
        drop(jobs);
        doorbell.ring();
        executor.join().unwrap();
    }
}
