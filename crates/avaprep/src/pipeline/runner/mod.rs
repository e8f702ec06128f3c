//! Executes stages in dependency order, skipping what is up to date and resuming what was
//! interrupted.
//!
//! Consecutive per-video stages run as one streaming group: each stage has its own workers, and a
//! video moves on to the next stage the moment the previous one finishes it, so downloading and
//! extracting overlap. Whole-dataset stages run alone once everything before them is done.
//!
//! The runner is generic over the pipeline's stage ids; names appear only where state files and
//! reports are written and read. Its parts: [`graph`] (order and groups), [`prepare`] (state,
//! plan and what is current), [`keys`] (what an item's key is made of), [`execute`] (workers and
//! hand-offs), [`blockers`] (why a stage cannot run), [`shards`] (where state is kept, sharded
//! runs), [`legacy`] (earlier versions' state files) and [`report`].

mod blockers;
mod execute;
mod graph;
mod keys;
mod legacy;
mod prepare;
mod report;
mod shards;

use std::collections::{BTreeSet, HashMap};

pub(crate) use graph::topological_order;
pub(crate) use keys::assess;
pub(crate) use legacy::adopt_item;
pub use report::{Blocker, RunReport, StageOutcome, StageReport};
pub(crate) use shards::merge_shard_states;

use super::prints::Scrutiny;
use super::stage::{AnyStage, Granularity, ItemError, StageContext, StageName, WHOLE};
use super::state::{ItemFailure, StateError, StateStore};
use super::{PipelineError, Shard};

/// See [`Runner::before_per_video`].
pub type BeforePerVideo<'a, Id> = dyn Fn(&[&StageReport<Id>]) + Sync + 'a;

pub struct Runner<'a, Id: StageName> {
    pub stages: Vec<&'a dyn AnyStage<Id>>,
    pub store: StateStore,
    pub shard: Option<Shard>,
    pub context: StageContext<'a>,
    /// How recorded outputs are compared with the files: `Contents` re-hashes every byte.
    pub scrutiny: Scrutiny,
    /// Called once, before the first per-video work, with the reports of the whole-dataset
    /// stages: a shard hands on its turn at the whole-dataset work there, and what they made is
    /// recorded before the videos' work, which may be stopped by a kill.
    pub before_per_video: Option<&'a BeforePerVideo<'a, Id>>,
}

fn state_error(error: StateError) -> ItemError {
    ItemError::output(error)
}

impl<Id: StageName> Runner<'_, Id> {
    pub fn run(&self) -> Result<RunReport<Id>, PipelineError> {
        let order = topological_order(&self.stages)?;
        let legacy = self.legacy_current(&order);
        let mut reports: HashMap<Id, StageReport<Id>> = HashMap::new();
        // Stages whose output covers only this shard's videos.
        let mut sharded_work: BTreeSet<Id> = BTreeSet::new();
        let mut index = 0;
        let mut per_video_started = false;
        while index < order.len() {
            let group = graph::group_at(&order, index);
            index += group.len();
            if group[0].granularity() == Granularity::PerVideo && !per_video_started {
                per_video_started = true;
                if let Some(hand_on) = self.before_per_video {
                    let whole: Vec<&StageReport<Id>> = reports.values().collect();
                    hand_on(&whole);
                }
            }
            let mut prepared = Vec::new();
            for stage in group {
                let id = stage.id();
                if self.is_deferred(stage, &mut sharded_work) {
                    reports.insert(id, StageReport::empty(id, StageOutcome::Deferred));
                    continue;
                }
                let blockers = self.blockers(stage, &reports);
                if !blockers.is_empty() {
                    self.mark_blocked(stage)?;
                    let mut report = StageReport::empty(id, StageOutcome::Blocked);
                    report.blocked_by = blockers;
                    reports.insert(id, report);
                    continue;
                }
                let mut notes = Vec::new();
                // An earlier version's state is adopted only while nothing before it changed.
                let adopt = legacy.contains(&id)
                    && self.ancestors(stage.depends_on()).iter().all(|ancestor| {
                        reports
                            .get(ancestor)
                            .is_none_or(|report| report.outcome == StageOutcome::UpToDate)
                    });
                match self.prepare(stage, &prepared, adopt, &mut notes) {
                    Ok(stage_prepared) => prepared.push(stage_prepared),
                    Err(error) => {
                        let mut report = StageReport::empty(id, StageOutcome::Failed);
                        report.notes = notes;
                        report.failures.push(ItemFailure {
                            item: WHOLE.to_string(),
                            kind: error.kind,
                            message: error.message,
                        });
                        reports.insert(id, report);
                    }
                }
            }
            self.execute_group(&prepared);
            for stage_prepared in &prepared {
                let report = self.finish(&prepared, stage_prepared)?;
                reports.insert(stage_prepared.stage.id(), report);
            }
            if self.context.cancelled() {
                break;
            }
        }
        // After a stop, a shard's stages that combine the shards are still deferred, not due.
        let stages = order
            .iter()
            .map(|stage| {
                reports.remove(&stage.id()).unwrap_or_else(|| {
                    let outcome = match self.is_deferred(*stage, &mut sharded_work) {
                        true => StageOutcome::Deferred,
                        false => StageOutcome::NotStarted,
                    };
                    StageReport::empty(stage.id(), outcome)
                })
            })
            .collect();
        Ok(RunReport { stages })
    }
}
