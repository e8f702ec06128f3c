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

use std::path::Path;
use std::sync::atomic::AtomicBool;

#[cfg(test)]
pub use checkpoint::TrainState;
pub use checkpoint::network_of;

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

pub use avaprep::trainer_protocol::{InitReport, StopReason, TrainEvent, TrainSummary};
pub use avaprep::trainer_settings::{ModelPreset, Preset, TrainConfig};
pub use error::{DataError, TrainError};
pub use predict::predict;

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
