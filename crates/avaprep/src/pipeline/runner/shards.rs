//! Where state is kept, and the work of a sharded run: each shard does its videos under its
//! own state files; the run without `--shard` merges them and does the whole-dataset stages.

use std::collections::BTreeSet;

use super::keys::ItemKeys;
use super::prepare::Prepared;
use super::{Runner, state_error};
use crate::pipeline::Shard;
use crate::pipeline::fingerprint::stage_key;
use crate::pipeline::stage::{AnyStage, Granularity, ItemError, StageName};
use crate::pipeline::state::{ItemRecord, Peeked, ShardState, StageState, StageStatus, StateStore};

impl<Id: StageName> Runner<'_, Id> {
    /// Where a stage's state is kept: a shard's own file for per-video work; the shared file for
    /// a whole-dataset stage, which in a sharded run the shards do in turn (see the lock), so
    /// the first does it and the others find it done.
    pub(crate) fn store_for(&self, stage: Id) -> StateStore {
        let whole = self
            .stage(stage)
            .is_some_and(|stage| stage.granularity() == Granularity::Whole);
        match whole && self.shard.is_some() {
            true => StateStore::new(self.context.data_dir, None),
            false => self.store.clone(),
        }
    }

    /// The stage's state as the next run will find it: its state file, and outside a sharded
    /// run what the shards recorded (see [`Self::with_shard_work`]).
    pub(crate) fn peek(&self, stage: Id) -> Option<StageState> {
        self.with_shard_work(stage, self.peek_own(stage), self.shard_files(stage))
    }

    /// Outside a sharded run, the shards' state files of the stage, newest first (read only).
    pub(crate) fn shard_files(&self, stage: Id) -> Vec<ShardState> {
        match self.shard {
            Some(_) => Vec::new(),
            None => self.store.peek_shards(stage.name()),
        }
    }

    /// The stage's own state file as it is, when it holds a valid state (a missing or corrupt one
    /// is none: the stage is made again).
    pub(crate) fn peek_own(&self, stage: Id) -> Option<StageState> {
        match self.store_for(stage).peek(stage.name()) {
            Ok(Peeked::Valid(state)) => Some(*state),
            _ => None,
        }
    }

    /// `own` with the work of the `shards` (its [`Self::shard_files`]) that ran the stage's current
    /// settings since `own` was written, as the combining run will merge it: their videos made or
    /// missing count, so `status` and a single command after the shards (`extract` alone) find
    /// them done. The current settings are this runner's for a stage it runs, else those of the
    /// newest state file (the stage's own or a shard's). Shard files are only read, never set
    /// aside.
    pub(crate) fn with_shard_work(
        &self,
        stage: Id,
        own: Option<StageState>,
        shards: Vec<ShardState>,
    ) -> Option<StageState> {
        let Some(newest) = shards.first() else {
            return own;
        };
        let own_written = self.store.written(stage.name());
        let key = match (self.stage(stage), &own) {
            (Some(stage), _) => stage_key(stage),
            (None, Some(own)) if own_written >= Some(newest.written) => own.fingerprint.clone(),
            (None, _) => newest.state.fingerprint.clone(),
        };
        let shards: Vec<ShardState> = shards
            .into_iter()
            .filter(|shard| shard.state.fingerprint == key)
            .collect();
        let own_current = own.as_ref().is_some_and(|own| own.fingerprint == key);
        // A run without --shard after the shards merged them: its file is the stage's state (it
        // may since have dropped a shard's record, one whose files changed).
        if shards.is_empty()
            || (own_current
                && shards
                    .iter()
                    .all(|shard| own_written >= Some(shard.written)))
        {
            return own;
        }
        let mut state = match own {
            Some(own) if own_current => own,
            _ => combined_shards(&shards),
        };
        let later = |shard: &ShardState| !own_current || own_written < Some(shard.written);
        let made_later: BTreeSet<String> = shards
            .iter()
            .filter(|shard| later(shard))
            .flat_map(|shard| shard.state.items.keys().chain(shard.state.missing.keys()))
            .cloned()
            .collect();
        // Oldest first: a shard that ran after the stage's file (or a later shard) replaces its
        // record of a video.
        for shard in shards.into_iter().rev() {
            let later = later(&shard);
            take_from_shard(&mut state, shard.state, |_, _, _| later);
        }
        // A failure a shard has since made good is over.
        state
            .failures
            .retain(|failure| !made_later.contains(&failure.item));
        if state.status == StageStatus::Failed && state.failures.is_empty() {
            state.status = StageStatus::Done;
        }
        Some(state)
    }

    /// Outside a sharded run, why a stage that only shards ran (under `state`'s settings) is not
    /// done: some shards have not run, and their videos are not made. None where every shard of
    /// one count ran, or a run without --shard made the stage since (it does the rest itself).
    pub(crate) fn shards_not_run(&self, stage: Id, state: &StageState) -> Option<String> {
        let own_current = self
            .peek_own(stage)
            .is_some_and(|own| own.fingerprint == state.fingerprint);
        if own_current {
            return None;
        }
        let ran: Vec<Shard> = self
            .shard_files(stage)
            .into_iter()
            .filter(|shard| shard.state.fingerprint == state.fingerprint)
            .map(|shard| shard.shard)
            .collect();
        let newest = ran.first()?;
        let all_ran = |count: u32| (1..=count).all(|index| ran.contains(&Shard { index, count }));
        if ran.iter().any(|shard| all_ran(shard.count)) {
            return None;
        }
        let count = newest.count;
        let not_run: Vec<String> = (1..=count)
            .map(|index| Shard { index, count })
            .filter(|shard| !ran.contains(shard))
            .map(|shard| format!("--shard {shard}"))
            .collect();
        let have = match not_run.len() {
            1 => "has",
            _ => "have",
        };
        Some(format!(
            "is not finished: it was prepared in {count} shards, and {} {have} not run yet",
            crate::progress::first_named(&not_run, 3)
        ))
    }

    /// In a sharded run, per-video stages do their shard and whole stages that read per-video output
    /// wait for the combining run; whole stages before any per-video work run on every shard.
    pub(crate) fn is_deferred(
        &self,
        stage: &dyn AnyStage<Id>,
        sharded_work: &mut BTreeSet<Id>,
    ) -> bool {
        if self.shard.is_none() {
            return false;
        }
        let reads_shard_output = stage
            .depends_on()
            .iter()
            .any(|dependency| sharded_work.contains(dependency));
        match stage.granularity() {
            Granularity::PerVideo => {
                sharded_work.insert(stage.id());
                false
            }
            Granularity::Whole if reads_shard_output => {
                sharded_work.insert(stage.id());
                true
            }
            Granularity::Whole => false,
        }
    }

    /// Items that shards of a sharded run completed (or found missing) with the same stage key
    /// count as done, a shard's record preferred where it was made under the item's current key.
    pub(crate) fn merge_shards(
        &self,
        state: &mut StageState,
        keys: &ItemKeys,
        group: &[Prepared<Id>],
    ) -> Result<(), ItemError> {
        let shards = self.store.load_shards(&state.stage).map_err(state_error)?;
        merge_shard_states(state, shards, keys, group);
        Ok(())
    }
}

