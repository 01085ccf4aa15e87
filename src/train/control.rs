//! Pause, resume, stop and steer a run from outside it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use super::TrainEvent;
use crate::config::{ConfigError, check_lr};
use crate::platform;

/// How often a paused run looks at its control handle.
const PAUSE_POLL_MS: u32 = 50;

/// Pause, resume and stop a run, or change its learning rate, from outside it; the loop looks
/// at it between steps.
#[derive(Clone, Debug, Default)]
pub struct TrainControl {
    state: Arc<AtomicU8>,
    /// A new learning rate's bits, 0 when none is waiting.
    lr: Arc<AtomicU64>,
}

const RUNNING: u8 = 0;
const PAUSED: u8 = 1;
const STOPPED: u8 = 2;

impl TrainControl {
    pub fn pause(&self) {
        let _ = self
            .state
            .compare_exchange(RUNNING, PAUSED, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub fn resume(&self) {
        let _ = self
            .state
            .compare_exchange(PAUSED, RUNNING, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub fn stop(&self) {
        self.state.store(STOPPED, Ordering::SeqCst);
    }

    pub fn is_stopped(&self) -> bool {
        self.state.load(Ordering::SeqCst) == STOPPED
    }

    pub fn is_paused(&self) -> bool {
        self.state.load(Ordering::SeqCst) == PAUSED
    }

    /// The run's learning rate from its next step on.
    pub fn set_lr(&self, lr: f64) -> Result<(), ConfigError> {
        check_lr(lr)?;
        self.lr.store(lr.to_bits(), Ordering::SeqCst);
        Ok(())
    }

    fn take_lr(&self) -> Option<f64> {
        match self.lr.swap(0, Ordering::SeqCst) {
            0 => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    /// What the loop does before step `step`: waits out a pause and takes a new learning rate
    /// into `lr`, each reported; false once the run should stop.
    pub(super) async fn between_steps(
        &self,
        step: usize,
        lr: &mut f64,
        on_event: &mut impl FnMut(TrainEvent),
    ) -> bool {
        let paused = self.is_paused();
        if paused {
            on_event(TrainEvent::Paused { step });
        }
        if !self.proceed().await {
            return false;
        }
        if paused {
            on_event(TrainEvent::Resumed { step });
        }
        if let Some(new) = self.take_lr() {
            *lr = new;
            on_event(TrainEvent::LrChanged { step, lr: new });
        }
        true
    }

    /// Waits while paused; false once the run should stop.
    async fn proceed(&self) -> bool {
        loop {
            match self.state.load(Ordering::SeqCst) {
                RUNNING => return true,
                PAUSED => platform::sleep_ms(PAUSE_POLL_MS).await,
                _ => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_pauses_resumes_and_stops() {
        let control = TrainControl::default();
        assert!(pollster::block_on(control.proceed()));
        control.pause();
        assert!(control.is_paused());
        let resumer = control.clone();
        let waiter = std::thread::spawn(move || pollster::block_on(resumer.proceed()));
        std::thread::sleep(std::time::Duration::from_millis(120));
        control.resume();
        assert!(waiter.join().unwrap(), "a paused run proceeds once resumed");
        control.stop();
        control.resume();
        assert!(!pollster::block_on(control.proceed()), "stop is final");
    }

    #[test]
    fn between_steps_a_pause_its_end_and_a_new_learning_rate_are_reported() {
        let control = TrainControl::default();
        control.pause();
        control.set_lr(0.5).unwrap();
        let resumer = control.clone();
        let resume = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(120));
            resumer.resume();
        });
        let (mut events, mut lr) = (Vec::new(), 0.1);
        let mut record = |event| events.push(event);
        assert!(pollster::block_on(control.between_steps(
            7,
            &mut lr,
            &mut record
        )));
        resume.join().unwrap();
        assert_eq!(lr, 0.5);
        assert_eq!(
            events,
            [
                TrainEvent::Paused { step: 7 },
                TrainEvent::Resumed { step: 7 },
                TrainEvent::LrChanged { step: 7, lr: 0.5 },
            ]
        );
        // Stopped while paused: nothing more is reported, and the run ends.
        control.pause();
        control.stop();
        let mut after = Vec::new();
        let mut record = |event| after.push(event);
        assert!(!pollster::block_on(control.between_steps(
            8,
            &mut lr,
            &mut record
        )));
        assert!(after.is_empty(), "{after:?}");
    }
}
