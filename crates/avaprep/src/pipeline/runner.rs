//! Executes stages in dependency order, skipping what is up to date and resuming what was
//! interrupted.
//!
//! Consecutive per-video stages run as one streaming group: each stage has its own workers, and a
//! video moves on to the next stage the moment the previous one finishes it, so downloading and
//! extracting overlap. Whole-dataset stages run alone once everything before them is done.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, unbounded};
use rayon::prelude::*;
use serde::Serialize;

use super::fingerprint::{item_key, legacy_fingerprint, stage_key, upstream_digest};
use super::prints::{Scrutiny, combined_digest, first_change, items_digest};
use super::stage::{
    AnyStage, FailureKind, Granularity, ItemError, PlannedItem, StageContext, WHOLE,
};
use super::state::{
    ItemFailure, LEGACY_FORMAT, Loaded, Peeked, STATE_FORMAT, StageState, StageStatus, StateError,
    StateStore,
};
use super::{PipelineError, Shard};

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
    /// A whole-dataset stage after per-video work in a sharded run: it needs every shard's output,
    /// so the unsharded run that combines the shards does it.
    Deferred,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageReport {
    pub stage: String,
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
    pub blocked_by: Vec<Blocker>,
}

/// A dependency a stage cannot run on.
#[derive(Debug, Clone, Serialize)]
pub struct Blocker {
    pub stage: String,
    pub reason: String,
}

/// "3 items changed since they were made: ... ; redoing them", naming a few.
fn changed_note(changed: &[(String, String)]) -> Option<String> {
    const NAMED: usize = 3;
    let (first_item, first_change) = changed.first()?;
    let mut note = format!("{first_item}: {first_change}");
    for (item, change) in changed.iter().skip(1).take(NAMED - 1) {
        note.push_str(&format!("; {item}: {change}"));
    }
    if changed.len() > NAMED {
        note.push_str(&format!("; and {} more", changed.len() - NAMED));
    }
    let items = if changed.len() == 1 { "item" } else { "items" };
    Some(format!(
        "{} {items} changed since made, redoing: {note}",
        changed.len()
    ))
}

impl StageReport {
    /// The stage's counts as its own typed struct (as `ItemRecord::with_counts` stored them).
    pub fn counts_as<T: serde::de::DeserializeOwned + Default>(&self) -> T {
        super::state::typed_counts(&self.counts)
    }

