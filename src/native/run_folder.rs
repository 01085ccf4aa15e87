//! A run's folder, as the CLI and the native engine write it: chosen so that no run overwrites
//! another, written so that no file in it is ever half-written (what goes in it as a run goes is
//! `record`'s), and read back as a run.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::metrics::RunMetrics;
use crate::runs::export::MAX_RUN_BYTES;
use crate::runs::{Engine, RunRecord};
use crate::train::checkpoint::Position;
use crate::weights::WeightsError;

/// What cannot be read or written of a run's files.
#[derive(Debug, Error)]
pub enum FilesError {
    #[error(
        "{} already holds a run: give another --out, or go on with that run: --resume {}",
        .path.display(), .path.join(CHECKPOINT).display()
    )]
    RunExists { path: PathBuf },
    #[error(
        "{} is being written by another webtrain run: give another --out, or wait for it to end",
        .path.display()
    )]
    InUse { path: PathBuf },
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", .path.display())]
    Weights { path: PathBuf, source: WeightsError },
    #[error("cannot save the model to {}: {message}", .path.display())]
    SaveModel { path: PathBuf, message: String },
    #[error("{}: not a run's metrics: {message}", .path.display())]
    Metrics { path: PathBuf, message: String },
    #[error(transparent)]
    Chart(#[from] crate::chart::style::ChartError),
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NotSaved(Vec<FilesError>),
}

pub const METRICS: &str = "metrics.json";
pub const CHART: &str = "loss.svg";
/// How each layer learned.
pub const LEARNING_CHART: &str = "learning.svg";
pub const WEIGHTS: &str = "model.safetensors";
pub const RECORD: &str = "model.bpk";
pub const CHECKPOINT: &str = "checkpoint.safetensors";
/// What a run writes: a folder holding any of these holds a run.
const RUN_FILES: [&str; 6] = [METRICS, CHART, LEARNING_CHART, WEIGHTS, RECORD, CHECKPOINT];
/// `runs/<timestamp>-<n>` is tried up to this n when runs start in the same second.
const SAME_SECOND_RUNS: usize = 1000;

pub struct RunFolder {
    path: PathBuf,
    /// The folder, held for this process while it writes there.
    _lock: Option<File>,
}

impl RunFolder {
    /// The folder of a new run: `out`, which must not hold a run already, or a new
    /// `runs/<timestamp>` of its own.
    pub fn for_new_run(out: Option<PathBuf>) -> Result<Self, FilesError> {
        let Some(path) = out else {
            return Self::timestamped(Path::new("runs"));
        };
        create_all(&path)?;
        let lock = lock(&path)?;
        if holds_run(&path) {
            return Err(FilesError::RunExists { path });
        }
        Ok(Self { path, _lock: lock })
    }

    /// The folder a resumed run writes to: `out`, or the checkpoint's own folder. A folder that
    /// holds a run takes only that run, resumed from its own checkpoint.
    pub fn for_resumed_run(out: Option<PathBuf>, checkpoint: &Path) -> Result<Self, FilesError> {
        let own = checkpoint.parent().unwrap_or(Path::new(".")).to_path_buf();
        let path = out.unwrap_or_else(|| own.clone());
        let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        create_all(&path)?;
        let lock = lock(&path)?;
        if holds_run(&path) && !same(&path, &own) {
            return Err(FilesError::RunExists { path });
        }
        Ok(Self { path, _lock: lock })
    }

