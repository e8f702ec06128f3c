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

use super::fingerprint::fingerprint;
use super::prints::{Scrutiny, combined_digest, first_change, items_digest};
use super::stage::{Granularity, ItemError, Stage, StageContext};
use super::state::{ItemFailure, Loaded, StageState, StageStatus, StateError, StateStore};
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
    pub stages: Vec<&'a dyn Stage>,
    pub store: StateStore,
    pub shard: Option<Shard>,
    pub context: StageContext<'a>,
    /// How recorded outputs are compared with the files: `Contents` re-hashes every byte.
    pub scrutiny: Scrutiny,
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

/// A stage about to run: its state (fresh or resumed) and its plan.
struct Prepared<'s> {
    stage: &'s dyn Stage,
    state: Mutex<StageState>,
    plan: Vec<String>,
    already_done: usize,
    up_to_date: bool,
    notes: Vec<String>,
    started: Instant,
    completed: Mutex<usize>,
    /// Items this run has begun or found missing upstream.
    begun: AtomicUsize,
    newly_missing: Mutex<Vec<ItemFailure>>,
}

impl<'a> Runner<'a> {
    pub fn run(&self) -> Result<RunReport, PipelineError> {
        let order = topological_order(&self.stages)?;
        let mut reports: HashMap<&str, StageReport> = HashMap::new();
        // Stages whose output covers only this shard's videos.
        let mut sharded_work: BTreeSet<&str> = BTreeSet::new();
        let mut index = 0;
        while index < order.len() {
            let group = self.group_at(&order, index);
            index += group.len();
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
                match self.prepare(stage, &self.fingerprint_now(stage), &mut notes) {
                    Ok(stage_prepared) => prepared.push(stage_prepared),
                    Err(error) => {
                        let mut report = StageReport::empty(stage.name(), StageOutcome::Failed);
                        report.notes = notes;
                        report.failures.push(ItemFailure {
                            item: super::stage::WHOLE.to_string(),
                            message: error.message,
                        });
                        reports.insert(stage.name(), report);
                    }
                }
            }
            self.execute_group(&prepared);
            for stage_prepared in &prepared {
                let report = self.finish(stage_prepared)?;
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

    /// The stage's fingerprint from its dependencies as their state files record them now: their
    /// fingerprints and the prints of what they made (so a plan that parse rewrote differently
    /// makes every later stage stale, and a video extracted since makes the lists stale). Computed just before the stage
    /// runs, after its dependencies ran. A dependency without a state file counts as whatever is
    /// on disk, so a single-step command such as `extract` shares state with a full `run`.
    pub(super) fn fingerprint_now(&self, stage: &dyn Stage) -> String {
        let dependencies: Vec<String> = stage
            .depends_on()
            .iter()
            .map(|dependency| match self.store.peek(dependency) {
                Ok(super::state::Peeked::Valid(state)) => {
                    // A per-video stage follows its dependency video by video (an item redone
                    // there is redone here); a whole-dataset stage reads every item.
                    let made = match stage.granularity() {
                        Granularity::Whole => items_digest(&state.items),
                        Granularity::PerVideo => state
                            .items
                            .get(super::stage::WHOLE)
                            .map(|record| combined_digest(&record.outputs))
                            .unwrap_or_default(),
                    };
                    format!("{}:{made}", state.fingerprint)
                }
                _ => format!("external:{dependency}"),
            })
            .collect();
        let dependencies: Vec<&str> = dependencies.iter().map(String::as_str).collect();
        fingerprint(stage, &dependencies)
    }

    /// Why a dependency outside this run (a single-step command's earlier stages) cannot be built
    /// on: it failed or was interrupted, or what it made has changed since.
    fn external_blockers(&self, stage: &dyn Stage) -> Vec<Blocker> {
        let in_this_run = |name: &str| self.stages.iter().any(|other| other.name() == name);
        stage
            .depends_on()
            .iter()
            .filter(|dependency| !in_this_run(dependency))
            .filter_map(|dependency| {
                let Ok(super::state::Peeked::Valid(state)) = self.store.peek(dependency) else {
                    return None;
                };
                // A per-video dependency that failed or stopped for some videos still serves the
                // others: those videos fail on their own downstream, the rest go on.
                let whole = state.items.contains_key(super::stage::WHOLE)
                    || state
                        .failures
                        .iter()
                        .any(|failure| failure.item == super::stage::WHOLE);
                let reason = match state.status {
                    StageStatus::Failed if whole => "failed in its last run".to_string(),
                    StageStatus::Running if whole => "did not finish its last run".to_string(),
                    StageStatus::Failed | StageStatus::Running => return None,
                    StageStatus::Blocked => {
                        "was not run after a stage it depends on failed".to_string()
                    }
                    StageStatus::Done => state
                        .items
                        .values()
                        .find_map(|record| {
                            first_change(&record.outputs, self.context.data_dir, self.scrutiny)
                        })
                        .map(|change| format!("made files that changed since: {change}"))?,
                };
                Some(Blocker {
                    stage: dependency.to_string(),
                    reason,
                })
            })
            .collect()
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
    fn mark_blocked(&self, stage: &dyn Stage) -> Result<(), PipelineError> {
        if let Ok(super::state::Peeked::Valid(mut state)) = self.store.peek(stage.name())
            && state.status == StageStatus::Done
        {
            state.status = StageStatus::Blocked;
            self.store.save(&state)?;
        }
        Ok(())
    }

    /// Finished items whose outputs or inputs are no longer as recorded, with what changed.
    fn changed_items(&self, state: &StageState) -> Vec<(String, String)> {
        let data_dir = self.context.data_dir;
        state
            .items
            .par_iter()
            .filter_map(|(item, record)| {
                Some((item.clone(), record.change(data_dir, self.scrutiny)?))
            })
            .collect()
    }

    /// The stage at `index`, plus the per-video stages that directly follow it when it is one.
    fn group_at<'s>(&self, order: &[&'s dyn Stage], index: usize) -> Vec<&'s dyn Stage> {
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
    fn is_deferred(&self, stage: &dyn Stage, sharded_work: &mut BTreeSet<&str>) -> bool {
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
    fn blockers(&self, stage: &dyn Stage, reports: &HashMap<&str, StageReport>) -> Vec<Blocker> {
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
        stage: &'s dyn Stage,
        fingerprint: &str,
        notes: &mut Vec<String>,
    ) -> Result<Prepared<'s>, ItemError> {
        let loaded = self.store.load(stage.name()).map_err(state_error)?;
        let mut state = match loaded {
            Loaded::Valid(state) if state.fingerprint == fingerprint => state,
            Loaded::Valid(_) | Loaded::Missing => {
                StageState::new(stage.name(), fingerprint, stage.params())
            }
            Loaded::Corrupt(corrupt) => {
                let note = format!(
                    "{}: {}; moved it to {} and rebuilding the stage",
                    corrupt.path.display(),
                    corrupt.reason,
                    corrupt.moved_to.display()
                );
                notes.push(note);
                StageState::new(stage.name(), fingerprint, stage.params())
            }
        };
        if self.shard.is_none() {
            self.merge_shards(&mut state)?;
        }
        let changed = self.changed_items(&state);
        for (item, _) in &changed {
            state.items.remove(item);
        }
        notes.extend(changed_note(&changed));
        let up_to_date = state.status == StageStatus::Done && changed.is_empty();
        let plan = if up_to_date {
            state
                .items
                .keys()
                .chain(state.missing.keys())
                .cloned()
                .collect()
        } else {
            self.plan(stage)?
        };
        let already_done = plan.iter().filter(|item| state.is_resolved(item)).count();
        state.status = if up_to_date {
            StageStatus::Done
        } else {
            StageStatus::Running
        };
        state.planned_items = plan.len();
        state.failures.clear();
        if !up_to_date {
            self.store.save(&state).map_err(state_error)?;
        }
        Ok(Prepared {
            stage,
            state: Mutex::new(state),
            plan,
            already_done,
            up_to_date,
            notes: std::mem::take(notes),
            started: Instant::now(),
            completed: Mutex::new(0),
            begun: AtomicUsize::new(0),
            newly_missing: Mutex::new(Vec::new()),
        })
    }

    fn plan(&self, stage: &dyn Stage) -> Result<Vec<String>, ItemError> {
        let plan = stage.plan(&self.context)?;
        Ok(match (stage.granularity(), self.shard) {
            (Granularity::PerVideo, Some(shard)) => plan
                .into_iter()
                .filter(|item| shard.contains(item))
                .collect(),
            _ => plan,
        })
    }

    /// Items that shards of a sharded run completed with the same fingerprint count as done.
    fn merge_shards(&self, state: &mut StageState) -> Result<(), ItemError> {
        for shard_state in self.store.load_shards(&state.stage).map_err(state_error)? {
            if shard_state.fingerprint == state.fingerprint {
                for (item, record) in shard_state.items {
                    state.items.entry(item).or_insert(record);
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
                    scope.spawn(move || self.worker(prepared, receiver, forward));
                }
            }
            // Each channel now has senders only in the workers upstream of it: it closes when they end.
            drop(downstream);
        });
    }

