//! The interface every pipeline stage implements.
//!
//! A stage is a list of items and a function that completes one item. Whole-dataset stages (parse
//! the annotations, write the frame lists, train) have a single item; per-video stages (download a
//! video, extract its frames) have one item per video, which is what lets a run resume at video
//! granularity and lets a video flow into the next per-video stage as soon as it is ready.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::runner::StageReport;
use super::state::ItemRecord;
use crate::progress::Reporter;

/// The name of the single item of a whole-dataset stage.
pub const WHOLE: &str = "all";

/// An item a stage plans, with what determines its output besides the stage's parameters and
/// what it reads of the stages before it: for a video, its entry in the plan (its file, its
/// keyframes) and the print of a source file it reads from outside the data directory. A run
/// redoes exactly the items whose inputs changed.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedItem {
    pub name: String,
    pub inputs: serde_json::Value,
}

impl PlannedItem {
    pub fn new(name: impl Into<String>, inputs: serde_json::Value) -> Self {
        PlannedItem {
            name: name.into(),
            inputs,
        }
    }

    /// The single item of a whole-dataset stage, whose inputs are the stages before it.
    pub fn whole() -> Self {
        PlannedItem::new(WHOLE, serde_json::Value::Null)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    Whole,
    PerVideo,
}

/// What a stage sees of the run. Stages share nothing else: what one stage produces, the next
/// reads from files under `data_dir`.
pub struct StageContext<'a> {
    pub data_dir: &'a Path,
    pub reporter: &'a dyn Reporter,
    pub cancel: &'a AtomicBool,
    /// The running stage's fingerprint, set by the runner for each stage: work a stage keeps
    /// across runs (training checkpoints) is resumed only under the same one.
    pub fingerprint: &'a str,
    /// Items of the running stage, besides this one, that no worker has begun, set by the runner
    /// for each item (0 for the last): an item that will run alone, or nearly, can use more cores.
    pub not_started: usize,
}

impl StageContext<'_> {
    /// Long items poll this between units of work so Ctrl-C stops them at a clean point.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// An item that did not complete. The message names the file, line or video and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ItemError {
    pub message: String,
    /// The item can never complete (the server has no such video): it is recorded as missing and
    /// later stages drop it, instead of retrying it on every run.
    pub permanent: bool,
}

impl ItemError {
    pub fn new(message: impl Into<String>) -> Self {
        ItemError {
            message: message.into(),
            permanent: false,
        }
    }

    pub fn missing(message: impl Into<String>) -> Self {
        ItemError {
            message: message.into(),
            permanent: true,
        }
    }
}

pub trait Stage: Send + Sync {
    /// The stage's name in pipeline files, state files and `status`.
    fn name(&self) -> &'static str;

    /// Stages whose outputs this one reads. What they made is part of each item's key: a
    /// per-video stage reads the same video's item of a per-video stage before it (and its own
    /// entry of a whole-dataset stage's plan, through [`PlannedItem::inputs`]); a whole-dataset
    /// stage reads everything they made.
    fn depends_on(&self) -> &'static [&'static str];

    fn granularity(&self) -> Granularity;

    /// Everything that determines every item's output besides its own inputs and dependencies:
    /// parameters, the dataset description, and a version that changes when the stage's output
    /// format changes. A change redoes every item.
    fn params(&self) -> serde_json::Value;

    /// The items to complete with their inputs, known once the dependencies are done. Whole
    /// stages return `[PlannedItem::whole()]`.
    fn plan(&self, context: &StageContext) -> Result<Vec<PlannedItem>, ItemError>;

    /// How many items may run at once.
    fn concurrency(&self) -> usize {
        1
    }

    /// Completes one item. It must leave no partial output that a later call could take as
    /// complete: write under temporary names and rename when done.
    fn run_item(&self, context: &StageContext, item: &str) -> Result<ItemRecord, ItemError>;

    /// Lines for people under the stage's line in a run's report, from its own counts.
    fn summary(&self, _report: &StageReport) -> Vec<String> {
        Vec::new()
    }
}
