//! The records the trainer writes and the data tool reads: its `--json` events, `summary.json`
//! and `init.json`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::trainer_settings::Precision;

/// Progress for the caller to show; the library prints nothing itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TrainEvent {
    Started {
        device: String,
        precision: Precision,
        train_clips: usize,
        val_clips: usize,
        /// Keyframes skipped because no extracted frame lies near them.
        keyframes_without_frames: usize,
        /// Videos of the splits with no frames at all, left out as the lists leave them out.
        #[serde(default)]
        videos_without_frames: Vec<String>,
        /// `(epoch, step)` of the checkpoint resumed from.
        resumed_from: Option<(usize, u64)>,
    },
    Batch {
        epoch: usize,
        batch: usize,
        batches: usize,
        #[serde(deserialize_with = "number_or_nan")]
        loss: f64,
        #[serde(deserialize_with = "number_or_nan")]
        lr: f64,
    },
    EpochEnd {
        epoch: usize,
        #[serde(deserialize_with = "number_or_nan")]
        loss: f64,
        #[serde(deserialize_with = "number_or_nan")]
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

impl TrainEvent {
    /// What a `Started` event says of the videos it left out: "; 1 video without frames left out
    /// (x), as the lists do", or nothing.
    pub fn left_out_text(videos: &[String]) -> String {
        match videos.len() {
            0 => String::new(),
            count => format!(
                "; {} without frames left out ({}), as the lists do",
                crate::progress::counted(count as u64, "video", "videos"),
                crate::progress::first_named(videos, 5),
            ),
        }
    }
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
                "early stop after epoch {epoch}: val mAP has not improved for {} (best {best_map:.4} at epoch {best_epoch})",
                crate::progress::counted(*patience as u64, "evaluation", "evaluations")
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
    /// Those detections' file, in the run folder (`detections.csv`).
    pub detections: Option<PathBuf>,
    /// Mean training throughput over the epochs of this invocation.
    #[serde(default)]
    pub train_clips_per_s: f64,
}

/// What starting weights gave the model: the rest keeps its fresh initialisation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitReport {
    pub file: PathBuf,
    /// Model variables copied from the file.
    pub loaded: usize,
    /// Model variables left as initialised, each with the reason.
    pub skipped: Vec<SkippedTensor>,
    /// Tensors of the file the model has no variable for.
    pub unused: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedTensor {
    pub name: String,
    pub reason: String,
}

/// A number JSON cannot hold (a diverged loss, NaN) is written as `null`: read back as NaN, so
/// the event still arrives.
fn number_or_nan<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::NAN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_with_a_diverged_loss_is_still_read() {
        let event = TrainEvent::Batch {
            epoch: 0,
            batch: 3,
            batches: 9,
            loss: f64::NAN,
            lr: 0.1,
        };
        let line = serde_json::to_string(&event).unwrap();
        let TrainEvent::Batch { batch, loss, .. } = serde_json::from_str(&line).unwrap() else {
            panic!("{line}");
        };
        assert_eq!(batch, 3);
        assert!(loss.is_nan());
    }

    #[test]
    fn an_early_stop_counts_its_evaluations() {
        let stop = |patience| StopReason::EarlyStopped {
            epoch: 4,
            best_epoch: 3,
            best_map: 0.5,
            patience,
        };
        assert_eq!(
            stop(1).to_string(),
            "early stop after epoch 4: val mAP has not improved for 1 evaluation (best 0.5000 at epoch 3)"
        );
        assert!(stop(3).to_string().contains("for 3 evaluations"));
    }
}
