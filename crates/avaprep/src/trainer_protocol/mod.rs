//! What crosses between the data tool and the trainer executable (`avaprep-train`), defined once
//! for both: the trainer's command line ([`TrainerCall`]), its `--json` event records
//! ([`TrainEvent`]), the run folder's file names ([`run_files`]) and the records in it that the
//! data tool reads (`summary.json` as [`TrainSummary`], `checkpoint.json`'s weights as
//! [`CheckpointFiles`], `config.json` as the [`TrainConfig`](crate::trainer_settings::TrainConfig)
//! the run used). The trainer writes through these types and the data tool reads through them.

mod call;
mod records;

pub use call::{TrainerCall, TrainerCommand};
pub use records::{InitReport, SkippedTensor, StopReason, TrainEvent, TrainSummary};

use serde::{Deserialize, Serialize};

/// The files of a run folder, by name.
pub mod run_files {
    /// The run's whole configuration as TOML: what the data tool writes for the trainer to read
    /// (`--config`), and what the trainer writes back, resolved, when it starts.
    pub const CONFIG_TOML: &str = "config.toml";
    /// The same configuration as JSON.
    pub const CONFIG_JSON: &str = "config.json";
    /// The committed checkpoint: it names the tensor files of the current state.
    pub const CHECKPOINT: &str = "checkpoint.json";
    /// How and why the run ended ([`super::TrainSummary`]).
    pub const SUMMARY: &str = "summary.json";
    /// The best weights' detections on the validation split, and their evaluation.
    pub const DETECTIONS: &str = "detections.csv";
    pub const EVAL: &str = "eval.json";
    /// With `init_weights`: what was loaded ([`super::InitReport`]).
    pub const INIT: &str = "init.json";
    pub const METRICS_JSONL: &str = "metrics.jsonl";
    pub const METRICS_CSV: &str = "metrics.csv";
    pub const CURVES: &str = "curves.png";
    /// The digest of what the pipeline's training read, written when it finished: a run folder
    /// with the one a training now would read is kept instead (see `stages::train`). Any
    /// training that starts in the folder removes it first, so it never speaks for weights that
    /// a continuation (`avaprep train --resume`) changed.
    pub const READS: &str = "reads.sha256";
    /// Written by a training started by hand (`avaprep train`), not by the pipeline: the
    /// pipeline never continues or keeps the folder as its own after that.
    pub const BY_HAND: &str = "trained-by-hand.txt";
}

/// The tensor files `checkpoint.json` names (the rest of it is the trainer's own state).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointFiles {
    pub model_file: Option<String>,
    pub optimizer_file: Option<String>,
    /// Weights of the best evaluation so far.
    pub best_file: Option<String>,
}

impl CheckpointFiles {
    /// The weights a finished run hands on: the best evaluation's, else the last checkpoint's;
    /// `None` for a name that is not a plain file name of the run folder.
    pub fn weights(&self) -> Option<&str> {
        self.best_file
            .as_deref()
            .or(self.model_file.as_deref())
            .filter(|name| !name.contains('/') && !name.starts_with('.'))
    }
}
