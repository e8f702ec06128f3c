//! Before a stage runs: its state loaded (or set aside when corrupt), its plan, its items'
//! keys, and which items are done, changed or to redo.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use rayon::prelude::*;

use super::keys::{ItemKeys, Upstream, assess};
use super::legacy::adopt_item;
use super::{Runner, state_error};
use crate::pipeline::fingerprint::stage_key;
use crate::pipeline::stage::{AnyStage, Granularity, ItemError, PlannedItem, StageName, WHOLE};
use crate::pipeline::state::{
    ItemFailure, ItemRecord, Loaded, STATE_FORMAT, StageState, StageStatus,
};

/// A stage about to run: its state (fresh or resumed), its plan and where what its items read of
/// the stages before it comes from.
pub(crate) struct Prepared<'s, Id: StageName> {
    pub(crate) stage: &'s dyn AnyStage<Id>,
    pub(crate) keys: ItemKeys,
    pub(crate) state: Mutex<StageState>,
    pub(crate) plan: Vec<String>,
    /// Items already done with their current keys, as far as known before the run.
    pub(crate) already_done: usize,
    pub(crate) up_to_date: bool,
    pub(crate) notes: Vec<String>,
    pub(crate) started: Instant,
    pub(crate) completed: Mutex<usize>,
    /// Items found done with their current keys when their turn came.
    pub(crate) skipped: AtomicUsize,
    /// An earlier version's state, adopted: a record without a key takes its current one
    /// unless what it reads was made again in this run.
    pub(crate) adopt: bool,
    /// Items this run made.
    pub(crate) made: Mutex<BTreeSet<String>>,
    /// Items this run has begun or found missing upstream.
    pub(crate) begun: AtomicUsize,
    pub(crate) newly_missing: Mutex<Vec<ItemFailure>>,
    /// Why the state could not be saved (a full disk), the first time: no item is begun after
    /// it, as what it made could not be recorded.
    pub(crate) unsaved: Mutex<Option<String>>,
}

impl<Id: StageName> Prepared<'_, Id> {
    /// Why the stage's state could not be saved, once it could not.
    pub(crate) fn unsaved(&self) -> Option<String> {
        self.unsaved.lock().expect("unsaved lock").clone()
    }
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

/// "its settings changed since its last run (height 120 -> 160): all of it is made again",
/// naming a few of the settings that changed. None where none did (a record of another format).
fn settings_note(earlier: &serde_json::Value, now: &serde_json::Value) -> Option<String> {
    const NAMED: usize = 3;
    let (mut earlier_values, mut now_values) = (Vec::new(), Vec::new());
    flatten("", earlier, &mut earlier_values);
    flatten("", now, &mut now_values);
    let earlier_values: std::collections::BTreeMap<_, _> = earlier_values.into_iter().collect();
    let now_values: std::collections::BTreeMap<_, _> = now_values.into_iter().collect();
    let keys: BTreeSet<&String> = earlier_values.keys().chain(now_values.keys()).collect();
    let unset = "(unset)".to_string();
    let changes: Vec<String> = keys
        .into_iter()
        .filter(|key| earlier_values.get(*key) != now_values.get(*key))
        .map(|key| {
            let value = |values: &std::collections::BTreeMap<String, String>| {
                shortened(values.get(key).unwrap_or(&unset))
            };
            format!("{key} {} -> {}", value(&earlier_values), value(&now_values))
        })
        .collect();
    if changes.is_empty() {
        return None;
    }
    Some(format!(
        "its settings changed since its last run ({}): all of it is made again",
        crate::progress::first_named(&changes, NAMED)
    ))
}

/// A value short enough for a line (a list of exports may be long).
fn shortened(value: &str) -> String {
    const SHOWN: usize = 60;
    match value.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}...", &value[..end]),
        None => value.to_string(),
    }
}

/// Every leaf of `value` as (dotted key, value as written: strings bare, lists as JSON).
fn flatten(prefix: &str, value: &serde_json::Value, leaves: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(fields) => {
            for (key, field) in fields {
                let dotted = match prefix {
                    "" => key.clone(),
                    _ => format!("{prefix}.{key}"),
                };
                flatten(&dotted, field, leaves);
            }
        }
        serde_json::Value::String(text) => leaves.push((prefix.to_string(), text.clone())),
        other => leaves.push((prefix.to_string(), other.to_string())),
    }
}

/// "4 items to redo, their inputs changed: video1, video2, video3 and 1 more" (`what` has the
/// singular and the plural).
fn items_note(items: &[String], what: [&str; 2]) -> Option<String> {
    const NAMED: usize = 3;
    if items.is_empty() {
        return None;
    }
    // A whole-dataset stage's one item is the stage: "1 item ...: all" says nothing more.
    if items
        .iter()
        .map(String::as_str)
        .eq([super::super::stage::WHOLE])
    {
        return Some(what[0].to_string());
    }
    let named = crate::progress::first_named(items, NAMED);
    let (noun, what) = match items.len() {
        1 => ("item", what[0]),
        _ => ("items", what[1]),
    };
    Some(format!("{} {noun} {what}: {named}", items.len()))
}

