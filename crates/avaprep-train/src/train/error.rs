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
    #[error("split `{0}` has no clips: check the plan's splits, the detector boxes and the frames")]
    EmptySplit(String),
    #[error("device: {0}")]
    Device(String),
    #[error(
        "{missing} frames that clips need are missing, in {videos}; run `avaprep extract` to extract them again"
    )]
    FramesMissing { missing: usize, videos: String },
    #[error(
        "{0} already holds a run; continue it with --resume, or start another with --run-dir DIR"
    )]
    RunExists(PathBuf),
    #[error(
        "loss is {loss} at epoch {epoch}, batch {batch}: training diverged (too high an LR?); the last checkpoint is intact"
    )]
    NonFiniteLoss {
        epoch: usize,
        batch: usize,
        loss: f64,
    },
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
