//! The trainer of `avaprep-train` (run by `avaprep train`): a single-GPU SlowFast trainer for AVA on the extracted frames.
//!
//! [`train`] runs the whole recipe (data, augmentation, SGD with warm-up, evaluation with the
//! official frame-mAP, early stopping, checkpoints, metrics, final detections); [`predict`]
//! writes detections for a split with given weights. Everything under the run directory:
//!
//! ```text
//! run/
//!   config.json, config.toml     the configuration used
//!   checkpoint.json              the committed state (names the tensor files below)
//!   model-s<step>.safetensors    weights + BatchNorm statistics of the last checkpoint
//!   optimizer-s<step>.safetensors  momentum buffers
//!   best-s<step>.safetensors     weights of the best validation mAP
//!   metrics.jsonl, metrics.csv, curves.png
//!   detections.csv               the best weights on the validation split (AVA format)
//!   eval.json, summary.json      their evaluation; how and why the run ended
//!   init.json                    with init_weights: what was loaded, kept fresh, unused
//! ```

#[cfg(test)]
mod acceptance_tests;
mod amp;
pub mod augment;
pub mod bench;
mod checkpoint;
pub mod dataset;
mod device;
pub mod early_stop;
mod error;
pub mod loader;
pub mod metrics;
pub mod model;
mod net;
pub mod optim;
mod predict;
mod session;
pub mod tensorboard;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

pub use checkpoint::InitReport;
#[cfg(test)]
pub use checkpoint::TrainState;

/// libtorch's random generator is global to the process: tests that seed it and rely on the
/// numbers that follow (bitwise-identical runs) must not interleave with each other. Tests hold it
/// for their libtorch work only: their Python reference runs come before or after, beside other
/// tests' trainings. The holder runs libtorch on one thread, so the tests leave the other core to
/// the acceptance test's one-thread training (`acceptance_tests`); a test that trains on two
/// threads takes `acceptance_tests::torch_lock_on_both_cores` instead, which waits for that
/// training.
#[cfg(test)]
pub(crate) fn torch_rng_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    tch::set_num_threads(1);
    guard
}

/// The repository's venv, which `scripts/setup.sh` installs: a missing venv fails the test.
#[cfg(test)]
pub(crate) fn reference_python() -> std::path::PathBuf {
    let python = testing::repo_root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup.sh",
        python.display()
    );
    python
}

pub use avaprep::trainer_settings::{ModelPreset, Precision, Preset, TrainConfig};
pub use error::{DataError, TrainError};
pub use predict::predict;

/// Progress for the caller to show; the library prints nothing itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TrainEvent {
    Started {
        device: String,
        precision: Precision,
        train_clips: usize,
        val_clips: usize,
        /// Keyframes skipped because no extracted frame lies near them.
        keyframes_without_frames: usize,
        /// `(epoch, step)` of the checkpoint resumed from.
        resumed_from: Option<(usize, u64)>,
    },
    Batch {
        epoch: usize,
        batch: usize,
        batches: usize,
        loss: f64,
        lr: f64,
    },
    EpochEnd {
        epoch: usize,
        loss: f64,
        clips_per_s: f64,
    },
    Evaluated {
        epoch: usize,
        map: Option<f64>,
        best: Option<f64>,
    },
    /// `init_weights` was loaded (also written to `init.json` in the run directory).
    Initialised(InitReport),
    CheckpointSaved {
        epoch: usize,
        step: u64,
    },
    Stopped {
        reason: StopReason,
    },
}

/// Why training ended; printed by the caller and recorded in `summary.json` and the state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StopReason {
    /// The LR schedule ran to its last epoch.
    Completed { epochs: usize },
    /// `max_epochs` was reached before the schedule's end.
    MaxEpochs { epochs: usize },
    /// `patience` evaluation rounds passed without an improvement above `min_delta`.
    EarlyStopped {
        epoch: usize,
        best_epoch: usize,
        best_map: f64,
        patience: usize,
    },
    /// The caller asked to stop; the checkpoint is saved and `resume` continues.
    Cancelled { epoch: usize, step: u64 },
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::Completed { epochs } => write!(f, "completed the {epochs}-epoch schedule"),
            StopReason::MaxEpochs { epochs } => write!(f, "reached max_epochs ({epochs})"),
            StopReason::EarlyStopped {
                epoch,
                best_epoch,
                best_map,
                patience,
            } => write!(
                f,
                "early stop after epoch {epoch}: val mAP has not improved for {patience} evaluations (best {best_map:.4} at epoch {best_epoch})"
            ),
            StopReason::Cancelled { epoch, step } => {
                write!(
                    f,
                    "cancelled during epoch {} at step {step}; resume to continue",
                    epoch + 1
                )
            }
        }
    }
}

/// What a finished (or cancelled) run produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainSummary {
    pub reason: StopReason,
    /// `reason` as a sentence, for readers of `summary.json` that do not know its variants.
    #[serde(default)]
    pub stop: String,
    pub epochs_run: usize,
    pub steps: u64,
    /// Best validation mAP during training and the epoch it was reached at.
    pub best: Option<(f64, usize)>,
    /// The last evaluation's validation mAP and its epoch (below `best` when the run went past
    /// its best epoch).
    pub last: Option<(f64, usize)>,
    /// mAP of `detections`, made with the best weights, with the official protocol; `None` when
    /// cancelled or when no class had ground truth.
    pub best_weights_map: Option<f64>,
    pub detections: Option<PathBuf>,
    /// Mean training throughput over the epochs of this invocation.
    pub train_clips_per_s: f64,
}

/// Trains on `config.train_split`, evaluates on `config.val_split`, and writes everything under
/// `run_dir`. With `config.resume` and a checkpoint in `run_dir` it continues from there.
/// Setting `cancel` stops after the current optimizer step with a checkpoint saved.
pub fn train(
    config: &TrainConfig,
    data_dir: &Path,
    run_dir: &Path,
    cancel: &AtomicBool,
    progress: &dyn Fn(TrainEvent),
) -> Result<TrainSummary, TrainError> {
    session::run(config, data_dir, run_dir, cancel, progress)
}
