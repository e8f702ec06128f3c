//! The interface every pipeline stage implements.
//!
//! A stage is a list of items and a function that completes one item. Whole-dataset stages (parse
//! the annotations, write the frame lists, train) have a single item; per-video stages (download a
//! video, extract its frames) have one item per video, which is what lets a run resume at video
//! granularity and lets a video flow into the next per-video stage as soon as it is ready.

use std::fmt::Display;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::runner::StageReport;
use super::state::{CountsMismatch, ItemRecord};
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

/// Why an item did not complete: what the person does next differs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// A setting cannot work with this data (a start after the segment, a margin too small for
    /// the clip): change the setting.
    Usage,
    /// What the item reads is missing or wrong (a video that does not decode, a file an earlier
    /// stage should have made): fix or replace it.
    #[default]
    Input,
    /// A download failed (network, server, checksum): the next run tries again.
    Download,
    /// The source does not have the item (HTTP 404, not in the folder): it is recorded as missing
    /// and later stages drop it, instead of retrying it on every run.
    Missing,
    /// Writing the output failed (disk full, permissions).
    Output,
    /// The trainer executable failed or could not start.
    Trainer,
    /// Not started: what it reads from an earlier stage did not complete; it runs once that does.
    Blocked,
}

/// An item that did not complete. The message names the file, line or video and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ItemError {
    pub kind: FailureKind,
    pub message: String,
}

impl ItemError {
    pub fn usage(message: impl Display) -> Self {
        Self::of(FailureKind::Usage, message)
    }

    pub fn input(message: impl Display) -> Self {
        Self::of(FailureKind::Input, message)
    }

    pub fn download(message: impl Display) -> Self {
        Self::of(FailureKind::Download, message)
    }

    pub fn missing(message: impl Display) -> Self {
        Self::of(FailureKind::Missing, message)
    }

    pub fn output(message: impl Display) -> Self {
        Self::of(FailureKind::Output, message)
    }

    pub fn trainer(message: impl Display) -> Self {
        Self::of(FailureKind::Trainer, message)
    }

    /// The same error with what was done about it after the message.
    pub fn with_note(mut self, note: &str) -> Self {
        self.message = format!("{}; {note}", self.message);
        self
    }

    fn of(kind: FailureKind, message: impl Display) -> Self {
        ItemError {
            kind,
            message: message.to_string(),
        }
    }
}

/// What names a stage: the pipeline's typed list of stages. The engine carries ids; a name is
/// written and read only where a state file, a report or a progress line holds it.
pub trait StageName:
    Copy + Eq + Ord + std::hash::Hash + std::fmt::Debug + Send + Sync + 'static
{
    /// The stage's name in pipeline files, state files and `status`.
    fn name(self) -> &'static str;

    /// The stage a state file names; `None` for a name no stage of this pipeline has.
    fn from_name(name: &str) -> Option<Self>;
}

/// Serializes a stage id as its name, for reports written as JSON.
pub fn serialize_name<Id: StageName, S: serde::Serializer>(
    id: &Id,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(id.name())
}

pub trait Stage: Send + Sync {
    /// The type that names the stages of this pipeline.
    type Id: StageName;

    fn id(&self) -> Self::Id;

    /// Stages whose outputs this one reads. What they made is part of each item's key: a
    /// per-video stage reads the same video's item of a per-video stage before it (and its own
    /// entry of a whole-dataset stage's plan, through [`PlannedItem::inputs`]); a whole-dataset
    /// stage reads everything they made.
    fn depends_on(&self) -> &'static [Self::Id];

    /// Whole-dataset unless the stage says otherwise.
    fn granularity(&self) -> Granularity {
        Granularity::Whole
    }

    /// Everything that determines every item's output besides its own inputs and dependencies:
    /// parameters, the dataset description, and a version that changes when the stage's output
    /// format changes. A change redoes every item.
    fn params(&self) -> serde_json::Value;