    fn empty(stage: &str, outcome: StageOutcome) -> Self {
        StageReport {
            stage: stage.to_string(),
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
pub struct RunReport {
    pub stages: Vec<StageReport>,
}

impl RunReport {
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

pub struct Runner<'a> {
    pub stages: Vec<&'a dyn AnyStage>,
    pub store: StateStore,
    pub shard: Option<Shard>,
    pub context: StageContext<'a>,
    /// How recorded outputs are compared with the files: `Contents` re-hashes every byte.
    pub scrutiny: Scrutiny,
    /// Called once, before the first per-video work: a shard hands on its turn at the
    /// whole-dataset work there.
    pub before_per_video: Option<&'a (dyn Fn() + Sync)>,
}

/// What one stage hands the next about a video.
#[derive(Debug, Clone)]
enum Handoff {
    Ready(String),
    /// The video can never be completed upstream; the reason travels with it.
    Missing(String, String),
}

impl Handoff {
    fn item(&self) -> &str {
        match self {
            Handoff::Ready(item) | Handoff::Missing(item, _) => item,
        }
    }
}

#[derive(Clone)]
struct Downstream {
    sender: Sender<Handoff>,
    plan: BTreeSet<String>,
}

/// A stage about to run: its state (fresh or resumed), its plan and where what its items read of
/// the stages before it comes from.
pub(super) struct Prepared<'s> {
    stage: &'s dyn AnyStage,
    keys: ItemKeys,
    state: Mutex<StageState>,
    plan: Vec<String>,
    /// Items already done with their current keys, as far as known before the run.
    already_done: usize,
    up_to_date: bool,
    notes: Vec<String>,
    started: Instant,
    completed: Mutex<usize>,
    /// Items found done with their current keys when their turn came.
    skipped: AtomicUsize,
    /// An earlier version's state, adopted: a record without a key takes its current one
    /// unless what it reads was made again in this run.
    adopt: bool,
    /// Items this run made.
    made: Mutex<BTreeSet<String>>,
    /// Items this run has begun or found missing upstream.
    begun: AtomicUsize,
    newly_missing: Mutex<Vec<ItemFailure>>,
}

/// What the keys of a stage's items are made of.
pub(super) struct ItemKeys {
    /// The stage's key: its name and parameters.
    stage: String,
    inputs: HashMap<String, PlannedItem>,
    upstream: Vec<Upstream>,
}

impl ItemKeys {
    /// An item's key and its upstream part, from what its dependencies hold now (`group`: the
    /// stages running in the same group, for [`Upstream::InGroup`]).
    pub(super) fn of(&self, group: &[Prepared], item: &str) -> (String, String) {
        let identities: Vec<String> = self
            .upstream
            .iter()
            .map(|upstream| match upstream {
                Upstream::InGroup(index) => {
                    item_identity(&group[*index].state.lock().expect("state lock"), item)
                }
                Upstream::Recorded(state) => item_identity(state, item),
                Upstream::Whole(digest) => digest.clone(),
            })
            .collect();
        let upstream = upstream_digest(&identities);
        let planned = self
            .inputs
            .get(item)
            .cloned()
            .unwrap_or_else(|| PlannedItem::new(item, serde_json::Value::Null));
        (item_key(&self.stage, &planned, &upstream), upstream)
    }
}

/// Where one dependency's part of an item's key comes from.
enum Upstream {
    /// A per-video stage running in the same group: the same video's record, once made.
    InGroup(usize),
    /// A per-video stage that ran before: the same video's record, as recorded.
    Recorded(Box<StageState>),
    /// Everything the stage made (for a whole-dataset stage), or a stage without a state.
    Whole(String),
}

/// What a state offers a per-video stage after it for one video.
fn item_identity(state: &StageState, item: &str) -> String {
    match (state.items.get(item), state.missing.get(item)) {
        (Some(record), _) => record.identity(),
        (None, Some(reason)) => format!("missing: {reason}"),
        (None, None) => "none".to_string(),
    }
}

/// A state of a whole-dataset stage: one item, `WHOLE`.
fn is_whole(state: &StageState) -> bool {
    state.planned.iter().map(String::as_str).eq([WHOLE])
        || (state.planned.is_empty() && state.items.keys().map(String::as_str).eq([WHOLE]))
}

/// "4 items to redo, their inputs changed: video1, video2, video3 and 1 more" (`what` has the
/// singular and the plural).
fn items_note(items: &[String], what: [&str; 2]) -> Option<String> {
    const NAMED: usize = 3;
    if items.is_empty() {
        return None;
    }
    let mut named = items
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > NAMED {
        named.push_str(&format!(" and {} more", items.len() - NAMED));
    }
    let (noun, what) = match items.len() {
        1 => ("item", what[0]),
        _ => ("items", what[1]),
    };
    Some(format!("{} {noun} {what}: {named}", items.len()))
}

impl<'a> Runner<'a> {
    pub fn run(&self) -> Result<RunReport, PipelineError> {
        let order = topological_order(&self.stages)?;
        let legacy = self.legacy_current(&order);
        let mut reports: HashMap<&str, StageReport> = HashMap::new();
        // Stages whose output covers only this shard's videos.
        let mut sharded_work: BTreeSet<&str> = BTreeSet::new();
        let mut index = 0;
        let mut per_video_started = false;
        while index < order.len() {
            let group = self.group_at(&order, index);
            index += group.len();
            if group[0].granularity() == Granularity::PerVideo && !per_video_started {
                per_video_started = true;
                if let Some(hand_on) = self.before_per_video {
                    hand_on();
                }
            }
            let mut prepared = Vec::new();
            for stage in group {
                if self.is_deferred(stage, &mut sharded_work) {
                    reports.insert(
                        stage.name(),
                        StageReport::empty(stage.name(), StageOutcome::Deferred),
                    );
                    continue;
                }
                let blockers = self.blockers(stage, &reports);
                if !blockers.is_empty() {
                    self.mark_blocked(stage)?;
                    let mut report = StageReport::empty(stage.name(), StageOutcome::Blocked);
                    report.blocked_by = blockers;
                    reports.insert(stage.name(), report);
                    continue;
                }
                let mut notes = Vec::new();
                // An earlier version's state is adopted only while nothing before it changed.
                let adopt = legacy.contains(stage.name())
                    && self.ancestors(&stage.depends_on()).iter().all(|ancestor| {
                        reports
                            .get(ancestor.as_str())
                            .is_none_or(|report| report.outcome == StageOutcome::UpToDate)
                    });
                match self.prepare(stage, &prepared, adopt, &mut notes) {
                    Ok(stage_prepared) => prepared.push(stage_prepared),
                    Err(error) => {
                        let mut report = StageReport::empty(stage.name(), StageOutcome::Failed);
                        report.notes = notes;
                        report.failures.push(ItemFailure {
                            item: super::stage::WHOLE.to_string(),
                            kind: error.kind,
                            message: error.message,
                        });
                        reports.insert(stage.name(), report);
                    }
                }
            }
            self.execute_group(&prepared);
            for stage_prepared in &prepared {
                let report = self.finish(&prepared, stage_prepared)?;
                reports.insert(stage_prepared.stage.name(), report);
            }
            if self.context.cancelled() {
                break;
            }
        }
        let stages = order
            .iter()
            .map(|stage| {
                reports
                    .remove(stage.name())
                    .unwrap_or_else(|| StageReport::empty(stage.name(), StageOutcome::Interrupted))
            })
            .collect();
        Ok(RunReport { stages })
    }

    /// Where a stage's state is kept: a shard's own file for per-video work; the shared file for
    /// a whole-dataset stage, which in a sharded run the shards do in turn (see the lock), so
    /// the first does it and the others find it done.
    pub(super) fn store_for(&self, name: &str) -> StateStore {
        let whole = self
            .stages
            .iter()
            .any(|stage| stage.name() == name && stage.granularity() == Granularity::Whole);
        match whole && self.shard.is_some() {
            true => StateStore::new(self.context.data_dir, None),
            false => self.store.clone(),
        }
    }

    /// Stages whose state an earlier version wrote (format 1) and that were up to date by that
    /// version's rule: their items are adopted under their current keys instead of redone.
    /// Computed from the state files as they are before anything runs.
    pub(super) fn legacy_current(&self, order: &[&dyn AnyStage]) -> BTreeSet<&'static str> {
        let peek = |name: &str| match self.store_for(name).peek(name) {
            Ok(Peeked::Valid(state)) => Some(*state),
            _ => None,
        };
        order
            .iter()
            .filter(|stage| {
                let Some(state) = peek(stage.name()) else {
                    return false;
                };
                if state.format != LEGACY_FORMAT {
                    return false;
                }
                let dependencies: Vec<String> = stage
                    .depends_on()
                    .iter()
                    .map(|dependency| match peek(dependency) {
                        Some(dependency_state) => {
                            let made = match stage.granularity() {
                                Granularity::Whole => items_digest(&dependency_state.items),
                                Granularity::PerVideo => dependency_state
                                    .items
                                    .get(WHOLE)
                                    .map(|record| combined_digest(&record.outputs))
                                    .unwrap_or_default(),
                            };
                            format!("{}:{made}", dependency_state.fingerprint)
                        }
                        None => format!("external:{dependency}"),
                    })
                    .collect();
                let dependencies: Vec<&str> = dependencies.iter().map(String::as_str).collect();
                legacy_fingerprint(**stage, &dependencies) == state.fingerprint
            })
            .map(|stage| stage.name())
            .collect()
    }

    /// The keys of `stage`'s items for `plan`, with nothing running in the same group.
    pub(super) fn item_keys(&self, stage: &dyn AnyStage, plan: Vec<PlannedItem>) -> ItemKeys {
        ItemKeys {
            stage: stage_key(stage),
            inputs: plan
                .into_iter()
                .map(|item| (item.name.clone(), item))
                .collect(),
            upstream: self.upstream_of(stage, &[]),
        }
    }

    /// Where each dependency's part of the keys of `stage`'s items comes from: a per-video stage
    /// reads the same video of a per-video stage before it (live when it runs in the same group),
    /// and its own plan entry of a whole-dataset stage (through its inputs); a whole-dataset stage
    /// reads everything made before it (training reads the frames as well as the lists), so
    /// every stage before it, however far back, counts by what it made.
    fn upstream_of(&self, stage: &dyn AnyStage, group: &[Prepared]) -> Vec<Upstream> {
        if stage.granularity() == Granularity::Whole {
            return self
                .ancestors(&stage.depends_on())
                .iter()
                .map(|name| Upstream::Whole(self.content_of(name)))
                .collect();
        }
        stage
            .depends_on()
            .iter()
            .filter_map(|dependency| {
                if let Some(index) = group
                    .iter()
                    .position(|earlier| earlier.stage.name() == *dependency)
                {
                    return Some(Upstream::InGroup(index));
                }
                let state = match self.store_for(dependency).peek(dependency) {
                    Ok(Peeked::Valid(state)) => state,
                    _ => return Some(Upstream::Whole(format!("external:{dependency}"))),
                };
                match is_whole(&state) {
                    true => None,
                    false => Some(Upstream::Recorded(state)),
                }
            })
            .collect()
    }

    /// For a per-video stage: the content of each whole-dataset stage it reads (see
    /// [`StageState::read`]).
    fn whole_reads(&self, stage: &dyn AnyStage) -> BTreeMap<String, String> {
        if stage.granularity() == Granularity::Whole {
            return BTreeMap::new();
        }
        stage
            .depends_on()
            .iter()
            .filter_map(
                |dependency| match self.store_for(dependency).peek(dependency) {
                    Ok(Peeked::Valid(state)) if is_whole(&state) => {
                        Some((dependency.to_string(), self.content_of(dependency)))
                    }
                    _ => None,
                },
            )
            .collect()
    }

    /// Every stage before `dependencies` and they themselves, by name: through this run's stages
    /// and, beyond them, the stages their state files say they read.
    fn ancestors(&self, dependencies: &[&str]) -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        let mut queue: Vec<String> = dependencies.iter().map(|name| name.to_string()).collect();
        while let Some(name) = queue.pop() {
            if !found.insert(name.clone()) {
                continue;
            }
            match self.stages.iter().find(|stage| stage.name() == name) {
                Some(stage) => queue.extend(stage.depends_on().iter().map(|d| d.to_string())),
                None => {
                    if let Ok(Peeked::Valid(state)) = self.store_for(&name).peek(&name) {
                        queue.extend(state.depends_on);
                    }
                }
            }
        }
        found
    }