impl<Id: StageName> Runner<'_, Id> {
    /// In a shard, the videos of its part that were made already under their current keys, by a
    /// run without --shard or by another shard (one of a round with another count): they count
    /// as done, not made again. Their records are checked as any of its own (their files must
    /// be as recorded). The files are only read, never set aside.
    pub(crate) fn take_done_elsewhere(
        &self,
        state: &mut StageState,
        keys: &ItemKeys,
        plan: &[String],
        group: &[Prepared<Id>],
    ) {
        let shared = StateStore::new(self.context.data_dir, None);
        let whole = match shared.peek(&state.stage) {
            Ok(Peeked::Valid(whole)) => Some(*whole),
            _ => None,
        };
        let planned: BTreeSet<&String> = plan.iter().collect();
        let elsewhere: Vec<StageState> = whole
            .into_iter()
            .chain(
                shared
                    .peek_shards(&state.stage)
                    .into_iter()
                    .map(|shard| shard.state),
            )
            .map(|mut other| {
                other.items.retain(|item, _| planned.contains(item));
                other.missing.retain(|item, _| planned.contains(item));
                other
            })
            .collect();
        merge_shard_states(state, elsewhere, keys, group);
    }
}

/// [`Runner::merge_shards`] of states already read.
pub(crate) fn merge_shard_states<Id: StageName>(
    state: &mut StageState,
    shards: Vec<StageState>,
    keys: &ItemKeys,
    group: &[Prepared<Id>],
) {
    for shard in shards {
        if shard.fingerprint != state.fingerprint {
            continue;
        }
        take_from_shard(state, shard, |state, item, record| {
            let current = record.key == keys.of(group, item).0;
            let ours_current = state
                .items
                .get(item)
                .is_some_and(|ours| ours.key == record.key);
            current && !ours_current
        });
    }
}

/// Adds what `shard` resolved to `state`: its items and missing videos that `state` does not
/// resolve, and its records that `prefer` takes over `state`'s.
fn take_from_shard(
    state: &mut StageState,
    shard: StageState,
    prefer: impl Fn(&StageState, &str, &ItemRecord) -> bool,
) {
    for (item, record) in shard.items {
        if !state.is_resolved(&item) || prefer(state, &item, &record) {
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

/// A stage that only shards ran (newest first in `shards`, all of one key), as one state: their
/// plans together, done when each of them is, their failures of videos none of them made.
fn combined_shards(shards: &[ShardState]) -> StageState {
    let newest = &shards[0].state;
    let mut state = StageState::new(&newest.stage, &newest.fingerprint, newest.params.clone());
    state.depends_on = newest.depends_on.clone();
    state.read = newest.read.clone();
    // Shards that have not run yet leave videos unplanned: `status` counts those against the plan.
    state.status = shards
        .iter()
        .map(|shard| shard.state.status)
        .find(|status| *status != StageStatus::Done)
        .unwrap_or(StageStatus::Done);
    let planned: BTreeSet<&String> = shards
        .iter()
        .flat_map(|shard| &shard.state.planned)
        .collect();
    state.planned = planned.into_iter().cloned().collect();
    state.planned_items = state.planned.len();
    state.seconds = shards.iter().map(|shard| shard.state.seconds).sum();
    let resolved = |item: &str| shards.iter().any(|shard| shard.state.is_resolved(item));
    for failure in shards.iter().flat_map(|shard| &shard.state.failures) {
        let known = state.failures.iter().any(|seen| seen.item == failure.item);
        if !known && !resolved(&failure.item) {
            state.failures.push(failure.clone());
        }
    }
    state
}