    /// The items to complete with their inputs, known once the dependencies are done; by
    /// default a whole-dataset stage's one item, which reads only the stages before it.
    fn plan(&self, _context: &StageContext) -> Result<Vec<PlannedItem>, ItemError> {
        Ok(vec![PlannedItem::whole()])
    }

    /// How many items may run at once.
    fn concurrency(&self) -> usize {
        1
    }

    /// Completes one item. It must leave no partial output that a later call could take as
    /// complete: write under temporary names and rename when done.
    fn run_item(&self, context: &StageContext, item: &str) -> Result<ItemRecord, ItemError>;

    /// Lines for people under the stage's line in a run's report, from its own counts (recorded
    /// counts it does not know are an error: the state is another version's).
    fn summary(&self, _report: &StageReport<Self::Id>) -> Result<Vec<String>, CountsMismatch> {
        Ok(Vec::new())
    }

    /// What the stage hands the user after a run in which every stage succeeded: its result
    /// read back from its record in `data_dir` (whether this run made it or an earlier one),
    /// or `None` for a stage whose work ends in files the stage lines already name.
    fn closing(&self, _data_dir: &Path) -> Option<Closing> {
        None
    }

    /// Said when what the stage made was changed by hand and is made again: where such an edit
    /// belongs instead, for a stage whose files are copies of another's.
    fn edits_belong(&self, _data_dir: &Path) -> Option<String> {
        None
    }
}

/// A stage's result at the end of a run: one record for `--json` and the lines a person reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Closing {
    /// The record's `type` in `--json` output.
    pub record_type: &'static str,
    pub record: serde_json::Value,
    pub lines: Vec<String>,
}

/// A stage as the runner holds it: whatever type it is, named by the pipeline's ids, so one
/// runner serves any pipeline's stages. Every [`Stage`] is one.
pub trait AnyStage<Id: StageName>: Send + Sync {
    fn id(&self) -> Id;
    fn depends_on(&self) -> &'static [Id];
    /// Whole-dataset unless the stage says otherwise.
    fn granularity(&self) -> Granularity {
        Granularity::Whole
    }
    fn params(&self) -> serde_json::Value;
    fn plan(&self, context: &StageContext) -> Result<Vec<PlannedItem>, ItemError>;
    fn concurrency(&self) -> usize;
    fn run_item(&self, context: &StageContext, item: &str) -> Result<ItemRecord, ItemError>;
    fn summary(&self, report: &StageReport<Id>) -> Result<Vec<String>, CountsMismatch>;
    fn closing(&self, data_dir: &Path) -> Option<Closing>;
    fn edits_belong(&self, data_dir: &Path) -> Option<String>;
}

impl<S: Stage> AnyStage<S::Id> for S {
    fn id(&self) -> S::Id {
        Stage::id(self)
    }

    fn depends_on(&self) -> &'static [S::Id] {
        Stage::depends_on(self)
    }

    fn granularity(&self) -> Granularity {
        Stage::granularity(self)
    }

    fn params(&self) -> serde_json::Value {
        Stage::params(self)
    }

    fn plan(&self, context: &StageContext) -> Result<Vec<PlannedItem>, ItemError> {
        Stage::plan(self, context)
    }

    fn concurrency(&self) -> usize {
        Stage::concurrency(self)
    }

    fn run_item(&self, context: &StageContext, item: &str) -> Result<ItemRecord, ItemError> {
        Stage::run_item(self, context, item)
    }

    fn summary(&self, report: &StageReport<S::Id>) -> Result<Vec<String>, CountsMismatch> {
        Stage::summary(self, report)
    }

    fn closing(&self, data_dir: &Path) -> Option<Closing> {
        Stage::closing(self, data_dir)
    }

    fn edits_belong(&self, data_dir: &Path) -> Option<String> {
        Stage::edits_belong(self, data_dir)
    }
}