impl<Id: StageName> Runner<'_, Id> {
    /// A stage that could not even plan its work (an export it reads is gone) failed this run:
    /// recorded so, `status` and the commands after it say it failed, not "pending" (nothing
    /// recorded) or "done" (an earlier run's). What its items made stays recorded. A note where
    /// the record could not be written.
    fn record_unplanned(&self, id: Id, mut state: StageState, error: &ItemError) -> Option<String> {
        state.status = StageStatus::Failed;
        state.failures = vec![ItemFailure {
            item: WHOLE.to_string(),
            kind: error.kind,
            message: error.message.clone(),
        }];
        let saved = self.store_for(id).save(&state);
        saved
            .err()
            .map(|problem| format!("{}: the failure is not recorded: {problem}", id.name()))
    }

    pub(crate) fn prepare<'s>(
        &self,
        stage: &'s dyn AnyStage<Id>,
        group: &[Prepared<Id>],
        adopt: bool,
        notes: &mut Vec<String>,
    ) -> Result<Prepared<'s, Id>, ItemError> {
        let key = stage_key(stage);
        let name = stage.id().name();
        let loaded = self.store_for(stage.id()).load(name).map_err(state_error)?;
        let mut state = match loaded {
            Loaded::Valid(state) if state.fingerprint == key && state.format == STATE_FORMAT => {
                state
            }
            Loaded::Valid(mut state) if adopt => {
                state.fingerprint = key.clone();
                state.format = STATE_FORMAT;
                state
            }
            Loaded::Valid(earlier) => {
                notes.extend(settings_note(&earlier.params, &stage.params()));
                StageState::new(name, &key, stage.params())
            }
            Loaded::Missing => StageState::new(name, &key, stage.params()),
            Loaded::Corrupt(corrupt) => {
                let note = format!(
                    "{}: {}; moved it to {} and rebuilding the stage",
                    corrupt.path.display(),
                    corrupt.reason,
                    corrupt.moved_to.display()
                );
                notes.push(note);
                StageState::new(name, &key, stage.params())
            }
        };
        state.depends_on = stage
            .depends_on()
            .iter()
            .map(|dependency| dependency.name().to_string())
            .collect();
        let planned = match self.plan(stage) {
            Ok(planned) => planned,
            Err(error) => {
                notes.extend(self.record_unplanned(stage.id(), state, &error));
                return Err(error);
            }
        };
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
            state: Mutex::new(StageState::new(name, "", serde_json::Value::Null)),
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
            unsaved: Mutex::new(None),
        };
        match self.shard {
            None => self.merge_shards(&mut state, &prepared.keys, group)?,
            Some(_) if stage.granularity() == Granularity::PerVideo => {
                self.take_done_elsewhere(&mut state, &prepared.keys, &prepared.plan, group);
            }
            Some(_) => {}
        }
        let read = self.whole_reads(stage);
        let read_changed = state.read != read;
        state.read = read;
        let (changed, retimed) = self.changed_items(&mut state, &prepared.plan);
        for (item, _) in &changed {
            state.items.remove(item);
        }
        notes.extend(changed_note(&changed));
        if !changed.is_empty() {
            notes.extend(stage.edits_belong(self.context.data_dir));
        }
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
            self.store_for(stage.id())
                .save(&state)
                .map_err(state_error)?;
        }
        prepared.state = Mutex::new(state);
        prepared.already_done = done;
        prepared.up_to_date = up_to_date;
        prepared.notes = std::mem::take(notes);
        Ok(prepared)
    }

    pub(crate) fn plan(&self, stage: &dyn AnyStage<Id>) -> Result<Vec<PlannedItem>, ItemError> {
        let plan = stage.plan(&self.context)?;
        Ok(match (stage.granularity(), self.shard) {
            (Granularity::PerVideo, Some(shard)) => plan
                .into_iter()
                .filter(|item| shard.contains(&item.name))
                .collect(),
            _ => plan,
        })
    }

    /// Finished items of `planned` whose outputs or inputs are no longer as recorded, with what
    /// changed; the records of the others whose files were only touched are updated in `state`
    /// (whether any was is returned too: the state is then worth saving).
    pub(crate) fn changed_items(
        &self,
        state: &mut StageState,
        planned: &[String],
    ) -> (Vec<(String, String)>, bool) {
        let data_dir = self.context.data_dir;
        let compared: Vec<(String, Result<Option<ItemRecord>, String>)> = planned
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
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::settings_note;

    #[test]
    fn a_settings_note_names_what_changed_from_what_to_what() {
        let earlier =
            json!({"version": 2, "height": 120, "ranges": "annotated", "clip": {"fps": 5.0}});
        let now = json!({"version": 2, "height": 160, "ranges": "segment", "clip": {"fps": 5.0}, "upscale": true});
        assert_eq!(
            settings_note(&earlier, &now).as_deref(),
            Some(
                "its settings changed since its last run (height 120 -> 160, ranges annotated -> segment, upscale (unset) -> true): all of it is made again"
            )
        );
        assert_eq!(settings_note(&now, &now), None);
        let long = json!({"exports": ["a".repeat(100)]});
        let note = settings_note(&json!({}), &long).unwrap();
        assert!(
            note.contains(&format!("exports (unset) -> [\"{}...", "a".repeat(58))),
            "{note}"
        );
    }
}