    /// What a stage made, as one digest (see [`StageState::content_digest`]).
    fn content_of(&self, name: &str) -> String {
        match self.store_for(name).peek(name) {
            Ok(Peeked::Valid(state)) => format!("{name}:{}", state.content_digest()),
            _ => format!("external:{name}"),
        }
    }

    /// Why the stages before this one that are outside this run (a single-step command's earlier
    /// stages, and theirs in turn) cannot be built on: one failed or was interrupted, what it made
    /// or read has changed since, or what it was made from has (a stage before it ran again).
    fn external_blockers(&self, stage: &dyn AnyStage) -> Vec<Blocker> {
        self.dependency_blockers(&stage.depends_on())
    }

    /// [`Self::external_blockers`] of a command that reads what `dependencies` made without
    /// running in the runner (training).
    pub fn dependency_blockers(&self, dependencies: &[&str]) -> Vec<Blocker> {
        let in_this_run = |name: &str| self.stages.iter().any(|other| other.name() == name);
        let mut queue: Vec<String> = dependencies
            .iter()
            .filter(|dependency| !in_this_run(dependency))
            .map(|dependency| dependency.to_string())
            .collect();
        let mut seen: BTreeSet<String> = queue.iter().cloned().collect();
        let mut blockers = Vec::new();
        while let Some(name) = queue.pop() {
            let Ok(Peeked::Valid(state)) = self.store_for(&name).peek(&name) else {
                continue;
            };
            for earlier in &state.depends_on {
                if !in_this_run(earlier) && seen.insert(earlier.clone()) {
                    queue.push(earlier.clone());
                }
            }
            if let Some(reason) = self.external_reason(&state) {
                blockers.push(Blocker {
                    stage: name,
                    reason,
                });
            }
        }
        blockers
    }

