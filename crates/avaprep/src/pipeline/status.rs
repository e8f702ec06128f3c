//! `avaprep status`: where each stage stands, read from the state files without changing them.

use std::collections::BTreeSet;

use serde::Serialize;

use super::PipelineError;
use super::fingerprint::stage_key;
use super::lock::{Holder, holders_now};
use super::runner::{Runner, adopt_item, assess, merge_shard_states, topological_order};
use super::stage::{AnyStage, FailureKind, StageName, serialize_name};
use super::state::{ItemFailure, Peeked, STATE_FORMAT, ShardState, StageState, StageStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StageCondition {
    /// Done with the current fingerprint.
    Done,
    /// Ran with other parameters or inputs: the next run redoes it.
    Stale,
    /// Never ran (or its state was set aside as corrupt).
    Pending,
    /// Finished with failed items.
    Failed,
    /// Being run now by another command, which holds the data directory.
    Running,
    /// Started and not finished, by a command that no longer runs: the next run resumes it.
    Interrupted,
    /// The state file exists but cannot be trusted; the next run rebuilds the stage.
    Corrupt,
}

#[derive(Debug, Clone, Serialize)]
#[serde(bound(serialize = ""))]
pub struct StageStatusLine<Id: StageName> {
    #[serde(serialize_with = "serialize_name")]
    pub stage: Id,
    pub condition: StageCondition,
    pub items_done: usize,
    pub items_planned: usize,
    pub failed: usize,
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub detail: Option<String>,
    /// The items that failed in the stage's last run.
    #[serde(skip)]
    pub failures: Vec<ItemFailure>,
    /// Failed as the next run will fail it again unless something is changed (see
    /// [`settled`]): a stage after it stands as its own record says.
    #[serde(skip)]
    pub settled: bool,
}

impl<Id: StageName> Runner<'_, Id> {
    /// Each stage as the next `run` would find it: the same keys, plans and checks of what
    /// items made, so `status`, `run` and single commands agree.
    pub fn status(&self) -> Result<Vec<StageStatusLine<Id>>, PipelineError> {
        let order = topological_order(&self.stages)?;
        let legacy = self.legacy_current(&order);
        let holders = holders_now(self.context.data_dir);
        let mut lines: Vec<StageStatusLine<Id>> = Vec::new();
        for stage in &order {
            let adopt = legacy.contains(&stage.id());
            let mut line = self.status_line(*stage, adopt, &holders, &lines)?;
            line.settled = settled(*stage, &line, &lines);
            lines.push(line);
        }
        Ok(lines)
    }

    fn status_line(
        &self,
        stage: &dyn AnyStage<Id>,
        adopt: bool,
        holders: &[Holder],
        earlier: &[StageStatusLine<Id>],
    ) -> Result<StageStatusLine<Id>, PipelineError> {
        let mut line = StageStatusLine {
            stage: stage.id(),
            condition: StageCondition::Pending,
            items_done: 0,
            items_planned: 0,
            failed: 0,
            files: 0,
            bytes: 0,
            seconds: 0.0,
            detail: None,
            failures: Vec::new(),
            settled: false,
        };
        let own = match self.store_for(stage.id()).peek(stage.id().name())? {
            Peeked::Missing => None,
            Peeked::Corrupt(reason) => {
                line.condition = StageCondition::Corrupt;
                line.detail = Some(reason);
                return Ok(line);
            }
            Peeked::Valid(state) => Some(*state),
        };
        // After a sharded run, before the combining run, the shards' files hold the work.
        let shards = self.shard_files(stage.id());
        let running = self.running_now(stage.id(), own.as_ref(), &shards, holders);
        let Some(mut state) = self.with_shard_work(stage.id(), own, shards.clone()) else {
            return Ok(line);
        };
        line.items_planned = state.planned_items;
        line.items_done = state.planned_records().count();
        line.failed = state.failures.len();
        line.failures = state.failures.clone();
        line.files = state.total_files();
        line.bytes = state.total_bytes();
        line.seconds = state.seconds;
        line.detail =
            state
                .failures
                .first()
                .map(|failure| match failure.item == super::stage::WHOLE {
                    true => failure.message.clone(),
                    false => format!("{}: {}", failure.item, failure.message),
                });
        if !running.is_empty() {
            line.condition = StageCondition::Running;
            line.detail = Some(running_detail(&line, &running));
            return Ok(line);
        }
        let stale = |line: &mut StageStatusLine<Id>, detail: String| {
            line.condition = StageCondition::Stale;
            line.detail = Some(detail);
        };
        let current_format = state.fingerprint == stage_key(stage) && state.format == STATE_FORMAT;
        if !current_format && !adopt {
            line.items_done = 0;
            stale(
                &mut line,
                "its parameters changed since it ran: every item is redone".into(),
            );
            return Ok(line);
        }
        // A stage that failed as it will fail again changes nothing downstream: what comes
        // after is assessed on its own, as the next run goes on past the failed items.
        let waiting: Vec<&str> = stage
            .depends_on()
            .iter()
            .filter(|&&dependency| {
                earlier.iter().any(|line| {
                    line.stage == dependency
                        && line.condition != StageCondition::Done
                        && !line.settled
                })
            })
            .map(|dependency| dependency.name())
            .collect();
        if !waiting.is_empty() {
            stale(
                &mut line,
                format!(
                    "after {}: the next run does that first, then what it changes here",
                    waiting.join(", ")
                ),
            );
            return Ok(line);
        }
        let planned = match self.plan(stage) {
            Ok(planned) => planned,
            Err(error) if state.status == StageStatus::Failed => {
                // As when its last run failed to plan: the next one fails the same way.
                line.condition = StageCondition::Failed;
                line.detail = Some(error.message);
                return Ok(line);
            }
            Err(error) => {
                stale(&mut line, error.message);
                return Ok(line);
            }
        };
        let plan: Vec<String> = planned.iter().map(|item| item.name.clone()).collect();
        let keys = self.item_keys(stage, planned);
        // As the next run will: what the shards made counts.
        let shards = shards.into_iter().map(|shard| shard.state).collect();
        merge_shard_states::<Id>(&mut state, shards, &keys, &[]);
        if adopt {
            for item in &plan {
                let (key, upstream) = keys.of::<Id>(&[], item);
                adopt_item(&mut state, item, &key, &upstream);
            }
            state.planned = plan.clone();
        }
        let (changed, _) = self.changed_items(&mut state, &plan);
        for (item, _) in &changed {
            state.items.remove(item);
        }
        let (done, redo) = assess::<Id>(&keys, &[], &state, &plan);
        // An item waiting on a video an earlier stage failed as it will fail again is not
        // started by the next run either.
        let waits_on_settled_failure = |item: &String| {
            let blocked = state
                .failures
                .iter()
                .any(|failure| &failure.item == item && failure.kind == FailureKind::Blocked);
            blocked
                && earlier.iter().any(|line| {
                    stage.depends_on().contains(&line.stage)
                        && line.settled
                        && line.failures.iter().any(|failure| &failure.item == item)
                })
        };
        let redo: Vec<String> = redo
            .into_iter()
            .filter(|item| !waits_on_settled_failure(item))
            .collect();
        line.items_planned = plan.len();
        line.items_done = done;
        if let Some((item, change)) = changed.first() {
            stale(
                &mut line,
                match changed.len() {
                    1 => format!("changed since made: {item}: {change}"),
                    n => format!("{n} items changed since made, first {item}: {change}"),
                },
            );
        } else if let Some(item) = redo.first() {
            let detail = match item == super::stage::WHOLE {
                true => "its inputs changed since it ran".to_string(),
                false => format!(
                    "{} of {} items to redo, their inputs changed (first {item})",
                    redo.len(),
                    plan.len()
                ),
            };
            stale(&mut line, detail);
        } else if done < plan.len() && state.status == StageStatus::Failed {
            // Its inputs are as they were when it failed: the next run fails the same way
            // unless something changes (`detail` holds the first failure).
            line.condition = StageCondition::Failed;
        } else if done < plan.len() && state.status == StageStatus::Running {
            line.condition = StageCondition::Interrupted;
            line.detail = Some(format!(
                "{} of {} items not made yet: stopped, and the next run resumes it",
                plan.len() - done,
                plan.len()
            ));
        } else if done < plan.len() || !same_items(&state.planned, &plan) {
            let new = plan.len() - done;
            stale(
                &mut line,
                format!("{new} of {} items not made yet", plan.len()),
            );
        } else {
            line.condition = match state.status {
                StageStatus::Done => StageCondition::Done,
                StageStatus::Failed => StageCondition::Failed,
                StageStatus::Running => StageCondition::Interrupted,
                StageStatus::Blocked => StageCondition::Stale,
            };
            if line.condition == StageCondition::Done {
                line.detail = missing_detail(&state, &plan);
            }
        }
        Ok(line)
    }

    /// The commands running a stage now: those holding the data directory that took it before
    /// the stage's state was written as started. A state that a stopped command left started is
    /// older than every lock held now.
    fn running_now<'h>(
        &self,
        stage: Id,
        own: Option<&StageState>,
        shards: &[ShardState],
        holders: &'h [Holder],
    ) -> Vec<&'h Holder> {
        let own_started = own
            .filter(|own| own.status == StageStatus::Running)
            .and_then(|_| self.store_for(stage).written(stage.name()));
        let shards_started = shards
            .iter()
            .filter(|shard| shard.state.status == StageStatus::Running)
            .map(|shard| shard.written);
        let Some(started) = own_started.into_iter().chain(shards_started).max() else {
            return Vec::new();
        };
        holders
            .iter()
            .filter(|holder| holder.since <= started)
            .collect()
    }
}