    fn worker(&self, prepared: &Prepared, receiver: Receiver<Handoff>, forward: Vec<Downstream>) {
        for handoff in receiver.iter() {
            if self.context.cancelled() {
                break;
            }
            let next = match handoff {
                Handoff::Ready(item) => self.complete(prepared, item),
                Handoff::Missing(item, reason) => {
                    prepared.begun.fetch_add(1, Ordering::Relaxed);
                    let reason = format!("missing upstream: {reason}");
                    self.record_missing(prepared, &item, &reason);
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
    fn recorded_dependency_state(&self, stage: &dyn Stage) -> Option<StageState> {
        stage
            .depends_on()
            .iter()
            .find_map(|dependency| match self.store.peek(dependency) {
                Ok(super::state::Peeked::Valid(state)) if !state.missing.is_empty() => Some(state),
                _ => None,
            })
    }

    /// Runs an item unless an earlier run resolved it; returns what to hand to the next stage.
    fn complete(&self, prepared: &Prepared, item: String) -> Option<Handoff> {
        let name = prepared.stage.name();
        let earlier = {
            let state = prepared.state.lock().expect("state lock");
            if state.items.contains_key(&item) {
                Some(Handoff::Ready(item.clone()))
            } else {
                state
                    .missing
                    .get(&item)
                    .map(|reason| Handoff::Missing(item.clone(), reason.clone()))
            }
        };
        if earlier.is_some() {
            self.context.reporter.item_finished(name, &item, None);
            return earlier;
        }
        let fingerprint = prepared
            .state
            .lock()
            .expect("state lock")
            .fingerprint
            .clone();
        let begun = prepared.begun.fetch_add(1, Ordering::Relaxed) + 1;
        let context = StageContext {
            fingerprint: &fingerprint,
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
                let mut state = prepared.state.lock().expect("state lock");
                state.items.insert(item.clone(), record);
                *prepared.completed.lock().expect("count lock") += 1;
                self.save(&state);
                self.context.reporter.item_finished(name, &item, None);
                Some(Handoff::Ready(item))
            }
            Err(error) if error.permanent => {
                self.context
                    .reporter
                    .item_finished(name, &item, Some(&error.message));
                self.record_missing(prepared, &item, &error.message);
                prepared
                    .newly_missing
                    .lock()
                    .expect("missing lock")
                    .push(ItemFailure {
                        item: item.clone(),
                        message: error.message.clone(),
                    });
                Some(Handoff::Missing(item, error.message))
            }
            Err(error) => {
                self.context
                    .reporter
                    .item_finished(name, &item, Some(&error.message));
                let mut state = prepared.state.lock().expect("state lock");
                state.failures.push(ItemFailure {
                    item,
                    message: error.message,
                });
                self.save(&state);
                None
            }
        }
    }

    fn record_missing(&self, prepared: &Prepared, item: &str, reason: &str) {
        let mut state = prepared.state.lock().expect("state lock");
        state.missing.insert(item.to_string(), reason.to_string());
        self.save(&state);
    }

    fn save(&self, state: &StageState) {
        if let Err(error) = self.store.save(state) {
            tracing::error!("{error}");
        }
    }

    fn finish(&self, prepared: &Prepared) -> Result<StageReport, PipelineError> {
        let name = prepared.stage.name();
        let mut state = prepared.state.lock().expect("state lock");
        let resolved = prepared
            .plan
            .iter()
            .filter(|item| state.is_resolved(item))
            .count();
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
                .filter(|item| !state.is_resolved(item) && !failed.contains(*item));
            failures.extend(waiting.map(|item| ItemFailure {
                item: item.clone(),
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
            self.store.save(&state).map_err(PipelineError::State)?;
            self.context.reporter.stage_finished(name);
        }
        Ok(StageReport {
            stage: name.to_string(),
            outcome,
            planned: prepared.plan.len(),
            completed: *prepared.completed.lock().expect("count lock"),
            already_done: prepared.already_done,
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

fn state_error(error: StateError) -> ItemError {
    ItemError::new(error.to_string())
}

/// Stages in an order where every stage comes after its dependencies; ties keep the given order.
pub(super) fn topological_order<'s>(
    stages: &[&'s dyn Stage],
) -> Result<Vec<&'s dyn Stage>, PipelineError> {
    let by_name: BTreeMap<&str, &dyn Stage> =
        stages.iter().map(|stage| (stage.name(), *stage)).collect();
    // Dependencies outside the list are inputs produced earlier (see `Runner::fingerprints`).
    let mut placed: BTreeSet<&str> = stages
        .iter()
        .flat_map(|stage| stage.depends_on().iter().copied())
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
