//! What an item's key is made of: the stage's key, the item's planned inputs and what it reads
//! of the stages before it (the same video's record, or everything a whole-dataset stage made).

use std::collections::{BTreeMap, HashMap};

use super::Runner;
use super::prepare::Prepared;
use crate::pipeline::fingerprint::{item_key, stage_key, upstream_digest};
use crate::pipeline::stage::{AnyStage, Granularity, PlannedItem, StageName, WHOLE};
use crate::pipeline::state::StageState;

/// What the keys of a stage's items are made of.
pub(crate) struct ItemKeys {
    /// The stage's key: its name and parameters.
    pub(crate) stage: String,
    pub(crate) inputs: HashMap<String, PlannedItem>,
    pub(crate) upstream: Vec<Upstream>,
}

impl ItemKeys {
    /// An item's key and its upstream part, from what its dependencies hold now (`group`: the
    /// stages running in the same group, for [`Upstream::InGroup`]).
    pub(crate) fn of<Id: StageName>(&self, group: &[Prepared<Id>], item: &str) -> (String, String) {
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
pub(crate) enum Upstream {
    /// A per-video stage running in the same group: the same video's record, once made.
    InGroup(usize),
    /// A per-video stage that ran before: the same video's record, as recorded.
    Recorded(Box<StageState>),
    /// Everything the stage made (for a whole-dataset stage), or a stage without a state.
    Whole(String),
}

/// What a state offers a per-video stage after it for one video.
pub(crate) fn item_identity(state: &StageState, item: &str) -> String {
    match (state.items.get(item), state.missing.get(item)) {
        (Some(record), _) => record.identity(),
        (None, Some(reason)) => format!("missing: {reason}"),
        (None, None) => "none".to_string(),
    }
}

/// A state of a whole-dataset stage: one item, `WHOLE`.
pub(crate) fn is_whole(state: &StageState) -> bool {
    state.planned.iter().map(String::as_str).eq([WHOLE])
        || (state.planned.is_empty() && state.items.keys().map(String::as_str).eq([WHOLE]))
}

/// How many items of `plan` are resolved under their current keys, and those resolved under
/// other keys (to redo).
pub(crate) fn assess<Id: StageName>(
    keys: &ItemKeys,
    group: &[Prepared<Id>],
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

impl<Id: StageName> Runner<'_, Id> {
    /// The keys of `stage`'s items for `plan`, with nothing running in the same group.
    pub(crate) fn item_keys(&self, stage: &dyn AnyStage<Id>, plan: Vec<PlannedItem>) -> ItemKeys {
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
    pub(crate) fn upstream_of(
        &self,
        stage: &dyn AnyStage<Id>,
        group: &[Prepared<Id>],
    ) -> Vec<Upstream> {
        if stage.granularity() == Granularity::Whole {
            return self
                .ancestors(stage.depends_on())
                .into_iter()
                .map(|ancestor| Upstream::Whole(self.content_of(ancestor)))
                .collect();
        }
        stage
            .depends_on()
            .iter()
            .filter_map(|&dependency| {
                if let Some(index) = group
                    .iter()
                    .position(|earlier| earlier.stage.id() == dependency)
                {
                    return Some(Upstream::InGroup(index));
                }
                let Some(state) = self.peek(dependency) else {
                    return Some(Upstream::Whole(external(dependency)));
                };
                match is_whole(&state) {
                    true => None,
                    false => Some(Upstream::Recorded(Box::new(state))),
                }
            })
            .collect()
    }

    /// For a per-video stage: the content of each whole-dataset stage it reads (see
    /// [`StageState::read`]).
    pub(crate) fn whole_reads(&self, stage: &dyn AnyStage<Id>) -> BTreeMap<String, String> {
        if stage.granularity() == Granularity::Whole {
            return BTreeMap::new();
        }
        stage
            .depends_on()
            .iter()
            .filter(|&&dependency| self.peek(dependency).is_some_and(|state| is_whole(&state)))
            .map(|&dependency| (dependency.name().to_string(), self.content_of(dependency)))
            .collect()
    }

    /// What a stage made, as one digest (see [`StageState::content_digest`]).
    pub(crate) fn content_of(&self, stage: Id) -> String {
        match self.peek(stage) {
            Some(state) => format!("{}:{}", stage.name(), state.content_digest()),
            None => external(stage),
        }
    }
}

/// What stands for a stage that has no state (its output was made outside the pipeline).
pub(crate) fn external<Id: StageName>(stage: Id) -> String {
    format!("external:{}", stage.name())
}