/// Whether `line` (of `stage`) failed as the next run will fail it again: each failure a video
/// that does not read or a setting that cannot work, or an item waiting on an earlier stage that
/// is itself settled so; never a whole-stage failure (the next run blocks what follows), a
/// download (retried) or a write. Some of its items are made, so what follows runs on them.
fn settled<Id: StageName>(
    stage: &dyn AnyStage<Id>,
    line: &StageStatusLine<Id>,
    earlier: &[StageStatusLine<Id>],
) -> bool {
    let dependencies_settled = || {
        stage.depends_on().iter().all(|dependency| {
            earlier.iter().any(|line| {
                line.stage == *dependency
                    && (line.condition == StageCondition::Done || line.settled)
            })
        })
    };
    line.condition == StageCondition::Failed
        && line.items_done > 0
        && line.failures.iter().all(|failure| {
            failure.item != super::stage::WHOLE
                && match failure.kind {
                    FailureKind::Input | FailureKind::Usage => true,
                    FailureKind::Blocked => dependencies_settled(),
                    _ => false,
                }
        })
}

fn running_detail<Id: StageName>(line: &StageStatusLine<Id>, running: &[&Holder]) -> String {
    let mut notes: Vec<&str> = running.iter().map(|holder| holder.note.as_str()).collect();
    notes.sort();
    let mut detail = format!(
        "{} of {} items made so far, by {}",
        line.items_done,
        line.items_planned,
        notes.join(" and ")
    );
    if running.iter().any(|holder| holder.elsewhere) {
        detail.push_str(
            "; whether it still runs on that machine cannot be seen from here: if it was stopped, the next run resumes the stage",
        );
    }
    detail
}

/// Whether two plans name the same items (shards' plans together come in another order).
fn same_items(recorded: &[String], plan: &[String]) -> bool {
    let recorded: BTreeSet<&String> = recorded.iter().collect();
    recorded.len() == plan.len() && plan.iter().all(|item| recorded.contains(item))
}

/// A done stage's items that are missing (a video the server or the folder lacks): counted as
/// done, as every stage after drops them, but named, as `run` names them.
fn missing_detail(state: &StageState, plan: &[String]) -> Option<String> {
    let missing: Vec<&String> = plan
        .iter()
        .filter_map(|item| state.missing.get(item))
        .collect();
    let reason = missing.first()?;
    Some(match missing.len() {
        1 => format!("1 missing: {reason}"),
        n => format!("{n} missing, first: {reason}"),
    })
}