    fn external_reason(&self, state: &StageState) -> Option<String> {
        // A per-video dependency that failed or stopped for some videos still serves the
        // others: those videos fail on their own downstream, the rest go on.
        let whole = state.items.contains_key(WHOLE)
            || state.failures.iter().any(|failure| failure.item == WHOLE);
        match state.status {
            StageStatus::Failed if whole => return Some("failed in its last run".to_string()),
            StageStatus::Running if whole => {
                return Some("did not finish its last run".to_string());
            }
            StageStatus::Failed | StageStatus::Running => {}
            StageStatus::Blocked => {
                return Some("was not run after a stage it depends on failed".to_string());
            }
            StageStatus::Done => {}
        }
        let records: Vec<(&String, &super::state::ItemRecord)> = state.planned_records().collect();
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
            .find(|(dependency, made)| self.content_of(dependency) != **made)
            .map(|(dependency, _)| dependency)
        {
            return Some(format!(
                "is out of date: {dependency} made something else after it ran"
            ));
        }
        let dependencies: Vec<(String, Option<StageState>)> = state
            .depends_on
            .iter()
            .map(|name| match self.store_for(name).peek(name) {
                Ok(Peeked::Valid(dependency)) => (name.clone(), Some(*dependency)),
                _ => (name.clone(), None),
            })
            .collect();
        let whole_upstream: Vec<String> = match is_whole(state) {
            true => {
                let names: Vec<&str> = state.depends_on.iter().map(String::as_str).collect();
                self.ancestors(&names)
                    .iter()
                    .map(|name| self.content_of(name))
                    .collect()
            }
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
    fn serves_the_others(&self, dependency: &str, report: &StageReport) -> bool {
        let per_video = self.stages.iter().any(|stage| {
            stage.name() == dependency && stage.granularity() == Granularity::PerVideo
        });
        let whole_failed = report
            .failures
            .iter()
            .any(|failure| failure.item == super::stage::WHOLE);
        per_video && !whole_failed && report.completed + report.already_done > 0
    }

    /// A done stage that a run could not run is no longer done: what it depends on failed.
    fn mark_blocked(&self, stage: &dyn AnyStage) -> Result<(), PipelineError> {
        if let Ok(super::state::Peeked::Valid(mut state)) =
            self.store_for(stage.name()).peek(stage.name())
            && state.status == StageStatus::Done
        {
            state.status = StageStatus::Blocked;
            self.store_for(&state.stage).save(&state)?;
        }
        Ok(())
    }

    /// Finished items of `planned` whose outputs or inputs are no longer as recorded, with what
    /// changed; the records of the others whose files were only touched are updated in `state`
    /// (whether any was is returned too: the state is then worth saving).
    pub(super) fn changed_items(
        &self,
        state: &mut StageState,
        planned: &[String],
    ) -> (Vec<(String, String)>, bool) {
        let data_dir = self.context.data_dir;
        let compared: Vec<(String, Result<Option<super::state::ItemRecord>, String>)> = planned
            .par_iter()
            .filter_map(|item| {
                let record = state.items.get(item)?;
                Some((item.clone(), record.compare(data_dir, self.scrutiny)))
            })
            .collect();
        let mut changed = Vec::new();
        let mut retimed = false;
        for (item, comparison) in compared {
            match comparison {
                Err(change) => changed.push((item, change)),
                Ok(Some(record)) => {
                    state.items.insert(item, record);
                    retimed = true;
                }
                Ok(None) => {}
            }
        }
        (changed, retimed)
    }

    /// The stage at `index`, plus the per-video stages that directly follow it when it is one.
    fn group_at<'s>(&self, order: &[&'s dyn AnyStage], index: usize) -> Vec<&'s dyn AnyStage> {
        let first = order[index];
        if first.granularity() == Granularity::Whole {
            return vec![first];
        }
        order[index..]
            .iter()
            .take_while(|stage| stage.granularity() == Granularity::PerVideo)
            .copied()
            .collect()
    }

    /// In a sharded run, per-video stages do their shard and whole stages that read per-video output
    /// wait for the combining run; whole stages before any per-video work run on every shard.
    fn is_deferred(&self, stage: &dyn AnyStage, sharded_work: &mut BTreeSet<&str>) -> bool {
        if self.shard.is_none() {
            return false;
        }
        let reads_shard_output = stage
            .depends_on()
            .iter()
            .any(|dependency| sharded_work.contains(dependency));
        match stage.granularity() {
            Granularity::PerVideo => {
                sharded_work.insert(stage.name());
                false
            }
            Granularity::Whole if reads_shard_output => {
                sharded_work.insert(stage.name());
                true
            }
            Granularity::Whole => false,
        }
    }

    /// A stage is blocked when a dependency ran (or was blocked) in this run and is not done, or
    /// when a dependency outside this run is not done or its outputs changed. Dependencies in the
    /// same streaming group have no report yet and do not block.
    fn blockers(&self, stage: &dyn AnyStage, reports: &HashMap<&str, StageReport>) -> Vec<Blocker> {
        let mut blockers: Vec<Blocker> = stage
            .depends_on()
            .iter()
            .filter_map(|dependency| {
                let report = reports.get(dependency)?;
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
                };
                Some(Blocker {
                    stage: dependency.to_string(),
                    reason: reason.to_string(),
                })
            })
            .collect();
        blockers.extend(self.external_blockers(stage));
        blockers
    }

    fn prepare<'s>(
        &self,
        stage: &'s dyn AnyStage,
        group: &[Prepared],
        adopt: bool,
        notes: &mut Vec<String>,
    ) -> Result<Prepared<'s>, ItemError> {
        let key = stage_key(stage);
        let loaded = self
            .store_for(stage.name())
            .load(stage.name())
            .map_err(state_error)?;
        let mut state = match loaded {
            Loaded::Valid(state) if state.fingerprint == key && state.format == STATE_FORMAT => {
                state
            }
            Loaded::Valid(mut state) if adopt => {
                state.fingerprint = key.clone();
                state.format = STATE_FORMAT;
                state
            }
            Loaded::Valid(_) | Loaded::Missing => {
                StageState::new(stage.name(), &key, stage.params())
            }
            Loaded::Corrupt(corrupt) => {
                let note = format!(
                    "{}: {}; moved it to {} and rebuilding the stage",
                    corrupt.path.display(),
                    corrupt.reason,
                    corrupt.moved_to.display()
                );
                notes.push(note);
                StageState::new(stage.name(), &key, stage.params())
            }
        };
        state.depends_on = stage
            .depends_on()
            .iter()
            .map(|name| name.to_string())
            .collect();
        let planned = self.plan(stage)?;
        let plan: Vec<String> = planned.iter().map(|item| item.name.clone()).collect();
        let mut prepared = Prepared {
            stage,
            keys: ItemKeys {
                stage: key,
                inputs: planned
                    .into_iter()
                    .map(|item| (item.name.clone(), item))
                    .collect(),
                upstream: self.upstream_of(stage, group),
            },
            state: Mutex::new(StageState::new(stage.name(), "", serde_json::Value::Null)),
            plan,
            already_done: 0,
            up_to_date: false,
            notes: Vec::new(),
            started: Instant::now(),
            completed: Mutex::new(0),
            skipped: AtomicUsize::new(0),
            adopt,
            made: Mutex::new(BTreeSet::new()),
            begun: AtomicUsize::new(0),
            newly_missing: Mutex::new(Vec::new()),
        };
        if self.shard.is_none() {
            self.merge_shards(&mut state, &prepared.keys, group)?;
        }
        let read = self.whole_reads(stage);
        let read_changed = state.read != read;
        state.read = read;
        let (changed, retimed) = self.changed_items(&mut state, &prepared.plan);
        for (item, _) in &changed {
            state.items.remove(item);
        }
        notes.extend(changed_note(&changed));
        // Items whose dependency runs in this group are judged when their turn comes.
        let waits_on_group = prepared.keys.upstream.iter().any(
            |upstream| matches!(upstream, Upstream::InGroup(index) if !group[*index].up_to_date),
        );
        let (mut done, mut redo) = (0, Vec::new());
        if !waits_on_group {
            if adopt {
                for item in &prepared.plan {
                    let (item_key, upstream) = prepared.keys.of(group, item);
                    adopt_item(&mut state, item, &item_key, &upstream);
                }
                // The earlier format recorded no plan: its items were the plan.
                state.planned = prepared.plan.clone();
            }
            (done, redo) = assess(&prepared.keys, group, &state, &prepared.plan);
        }
        notes.extend(items_note(
            &redo,
            [
                "to redo, its inputs changed",
                "to redo, their inputs changed",
            ],
        ));
        let planned_set: BTreeSet<&String> = prepared.plan.iter().collect();
        let retired: Vec<String> = state
            .items
            .keys()
            .filter(|item| !planned_set.contains(item))
            .cloned()
            .collect();
        notes.extend(items_note(
            &retired,
            [
                "no longer planned keeps what it made, left out of what follows (a plan that names it again reuses it)",
                "no longer planned keep what they made, left out of what follows (a plan that names them again reuses it)",
            ],
        ));
        let up_to_date = !waits_on_group
            && state.status == StageStatus::Done
            && changed.is_empty()
            && done == prepared.plan.len()
            && state.planned == prepared.plan;
        state.status = if up_to_date {
            StageStatus::Done
        } else {
            StageStatus::Running
        };
        state.planned = prepared.plan.clone();
        state.planned_items = prepared.plan.len();
        state.failures.clear();
        if !up_to_date || adopt || read_changed || retimed {
            self.store_for(&state.stage)
                .save(&state)
                .map_err(state_error)?;
        }
        prepared.state = Mutex::new(state);
        prepared.already_done = done;
        prepared.up_to_date = up_to_date;
        prepared.notes = std::mem::take(notes);
        Ok(prepared)
    }

    pub(super) fn plan(&self, stage: &dyn AnyStage) -> Result<Vec<PlannedItem>, ItemError> {
        let plan = stage.plan(&self.context)?;
        Ok(match (stage.granularity(), self.shard) {
            (Granularity::PerVideo, Some(shard)) => plan
                .into_iter()
                .filter(|item| shard.contains(&item.name))
                .collect(),
            _ => plan,
        })
    }

    /// Items that shards of a sharded run completed (or found missing) with the same stage key
    /// count as done, a shard's record preferred where it was made under the item's current key.
    pub(super) fn merge_shards(
        &self,
        state: &mut StageState,
        keys: &ItemKeys,
        group: &[Prepared],
    ) -> Result<(), ItemError> {
        for shard in self.store.load_shards(&state.stage).map_err(state_error)? {
            if shard.fingerprint != state.fingerprint {
                continue;
            }
            for (item, record) in shard.items {
                let current = record.key == keys.of(group, &item).0;
                let ours_current = state
                    .items
                    .get(&item)
                    .is_some_and(|ours| ours.key == record.key);
                if !state.is_resolved(&item) || (current && !ours_current) {
                    state.missing.remove(&item);
                    state.missing_keys.remove(&item);
                    state.items.insert(item, record);
                }
            }
            for (item, reason) in shard.missing {
                if !state.is_resolved(&item) {
                    if let Some(key) = shard.missing_keys.get(&item) {
                        state.missing_keys.insert(item.clone(), key.clone());
                    }
                    state.missing.insert(item, reason);
                }
            }
        }
        Ok(())
    }

    fn execute_group(&self, group: &[Prepared]) {
        let channels: Vec<(Sender<Handoff>, Receiver<Handoff>)> =
            group.iter().map(|_| unbounded()).collect();
        let mut downstream: Vec<Vec<Downstream>> = vec![Vec::new(); group.len()];
        for (position, prepared) in group.iter().enumerate() {
            let sender = channels[position].0.clone();
            let upstream = group[..position]
                .iter()
                .rposition(|earlier| prepared.stage.depends_on().contains(&earlier.stage.name()));
            let upstream_state = match upstream {
                Some(index) => Some(group[index].state.lock().expect("state lock").clone()),
                None => self.recorded_dependency_state(prepared.stage),
            };
            let waits_on = upstream.filter(|&index| !group[index].up_to_date);
            let upstream_plan: BTreeSet<&String> = match waits_on {
                Some(index) => group[index].plan.iter().collect(),
                None => BTreeSet::new(),
            };
            for item in prepared
                .plan
                .iter()
                .filter(|item| !upstream_plan.contains(item))
            {
                let handoff = match upstream_state
                    .as_ref()
                    .and_then(|state| state.missing.get(item))
                {
                    Some(reason) => Handoff::Missing(item.clone(), reason.clone()),
                    None => Handoff::Ready(item.clone()),
                };
                let _ = sender.send(handoff);
            }
            if let Some(index) = waits_on {
                downstream[index].push(Downstream {
                    sender,
                    plan: prepared.plan.iter().cloned().collect(),
                });
            }
        }
        let receivers: Vec<Receiver<Handoff>> =
            channels.into_iter().map(|(_, receiver)| receiver).collect();
        std::thread::scope(|scope| {
            for (position, prepared) in group.iter().enumerate() {
                if prepared.up_to_date {
                    continue;
                }
                self.context.reporter.stage_started(
                    prepared.stage.name(),
                    prepared.plan.len(),
                    prepared.already_done,
                );
                for _ in 0..prepared.stage.concurrency().max(1) {
                    let receiver = receivers[position].clone();
                    let forward = downstream[position].clone();
                    scope.spawn(move || self.worker(group, prepared, receiver, forward));
                }
            }
            // Each channel now has senders only in the workers upstream of it: it closes when they end.
            drop(downstream);
        });
    }

    fn worker(
        &self,
        group: &[Prepared],
        prepared: &Prepared,
        receiver: Receiver<Handoff>,
        forward: Vec<Downstream>,
    ) {
        for handoff in receiver.iter() {
            if self.context.cancelled() {
                break;
            }
            let next = match handoff {
                Handoff::Ready(item) => self.complete(group, prepared, item),
                Handoff::Missing(item, reason) => {
                    let (key, _) = prepared.keys.of(group, &item);
                    let reason = match reason.starts_with("missing upstream: ") {
                        true => reason,
                        false => format!("missing upstream: {reason}"),
                    };
                    let known = {
                        let state = prepared.state.lock().expect("state lock");
                        state.missing_keys.get(&item) == Some(&key)
                    };
                    if known {
                        prepared.skipped.fetch_add(1, Ordering::Relaxed);
                    } else {
                        prepared.begun.fetch_add(1, Ordering::Relaxed);
                        self.record_missing(prepared, &item, &reason, &key);
                    }
                    Some(Handoff::Missing(item, reason))
                }
            };
            let Some(next) = next else { continue };
            for downstream in &forward {
                if downstream.plan.contains(next.item()) {
                    let _ = downstream.sender.send(next.clone());
                }
            }
        }
    }

    /// The state of a per-video dependency that ran before this group (or in another command),
    /// so the videos it found missing are dropped here too.
    fn recorded_dependency_state(&self, stage: &dyn AnyStage) -> Option<StageState> {
        stage.depends_on().iter().find_map(|dependency| {
            match self.store_for(dependency).peek(dependency) {
                Ok(super::state::Peeked::Valid(state)) if !state.missing.is_empty() => Some(*state),
                _ => None,
            }
        })
    }

    /// Runs an item unless it is already resolved under its current key; returns what to hand
    /// to the next stage.
    fn complete(&self, group: &[Prepared], prepared: &Prepared, item: String) -> Option<Handoff> {
        let name = prepared.stage.name();
        let (key, upstream) = prepared.keys.of(group, &item);
        let adoptable = prepared.adopt && !self.remade_upstream(group, prepared, &item);
        let earlier = {
            let mut state = prepared.state.lock().expect("state lock");
            if adoptable {
                adopt_item(&mut state, &item, &key, &upstream);
            }
            let current = match state.items.get(&item) {
                Some(record) => (record.key == key).then(|| Handoff::Ready(item.clone())),
                None => state
                    .missing
                    .get(&item)
                    .filter(|_| state.missing_keys.get(&item) == Some(&key))
                    .map(|reason| Handoff::Missing(item.clone(), reason.clone())),
            };
            if current.is_none() {
                state.items.remove(&item);
                state.missing.remove(&item);
                state.missing_keys.remove(&item);
            }
            current
        };
        if earlier.is_some() {
            prepared.skipped.fetch_add(1, Ordering::Relaxed);
            self.context.reporter.item_finished(name, &item, None);
            return earlier;
        }
        let begun = prepared.begun.fetch_add(1, Ordering::Relaxed) + 1;
        let context = StageContext {
            fingerprint: &key,
            not_started: prepared
                .plan
                .len()
                .saturating_sub(prepared.already_done + begun),
            ..self.context
        };
        let started = Instant::now();
        match prepared.stage.run_item(&context, &item) {
            Ok(mut record) => {
                record.seconds = started.elapsed().as_secs_f64();
                record.key = key;
                record.upstream = upstream;
                prepared
                    .made
                    .lock()
                    .expect("made lock")
                    .insert(item.clone());
                let mut state = prepared.state.lock().expect("state lock");
                state.items.insert(item.clone(), record);
                *prepared.completed.lock().expect("count lock") += 1;
                self.save(&state);
                self.context.reporter.item_finished(name, &item, None);
                Some(Handoff::Ready(item))
            }
            Err(error) if error.kind == FailureKind::Missing => {
                self.context
                    .reporter
                    .item_finished(name, &item, Some(&error.message));
                self.record_missing(prepared, &item, &error.message, &key);
                prepared
                    .newly_missing
                    .lock()
                    .expect("missing lock")
                    .push(ItemFailure {
                        item: item.clone(),
                        kind: error.kind,
                        message: error.message.clone(),
                    });
                Some(Handoff::Missing(item, error.message))
            }
            // Stopped by Ctrl-C: the item is left to redo, as if it had never begun.
            Err(_) if self.context.cancelled() => {
                self.context
                    .reporter
                    .item_finished(name, &item, Some("interrupted"));
                None
            }
            Err(error) => {
                self.context
                    .reporter
                    .item_finished(name, &item, Some(&error.message));
                let mut state = prepared.state.lock().expect("state lock");
                state.failures.push(ItemFailure {
                    item,
                    kind: error.kind,
                    message: error.message,
                });
                self.save(&state);
                None
            }
        }
    }

    /// Whether a stage running in the same group made `item` again in this run.
    fn remade_upstream(&self, group: &[Prepared], prepared: &Prepared, item: &str) -> bool {
        prepared
            .keys
            .upstream
            .iter()
            .any(|upstream| match upstream {
                Upstream::InGroup(index) => {
                    group[*index].made.lock().expect("made lock").contains(item)
                }
                _ => false,
            })
    }

    fn record_missing(&self, prepared: &Prepared, item: &str, reason: &str, key: &str) {
        let mut state = prepared.state.lock().expect("state lock");
        // What it made before is not what follows from now on.
        state.items.remove(item);
        state.missing.insert(item.to_string(), reason.to_string());
        state.missing_keys.insert(item.to_string(), key.to_string());
        self.save(&state);
    }

    fn save(&self, state: &StageState) {
        if let Err(error) = self.store_for(&state.stage).save(state) {
            tracing::error!("{error}");
        }
    }

    fn finish(
        &self,
        group: &[Prepared],
        prepared: &Prepared,
    ) -> Result<StageReport, PipelineError> {
        let name = prepared.stage.name();
        // Resolved under its current key: a record made from what is no longer upstream (an
        // item its dependency failed this time) does not count.
        let current: BTreeSet<String> = {
            let state = prepared.state.lock().expect("state lock");
            let (_, stale) = assess(&prepared.keys, group, &state, &prepared.plan);
            let stale: BTreeSet<&String> = stale.iter().collect();
            prepared
                .plan
                .iter()
                .filter(|item| state.is_resolved(item) && !stale.contains(item))
                .cloned()
                .collect()
        };
        let mut state = prepared.state.lock().expect("state lock");
        let resolved = current.len();
        let mut failures = state.failures.clone();
        let outcome = if prepared.up_to_date {
            StageOutcome::UpToDate
        } else if resolved == prepared.plan.len() {
            StageOutcome::Completed
        } else if self.context.cancelled() {
            StageOutcome::Interrupted
        } else {
            StageOutcome::Failed
        };
        if outcome == StageOutcome::Failed {
            let failed: BTreeSet<String> = failures.iter().map(|f| f.item.clone()).collect();
            let waiting = prepared
                .plan
                .iter()
                .filter(|item| !current.contains(*item) && !failed.contains(*item));
            failures.extend(waiting.map(|item| ItemFailure {
                item: item.clone(),
                kind: FailureKind::Blocked,
                message: "not started: an earlier stage did not complete it".to_string(),
            }));
        }
        if !prepared.up_to_date {
            state.status = match outcome {
                StageOutcome::Completed => StageStatus::Done,
                StageOutcome::Interrupted => StageStatus::Running,
                _ => StageStatus::Failed,
            };
            state.failures = failures.clone();
            state.seconds += prepared.started.elapsed().as_secs_f64();
            self.store_for(&state.stage)
                .save(&state)
                .map_err(PipelineError::State)?;
            self.context.reporter.stage_finished(name);
        }
        Ok(StageReport {
            stage: name.to_string(),
            outcome,
            planned: prepared.plan.len(),
            completed: *prepared.completed.lock().expect("count lock"),
            already_done: match prepared.up_to_date {
                true => prepared.plan.len(),
                false => prepared.skipped.load(Ordering::Relaxed),
            },
            failures,
            newly_missing: prepared.newly_missing.lock().expect("missing lock").clone(),
            missing: state.missing.len(),
            counts: state.total_counts(),
            files: state.total_files(),
            bytes: state.total_bytes(),
            seconds: if prepared.up_to_date {
                0.0
            } else {
                prepared.started.elapsed().as_secs_f64()
            },
            notes: prepared.notes.clone(),
            blocked_by: Vec::new(),
        })
    }
}

