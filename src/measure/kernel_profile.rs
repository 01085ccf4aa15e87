//! The kernels training launches on a cubecl backend (natively: wgpu, fused kernels included),
//! counted and timed one by one through cubecl's launch observer. The CPU backend launches none.
//!
//! Timing reads each kernel's measurement back before the next launch, so kernels run one at a
//! time: the sum is where a step's device time goes, not the step's time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cubecl_runtime::config::{TypeNameFormatLevel, type_name_format};
use cubecl_runtime::logging::{
    Duration, LaunchObservation, LaunchObserver, TimingMethod, TimingRequest,
};
use serde::Serialize;

/// Launches and device time of one kernel over the steps watched.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    launches: usize,
    time: Duration,
    timed: usize,
}

#[derive(Default)]
struct Recorder {
    timed: bool,
    by_kernel: Mutex<BTreeMap<&'static str, Tally>>,
    methods: Mutex<Vec<TimingMethod>>,
}

impl LaunchObserver for Recorder {
    fn launched(&self, kernel: &'static str) {
        if let Ok(mut by_kernel) = self.by_kernel.lock() {
            by_kernel.entry(kernel).or_default().launches += 1;
        }
    }

    fn timing(&self) -> TimingRequest {
        match self.timed {
            true => TimingRequest::Resolved,
            false => TimingRequest::None,
        }
    }

    fn timed(&self, kernel: &'static str, duration: Duration, method: TimingMethod) {
        if let Ok(mut by_kernel) = self.by_kernel.lock() {
            let tally = by_kernel.entry(kernel).or_default();
            tally.time += duration;
            tally.timed += 1;
        }
        if let Ok(mut methods) = self.methods.lock()
            && !methods.contains(&method)
        {
            methods.push(method);
        }
    }
}

/// Every kernel the process launches while it lives.
#[must_use = "watching stops when it is dropped"]
pub struct KernelWatch {
    recorder: Arc<Recorder>,
    _observation: LaunchObservation,
}

impl KernelWatch {
    /// Counts launches; `timed` also times each one (and runs them one at a time).
    pub fn start(timed: bool) -> Self {
        let recorder = Arc::new(Recorder {
            timed,
            ..Recorder::default()
        });
        let observation = LaunchObservation::new(recorder.clone());
        Self {
            recorder,
            _observation: observation,
        }
    }

    /// What was launched, per step over `steps` steps.
    pub fn finish(self, steps: usize) -> KernelProfile {
        let recorder = self.recorder.clone();
        drop(self);
        let by_kernel = recorder
            .by_kernel
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default();
        let methods = recorder
            .methods
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        KernelProfile::new(&by_kernel, &methods, steps.max(1))
    }
}

/// Kernel launches (and, when timed, device time) per training step.
#[derive(Clone, Debug, Serialize)]
pub struct KernelProfile {
    pub steps: usize,
    pub launches_per_step: f64,
    /// Summed over kernels run one at a time; `None` when not timed.
    pub kernel_ms_per_step: Option<f64>,
    /// "device" (timestamps) or "system" (host wall around a blocking submit).
    pub timing: Option<&'static str>,
    /// Kernels by short name (generic instances merged), most time first, then most launches.
    pub kernels: Vec<KernelFigures>,
}

#[derive(Clone, Debug, Serialize)]
pub struct KernelFigures {
    pub name: String,
    pub launches_per_step: f64,
    pub ms_per_step: Option<f64>,
}

impl KernelProfile {
    fn new(
        by_kernel: &BTreeMap<&'static str, Tally>,
        methods: &[TimingMethod],
        steps: usize,
    ) -> Self {
        let mut merged: BTreeMap<String, Tally> = BTreeMap::new();
        for (kernel, tally) in by_kernel {
            let short = merged
                .entry(type_name_format(kernel, TypeNameFormatLevel::Short))
                .or_default();
            short.launches += tally.launches;
            short.time += tally.time;
            short.timed += tally.timed;
        }
        let timed = merged.values().any(|t| t.timed > 0);
        let per_step = |n: f64| n / steps as f64;
        let ms = |t: &Tally| (t.timed > 0).then(|| per_step(t.time.as_secs_f64() * 1e3));
        let mut kernels: Vec<KernelFigures> = merged
            .iter()
            .map(|(name, tally)| KernelFigures {
                name: name.clone(),
                launches_per_step: per_step(tally.launches as f64),
                ms_per_step: ms(tally),
            })
            .collect();
        kernels.sort_by(|a, b| {
            let time = |k: &KernelFigures| k.ms_per_step.unwrap_or(0.0);
            time(b)
                .total_cmp(&time(a))
                .then(b.launches_per_step.total_cmp(&a.launches_per_step))
        });
        let timing = match methods {
            [] => None,
            [TimingMethod::Device] => Some("device"),
            [TimingMethod::System] => Some("system"),
            _ => Some("mixed"),
        };
        Self {
            steps,
            launches_per_step: kernels.iter().map(|k| k.launches_per_step).sum(),
            kernel_ms_per_step: timed.then(|| kernels.iter().filter_map(|k| k.ms_per_step).sum()),
            timing,
            kernels,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merged by short name, per step, most time first.
    #[test]
    fn tallies_become_figures_per_step() {
        let tally = |launches, micros| Tally {
            launches,
            time: Duration::from_micros(micros),
            timed: launches,
        };
        let by_kernel = BTreeMap::from([
            ("burn::kernel::add<f32>", tally(4, 100)),
            ("burn::kernel::add<i32>", tally(2, 100)),
            ("burn::kernel::matmul<f32>", tally(2, 1000)),
        ]);
        let profile = KernelProfile::new(&by_kernel, &[TimingMethod::Device], 2);
        assert_eq!(profile.launches_per_step, 4.0);
        assert_eq!(profile.timing, Some("device"));
        let names: Vec<_> = profile.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["matmul", "add"]);
        assert_eq!(profile.kernels[1].launches_per_step, 3.0);
        assert!((profile.kernel_ms_per_step.unwrap() - 0.6).abs() < 1e-9);
    }
}
