//! A run's folder written as the run goes: each checkpoint as it comes, then the model, the
//! metrics and the chart at the end, each whatever happened to the others.

use std::fs;

use burn::module::Module;

use super::run_folder::{
    CHART, CHECKPOINT, FilesError, LEARNING_CHART, METRICS, RECORD, RunFolder, WEIGHTS,
};
use crate::chart::learning;
use crate::metrics::RunMetrics;
use crate::model::Net;
use crate::session::RunRecorder;
use crate::session::protocol::RunFiles;
use crate::train::TrainEvent;
use crate::train::checkpoint::Checkpoint;
use crate::weights::to_safetensors;

/// A run's folder, written as the run goes: checkpoints as they come, the model, metrics and
/// chart at the end. What cannot be written is said through `warn` as it happens, and in the
/// files' `error` at the end.
pub struct FolderRecord {
    folder: RunFolder,
    metrics: RunMetrics,
    checkpoints: CheckpointWrites,
    warn: Box<dyn Fn(String)>,
}

impl FolderRecord {
    /// `metrics`: a new run's, or those a resumed run goes on from.
    pub fn new(folder: RunFolder, metrics: RunMetrics, warn: impl Fn(String) + 'static) -> Self {
        Self {
            folder,
            metrics,
            checkpoints: CheckpointWrites::default(),
            warn: Box::new(warn),
        }
    }
}

impl RunRecorder for FolderRecord {
    fn event(&mut self, event: &TrainEvent) {
        if let TrainEvent::Checkpoint(checkpoint) = event {
            self.checkpoints
                .write(&self.folder, checkpoint, |line| (self.warn)(line));
        }
        self.metrics.record(event);
    }

    fn finish(self: Box<Self>, model: Option<&Net>) -> RunFiles {
        let Self {
            folder,
            metrics,
            checkpoints,
            ..
        } = *self;
        let saved = save_results(&folder, model, &metrics, checkpoints.failure);
        let mut written: Vec<String> = fs::read_dir(folder.path())
            .map(|entries| {
                entries
                    .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                    .filter(|name| !name.ends_with(".partial"))
                    .collect()
            })
            .unwrap_or_default();
        written.sort();
        RunFiles {
            folder: folder.path().display().to_string(),
            name: folder
                .path()
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default(),
            written,
            error: saved.err().map(|error| error.to_string()),
        }
    }
}

/// Writes each checkpoint as it is taken. A write that fails is said at once, once, and the
/// next checkpoint tries again; the last failure, if the last write failed, is kept.
#[derive(Default)]
struct CheckpointWrites {
    failure: Option<FilesError>,
}

impl CheckpointWrites {
    fn write(&mut self, folder: &RunFolder, checkpoint: &Checkpoint, say: impl Fn(String)) {
        match folder.write(CHECKPOINT, &checkpoint.to_bytes()) {
            Ok(()) => {
                if self.failure.take().is_some() {
                    say(format!(
                        "checkpoints are written again (step {})",
                        checkpoint.position.step
                    ));
                }
            }
            Err(error) => {
                if self.failure.is_none() {
                    say(format!(
                        "{error}; training goes on and the next checkpoint tries again"
                    ));
                }
                self.failure = Some(error);
            }
        }
    }
}

/// The model (weights, then burn's record), the metrics and the chart, each written whatever
/// happened to the others; the failures, if any.
fn save_results(
    folder: &RunFolder,
    model: Option<&Net>,
    metrics: &RunMetrics,
    checkpoint_failure: Option<FilesError>,
) -> Result<(), FilesError> {
    let mut failures = Vec::new();
    if let Some(model) = model {
        let weights = to_safetensors(model).map_err(|source| FilesError::Weights {
            path: folder.file(WEIGHTS),
            source,
        });
        failures.extend(
            weights
                .and_then(|bytes| folder.write(WEIGHTS, &bytes))
                .err(),
        );
        let record = model
            .clone()
            .into_record()
            .into_bytes()
            .map_err(|e| FilesError::SaveModel {
                path: folder.file(RECORD),
                message: e.to_string(),
            });
        failures.extend(record.and_then(|bytes| folder.write(RECORD, &bytes)).err());
    }
    failures.extend(folder.write(METRICS, metrics.to_json().as_bytes()).err());
    let charts = [
        (CHART, crate::chart::run::render_svg(metrics)),
        (LEARNING_CHART, learning::render_svg(&metrics.learning)),
    ];
    for (name, chart) in charts {
        let written = chart.map_err(FilesError::from);
        failures.extend(
            written
                .and_then(|svg| folder.write(name, svg.as_bytes()))
                .err(),
        );
    }
    failures.extend(checkpoint_failure);
    match failures.is_empty() {
        true => Ok(()),
        false => Err(FilesError::NotSaved(failures)),
    }
}