/// How many items of `plan` are resolved under their current keys, and those resolved under
/// other keys (to redo).
pub(super) fn assess(
    keys: &ItemKeys,
    group: &[Prepared],
    state: &StageState,
    plan: &[String],
) -> (usize, Vec<String>) {
    let mut done = 0;
    let mut redo = Vec::new();
    for item in plan {
        let (key, _) = keys.of(group, item);
        let current = match state.items.get(item) {
            Some(record) => record.key == key,
            None => state.missing_keys.get(item) == Some(&key),
        };
        if current {
            done += 1;
        } else if state.is_resolved(item) {
            redo.push(item.clone());
        }
    }
    (done, redo)
}

/// A record an earlier version made (no key) that was current by that version's rule takes its
/// key now, as does an item it found missing.
pub(super) fn adopt_item(state: &mut StageState, item: &str, key: &str, upstream: &str) {
    if let Some(record) = state.items.get_mut(item)
        && record.key.is_empty()
    {
        record.key = key.to_string();
        record.upstream = upstream.to_string();
    }
    if state.missing.contains_key(item) && !state.missing_keys.contains_key(item) {
        state.missing_keys.insert(item.to_string(), key.to_string());
    }
}

fn state_error(error: StateError) -> ItemError {
    ItemError::output(error)
}