    /// `parent/<timestamp>`, or `-2`, `-3`, … after it when another run took that second.
    pub fn timestamped(parent: &Path) -> Result<Self, FilesError> {
        create_all(parent)?;
        let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S").to_string();
        for n in 1..=SAME_SECOND_RUNS {
            let name = match n {
                1 => stamp.clone(),
                n => format!("{stamp}-{n}"),
            };
            let path = parent.join(name);
            // create_dir, not create_dir_all: of two runs, only one creates a given folder.
            match fs::create_dir(&path) {
                Ok(()) => {
                    let lock = lock(&path)?;
                    return Ok(Self { path, _lock: lock });
                }
                Err(error) if error.kind() == ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(FilesError::Write { path, source }),
            }
        }
        Err(FilesError::Write {
            path: parent.join(stamp),
            source: ErrorKind::AlreadyExists.into(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Replaces the file `name` whole, or leaves the one there as it was: the bytes go to a
    /// temporary file that is synced, renamed over it, and the rename synced with the folder.
    pub fn write(&self, name: &str, contents: &[u8]) -> Result<(), FilesError> {
        let path = self.file(name);
        write_whole(&path, contents).map_err(|source| FilesError::Write { path, source })
    }

    /// The metrics of the run this folder holds, as they stood at `position`: what a run
    /// resumed there goes on from, so that its metrics and chart hold the whole run.
    pub fn metrics_until(&self, position: &Position) -> Option<RunMetrics> {
        let json = fs::read_to_string(self.file(METRICS)).ok()?;
        let mut metrics: RunMetrics = serde_json::from_str(&json).ok()?;
        metrics.truncate_to(position);
        Some(metrics)
    }
}

/// Holds the folder `path` for this process alone while it writes there: a second webtrain
/// given the same folder (two jobs, or mpirun without `--distributed`, each a rank 0) is
/// refused rather than write over it. The lock is the operating system's (`flock` on the
/// folder), so it goes with the process, however that ends. Where a folder cannot be opened
/// or locked (a file system without locks), the run goes on without it.
fn lock(path: &Path) -> Result<Option<File>, FilesError> {
    let Ok(folder) = File::open(path) else {
        return Ok(None);
    };
    match folder.try_lock() {
        Ok(()) => Ok(Some(folder)),
        Err(fs::TryLockError::WouldBlock) => Err(FilesError::InUse {
            path: path.to_path_buf(),
        }),
        Err(fs::TryLockError::Error(_)) => Ok(None),
    }
}

/// The bytes of `path`, read no further than `limit` and one byte more: enough to say the file
/// is too large without reading all of it.
pub fn read_limited(path: &Path, limit: usize) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)?
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes `contents` to `path` whole or not at all: to a `.partial` file beside it first, then
/// renamed over it, so that a crash never leaves half a file under the name.
pub fn write_whole(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let mut file = File::create(&partial)?;
    file.write_all(contents).and_then(|()| file.sync_all())?;
    drop(file);
    fs::rename(&partial, path)?;
    match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => sync_folder(folder),
        _ => Ok(()),
    }
}

/// The run a folder holds, named by the folder, with the id `id`.
pub fn read_run(dir: &Path, id: String) -> Result<RunRecord, FilesError> {
    let path = dir.join(METRICS);
    let bytes = read_limited(&path, MAX_RUN_BYTES).map_err(|source| FilesError::Read {
        path: path.clone(),
        source,
    })?;
    let metrics: RunMetrics = serde_json::from_slice(&bytes).map_err(|e| FilesError::Metrics {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let name = dir.file_name().map_or_else(
        || dir.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    Ok(RunRecord {
        id,
        name,
        engine: Engine::Native,
        failure: None,
        metrics,
    })
}

/// The runs in the folders of `parent`, by folder name: what `webtrain ui` lists. A folder
/// without a readable run is left out.
pub fn runs_in(parent: &Path) -> Vec<RunRecord> {
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut runs: Vec<RunRecord> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            read_run(&entry.path(), name).ok()
        })
        .collect();
    runs.sort_by(|a, b| a.id.cmp(&b.id));
    runs
}

fn holds_run(path: &Path) -> bool {
    RUN_FILES.iter().any(|name| path.join(name).exists())
}

fn create_all(path: &Path) -> Result<(), FilesError> {
    fs::create_dir_all(path).map_err(|source| FilesError::Write {
        path: path.into(),
        source,
    })
}

/// Makes a rename in `folder` durable (POSIX: fsync the directory).
fn sync_folder(folder: &Path) -> std::io::Result<()> {
    match OpenOptions::new().read(true).open(folder) {
        Ok(dir) => dir.sync_all(),
        // Some systems cannot open or sync a directory: the rename is all they offer.
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_whole_files_and_leave_no_partial_one() {
        let dir = tempfile::tempdir().unwrap();
        let folder = RunFolder::for_new_run(Some(dir.path().join("run"))).unwrap();
        folder.write(METRICS, b"one").unwrap();
        folder.write(METRICS, b"two").unwrap();
        assert_eq!(fs::read(folder.file(METRICS)).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(folder.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [METRICS]);
    }

    #[test]
    fn a_folder_holding_a_run_is_not_taken_by_another() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        RunFolder::for_new_run(Some(run.clone()))
            .unwrap()
            .write(CHECKPOINT, b"x")
            .unwrap();
        assert!(matches!(
            RunFolder::for_new_run(Some(run.clone())),
            Err(FilesError::RunExists { .. })
        ));
        // Its own checkpoint resumes into it; another run's does not.
        let resumed = RunFolder::for_resumed_run(None, &run.join(CHECKPOINT)).unwrap();
        assert_eq!(resumed.path(), run);
        // Held while that run writes there: refused to anyone else meanwhile.
        assert!(matches!(
            RunFolder::for_resumed_run(None, &run.join(CHECKPOINT)),
            Err(FilesError::InUse { .. })
        ));
        drop(resumed);
        let other = dir.path().join("other");
        RunFolder::for_new_run(Some(other.clone()))
            .unwrap()
            .write(CHECKPOINT, b"y")
            .unwrap();
        assert!(matches!(
            RunFolder::for_resumed_run(Some(run), &other.join(CHECKPOINT)),
            Err(FilesError::RunExists { .. })
        ));
    }

    #[test]
    fn runs_started_in_the_same_second_get_folders_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let folders: Vec<_> = (0..3)
            .map(|_| {
                RunFolder::timestamped(dir.path())
                    .unwrap()
                    .path()
                    .to_path_buf()
            })
            .collect();
        assert_ne!(folders[0], folders[1]);
        assert_ne!(folders[1], folders[2]);
        assert_ne!(folders[0], folders[2]);
    }
}
