//! What a run reports: each stage's outcome, counts, failures and blockers, by stage id.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::pipeline::stage::{StageName, serialize_name};
use crate::pipeline::state::{CountsMismatch, ItemFailure, typed_counts};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StageOutcome {
    /// Already done with the same fingerprint: nothing ran.
    UpToDate,
    /// Every planned item is done.
    Completed,
    /// Some items failed or could not start because an upstream item failed.
    Failed,
    /// Not run because a stage it depends on is not done.
    Blocked,
    /// Stopped by Ctrl-C; the next run resumes it.
    Interrupted,
    /// Ctrl-C stopped the run before this stage began; the next run does it.
    NotStarted,
    /// A whole-dataset stage after per-video work in a sharded run: it needs every shard's output,
    /// so the unsharded run that combines the shards does it.
    Deferred,
}

#[derive(Debug, Clone, Serialize)]
#[serde(bound(serialize = ""))]
pub struct StageReport<Id: StageName> {
    #[serde(serialize_with = "serialize_name")]
    pub stage: Id,
    pub outcome: StageOutcome,
    pub planned: usize,
    /// Items completed by this run.
    pub completed: usize,
    /// Items skipped because an earlier run (or a shard) completed them.
    pub already_done: usize,
    pub failures: Vec<ItemFailure>,
    /// Items found missing by this run (a video the server does not have).
    pub newly_missing: Vec<ItemFailure>,
    /// Items recorded as missing, by this run or an earlier one.
    pub missing: usize,
    /// The stage's own counts (frames decoded, videos downloaded ...), summed over its items.
    pub counts: BTreeMap<String, u64>,
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Things a user should know, such as a corrupt state file that was set aside.
    pub notes: Vec<String>,
    /// For a blocked stage: the dependencies that are not done, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<Blocker<Id>>,
}

/// A dependency a stage cannot run on.
#[derive(Debug, Clone, Serialize)]
pub struct Blocker<Id: StageName> {
    #[serde(serialize_with = "serialize_name")]
    pub stage: Id,
    pub reason: String,
    /// The stage ran (or was blocked) in this run: what it said is above, and running it first
    /// is not what to do.
    pub in_this_run: bool,
}

impl<Id: StageName> StageReport<Id> {
    /// The stage's counts as its own typed struct (as `ItemRecord::with_counts` stored them); a
    /// count the struct does not have is an error, not a zero.
    pub fn counts_as<T: serde::de::DeserializeOwned + Serialize + Default>(
        &self,
    ) -> Result<T, CountsMismatch> {
        typed_counts(self.stage.name(), &self.counts)
    }

    pub(crate) fn empty(stage: Id, outcome: StageOutcome) -> Self {
        StageReport {
            stage,
            outcome,
            planned: 0,
            completed: 0,
            already_done: 0,
            failures: Vec::new(),
            newly_missing: Vec::new(),
            missing: 0,
            counts: BTreeMap::new(),
            files: 0,
            bytes: 0,
            seconds: 0.0,
            notes: Vec::new(),
            blocked_by: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(bound(serialize = ""))]
pub struct RunReport<Id: StageName> {
    pub stages: Vec<StageReport<Id>>,
}

impl<Id: StageName> RunReport<Id> {
    /// Every stage is done and nothing new went missing. A video found missing fails the run that
    /// finds it; later runs, which drop it consistently, succeed.
    pub fn succeeded(&self) -> bool {
        self.stages.iter().all(|stage| {
            stage.newly_missing.is_empty()
                && matches!(
                    stage.outcome,
                    StageOutcome::UpToDate | StageOutcome::Completed | StageOutcome::Deferred
                )
        })
    }
}
