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

    /// Stages whose outputs this one reads. Their fingerprints are part of this stage's fingerprint,
    /// so a change upstream makes this stage stale.
    fn depends_on(&self) -> &'static [&'static str];

    fn granularity(&self) -> Granularity;

    /// Everything that determines the stage's output besides its dependencies: parameters, the
    /// dataset description, and a version that changes when the stage's output format changes.
    fn params(&self) -> serde_json::Value;

    /// The items to complete, known once the dependencies are done. Whole stages return `[WHOLE]`.
    fn plan(&self, context: &StageContext) -> Result<Vec<String>, ItemError>;

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
