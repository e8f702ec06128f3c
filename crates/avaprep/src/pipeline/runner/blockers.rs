//! Why a stage cannot run: a dependency in this run that is not done, or one outside it (run by
//! an earlier command) that failed, did not finish, or changed since.

use std::collections::{BTreeSet, HashMap};

use super::Runner;
use super::keys::{is_whole, item_identity};
use super::report::{Blocker, StageOutcome, StageReport};
use crate::pipeline::PipelineError;
use crate::pipeline::fingerprint::upstream_digest;
use crate::pipeline::prints::first_change;
use crate::pipeline::stage::{AnyStage, Granularity, StageName, WHOLE};
use crate::pipeline::state::{ItemRecord, StageState, StageStatus};

impl<Id: StageName> Runner<'_, Id> {
    /// A stage is blocked when a dependency ran (or was blocked) in this run and is not done, or
    /// when a dependency outside this run is not done or its outputs changed. Dependencies in the
    /// same streaming group have no report yet and do not block.
    pub(crate) fn blockers(
        &self,
        stage: &dyn AnyStage<Id>,
        reports: &HashMap<Id, StageReport<Id>>,
    ) -> Vec<Blocker<Id>> {
        let mut blockers: Vec<Blocker<Id>> = stage
            .depends_on()
            .iter()
            .filter_map(|&dependency| {
                let report = reports.get(&dependency)?;
                let reason = match report.outcome {
                    StageOutcome::UpToDate | StageOutcome::Completed | StageOutcome::Deferred => {
                        return None;
                    }
                    StageOutcome::Failed if self.serves_the_others(dependency, report) => {
                        return None;
                    }
                    StageOutcome::Failed => "failed",
                    StageOutcome::Blocked => "was not run",
                    StageOutcome::Interrupted => "was interrupted",
                    StageOutcome::NotStarted => "was not started",
                };
                Some(Blocker {
                    stage: dependency,
                    reason: reason.to_string(),
                    in_this_run: true,
                })
            })
            .collect();
        blockers.extend(self.external_blockers(stage));
        blockers
    }

    /// Why the stages before this one that are outside this run (a single-step command's earlier
    /// stages, and theirs in turn) cannot be built on: one failed or was interrupted, what it made
    /// or read has changed since, or what it was made from has (a stage before it ran again).
    fn external_blockers(&self, stage: &dyn AnyStage<Id>) -> Vec<Blocker<Id>> {
        self.dependency_blockers(stage.depends_on())
    }

    /// [`Self::external_blockers`] of a command that reads what `dependencies` made without
    /// running in the runner (training).
    pub fn dependency_blockers(&self, dependencies: &[Id]) -> Vec<Blocker<Id>> {
        let mut queue: Vec<Id> = dependencies
            .iter()
            .copied()
            .filter(|&dependency| self.stage(dependency).is_none())
            .collect();
        let mut seen: BTreeSet<Id> = queue.iter().copied().collect();
        let mut blockers = Vec::new();
        while let Some(id) = queue.pop() {
            let Some(state) = self.peek(id) else {
                continue;
            };
            for earlier in state.dependencies::<Id>() {
                if self.stage(earlier).is_none() && seen.insert(earlier) {
                    queue.push(earlier);
                }
            }
            let reason = self
                .shards_not_run(id, &state)
                .or_else(|| self.external_reason(&state));
            if let Some(reason) = reason {
                blockers.push(Blocker {
                    stage: id,
                    reason,
                    in_this_run: false,
                });
            }
        }
        blockers
    }

    fn external_reason(&self, state: &StageState) -> Option<String> {
        // A per-video dependency that failed for some videos still serves the others: those
        // videos fail on their own downstream, the rest go on. One that was stopped (Ctrl-C, a
        // kill) does not: what follows would be made from part of the videos, as if the rest
        // had failed, when its next run makes them.
        let whole = state.items.contains_key(WHOLE)
            || state.failures.iter().any(|failure| failure.item == WHOLE);
        match state.status {
            StageStatus::Failed if whole => return Some("failed in its last run".to_string()),
            StageStatus::Running if whole => {
                return Some("did not finish its last run".to_string());
            }
            StageStatus::Running => {
                let unmade = state
                    .planned
                    .iter()
                    .filter(|item| !state.is_resolved(item))
                    .count();
                if unmade > 0 {
                    return Some(format!(
                        "did not finish its last run ({unmade} of {} videos not made yet)",
                        state.planned.len()
                    ));
                }
            }
            StageStatus::Failed => {}
            StageStatus::Blocked => {
                return Some(
                    "was left undone by the last run, as a stage before it was not done"
                        .to_string(),
                );
            }
            StageStatus::Done => {}
        }
        let records: Vec<(&String, &ItemRecord)> = state.planned_records().collect();
        if let Some(change) = records.iter().find_map(|(_, record)| {
            first_change(&record.outputs, self.context.data_dir, self.scrutiny)
        }) {
            return Some(format!("made files that changed since: {change}"));
        }
        if let Some(change) = records.iter().find_map(|(_, record)| {
            first_change(&record.inputs, self.context.data_dir, self.scrutiny)
        }) {
            return Some(format!("read files that changed since: {change}"));
        }
        if let Some(dependency) = state
            .read
            .iter()
            .find(|(dependency, made)| self.content_named(dependency) != **made)
            .map(|(dependency, _)| dependency)
        {
            return Some(format!(
                "is out of date: {dependency} made something else after it ran"
            ));
        }
        let dependencies: Vec<(&String, Option<StageState>)> = state
            .depends_on
            .iter()
            .map(|name| (name, Id::from_name(name).and_then(|id| self.peek(id))))
            .collect();
        let whole_upstream: Vec<String> = match is_whole(state) {
            true => self
                .ancestors(&state.dependencies())
                .into_iter()
                .map(|ancestor| self.content_of(ancestor))
                .collect(),
            false => Vec::new(),
        };
        let upstream_now = |item: &str| {
            if is_whole(state) {
                return upstream_digest(&whole_upstream);
            }
            let identities: Vec<String> = dependencies
                .iter()
                .filter_map(|(name, dependency)| match dependency {
                    None => Some(format!("external:{name}")),
                    Some(dependency) if is_whole(dependency) => None,
                    Some(dependency) => Some(item_identity(dependency, item)),
                })
                .collect();
            upstream_digest(&identities)
        };
        let stale = records.iter().find(|(item, record)| {
            !record.upstream.is_empty() && record.upstream != upstream_now(item)
        })?;
        Some(format!(
            "is out of date: {} changed after it made {}",
            state.depends_on.join(", "),
            stale.0
        ))
    }

    /// A per-video stage that failed for some videos only still serves the others: a
    /// whole-dataset stage after it runs on the videos it completed (and says which it left out).
    fn serves_the_others(&self, dependency: Id, report: &StageReport<Id>) -> bool {
        let per_video = self
            .stage(dependency)
            .is_some_and(|stage| stage.granularity() == Granularity::PerVideo);
        let whole_failed = report.failures.iter().any(|failure| failure.item == WHOLE);
        per_video && !whole_failed && report.completed + report.already_done > 0
    }

    /// A done stage that a run could not run is no longer done: what it depends on failed.
    pub(crate) fn mark_blocked(&self, stage: &dyn AnyStage<Id>) -> Result<(), PipelineError> {
        if let Some(mut state) = self.peek_own(stage.id())
            && state.status == StageStatus::Done
        {
            state.status = StageStatus::Blocked;
            self.store_for(stage.id()).save(&state)?;
        }
        Ok(())
    }

    /// What the stage a state file names made now (see [`Self::content_of`]).
    fn content_named(&self, name: &str) -> String {
        match Id::from_name(name) {
            Some(id) => self.content_of(id),
            None => format!("external:{name}"),
        }
    }
}
