//! The trainer's errors; each names the file, epoch or setting at fault.

use std::path::{Path, PathBuf};

use avaprep::annotations::AnnotationError;
use avaprep::records::RecordError;

/// Reading the frames and annotations.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: cannot use this frame: {message}")]
    Image { path: PathBuf, message: String },
    #[error(transparent)]
    Annotation(#[from] AnnotationError),
    /// The plan or a frame index.
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("cannot start the loader's thread pool: {0}")]
    Pool(String),
}

impl DataError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        DataError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("invalid training configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error("split `{split}` has no clips: {why}")]
    EmptySplit { split: String, why: String },
    #[error("device: {0}")]
    Device(String),
    #[error(
        "{missing} frames that clips need are missing, in {videos}; run `avaprep extract` to extract them again"
    )]
    FramesMissing { missing: usize, videos: String },
    /// `--resume` alone continues the data directory's latest run, which may be another: the
    /// flag that continues this one names it.
    #[error(
        "{} already holds a run; continue it with `--resume --run-dir {}`, or start another with --run-dir DIR",
        .0.display(),
        avaprep::progress::shell_word(.0)
    )]
    RunExists(PathBuf),
    #[error(
        "loss is {loss} at epoch {epoch}, batch {batch}: training diverged (too high an LR?); {}",
        kept_checkpoint(*.checkpoint)
    )]
    NonFiniteLoss {
        epoch: usize,
        batch: usize,
        loss: f64,
        /// The epoch of the run's last checkpoint, where it has one.
        checkpoint: Option<usize>,
    },
    /// Ctrl-C during prediction: nothing was written.
    #[error("interrupted: no detections written")]
    Interrupted,
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("drawing the curves: {0}")]
    Plot(String),
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
}

impl TrainError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        TrainError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// What a diverged run still has: it once claimed a checkpoint where none had been written.
fn kept_checkpoint(epoch: Option<usize>) -> String {
    match epoch {
        Some(epoch) => format!(
            "its checkpoint after epoch {epoch} is intact: `--resume --set lr=...` with a lower LR continues from it"
        ),
        None => {
            "no checkpoint was written yet: start again with a lower LR (`--set lr=...`)".into()
        }
    }
}