/// Stages in an order where every stage comes after its dependencies; ties keep the given order.
pub(super) fn topological_order<'s>(
    stages: &[&'s dyn AnyStage],
) -> Result<Vec<&'s dyn AnyStage>, PipelineError> {
    let by_name: BTreeMap<&str, &dyn AnyStage> =
        stages.iter().map(|stage| (stage.name(), *stage)).collect();
    // Dependencies outside the list are inputs produced earlier (see `Runner::fingerprints`).
    let mut placed: BTreeSet<&str> = stages
        .iter()
        .flat_map(|stage| stage.depends_on())
        .filter(|dependency| !by_name.contains_key(dependency))
        .collect();
    let mut order = Vec::new();
    while order.len() < stages.len() {
        let next = stages.iter().find(|stage| {
            !placed.contains(stage.name())
                && stage
                    .depends_on()
                    .iter()
                    .all(|dependency| placed.contains(dependency))
        });
        match next {
            Some(stage) => {
                placed.insert(stage.name());
                order.push(*stage);
            }
            None => {
                let remaining = stages
                    .iter()
                    .filter(|stage| !placed.contains(stage.name()))
                    .map(|stage| stage.name().to_string())
                    .collect();
                return Err(PipelineError::Cycle(remaining));
            }
        }
    }
    Ok(order)
}
