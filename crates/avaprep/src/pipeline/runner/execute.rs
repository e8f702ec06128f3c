//! Executing a group of stages: workers per stage, each video handed to the next stage of the
//! group as soon as it is ready (or missing), records saved as items finish.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::Runner;
use super::keys::{Upstream, assess};
use super::legacy::adopt_item;
use super::prepare::Prepared;
use super::report::{StageOutcome, StageReport};
use crate::pipeline::PipelineError;
use crate::pipeline::stage::{AnyStage, FailureKind, StageContext, StageName};
use crate::pipeline::state::{ItemFailure, StageState, StageStatus};

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

impl<Id: StageName> Runner<'_, Id> {
    pub(crate) fn execute_group(&self, group: &[Prepared<Id>]) {
        let channels: Vec<(Sender<Handoff>, Receiver<Handoff>)> =
            group.iter().map(|_| unbounded()).collect();
        let mut downstream: Vec<Vec<Downstream>> = vec![Vec::new(); group.len()];
        for (position, prepared) in group.iter().enumerate() {
            let sender = channels[position].0.clone();
            let upstream = group[..position]
                .iter()
                .rposition(|earlier| prepared.stage.depends_on().contains(&earlier.stage.id()));
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
                    prepared.stage.id().name(),
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
        group: &[Prepared<Id>],
        prepared: &Prepared<Id>,
        receiver: Receiver<Handoff>,
        forward: Vec<Downstream>,
    ) {
        for handoff in receiver.iter() {
            if self.context.cancelled() || prepared.unsaved().is_some() {
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
    fn recorded_dependency_state(&self, stage: &dyn AnyStage<Id>) -> Option<StageState> {
        stage.depends_on().iter().find_map(|&dependency| {
            self.peek(dependency)
                .filter(|state| !state.missing.is_empty())
        })
    }

    /// Runs an item unless it is already resolved under its current key; returns what to hand
    /// to the next stage.
    fn complete(
        &self,
        group: &[Prepared<Id>],
        prepared: &Prepared<Id>,
        item: String,
    ) -> Option<Handoff> {
        let name = prepared.stage.id().name();
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
                self.save(prepared, &state);
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
                self.save(prepared, &state);
                None
            }
        }
    }

    /// Whether a stage running in the same group made `item` again in this run.
    fn remade_upstream(&self, group: &[Prepared<Id>], prepared: &Prepared<Id>, item: &str) -> bool {
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

    fn record_missing(&self, prepared: &Prepared<Id>, item: &str, reason: &str, key: &str) {
        let mut state = prepared.state.lock().expect("state lock");
        // What it made before is not what follows from now on.
        state.items.remove(item);
        state.missing.insert(item.to_string(), reason.to_string());
        state.missing_keys.insert(item.to_string(), key.to_string());
        self.save(prepared, &state);
    }

    /// Saves the stage's state as an item ends. Where it cannot be saved (a full disk, a
    /// folder made read-only), the stage begins no more items: their work would not be
    /// recorded. The stage's last save, in [`Self::finish`], reports the error.
    fn save(&self, prepared: &Prepared<Id>, state: &StageState) {
        if let Err(error) = self.store_for(prepared.stage.id()).save(state) {
            let mut unsaved = prepared.unsaved.lock().expect("unsaved lock");
            if unsaved.is_none() {
                tracing::error!("{error}: beginning no more items of the stage");
                *unsaved = Some(error.to_string());
            }
        }
    }

    pub(crate) fn finish(
        &self,
        group: &[Prepared<Id>],
        prepared: &Prepared<Id>,
    ) -> Result<StageReport<Id>, PipelineError> {
        let id = prepared.stage.id();
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
            // The save's error, with the system's words: a full disk is said as one.
            let why = match prepared.unsaved() {
                Some(error) => {
                    format!("not started: the stage's state could not be saved: {error}")
                }
                None => "not started: an earlier stage did not complete it".to_string(),
            };
            failures.extend(waiting.map(|item| ItemFailure {
                item: item.clone(),
                kind: FailureKind::Blocked,
                message: why.clone(),
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
            self.store_for(id)
                .save(&state)
                .map_err(PipelineError::State)?;
            self.context.reporter.stage_finished(id.name());
        }
        Ok(StageReport {
            stage: id,
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
