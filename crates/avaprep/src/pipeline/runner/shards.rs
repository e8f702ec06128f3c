//! Where state is kept, and the work of a sharded run: each shard does its videos under its
//! own state files; the run without `--shard` merges them and does the whole-dataset stages.

use std::collections::BTreeSet;

use super::keys::ItemKeys;
use super::prepare::Prepared;
use super::{Runner, state_error};
use crate::pipeline::stage::{AnyStage, Granularity, ItemError, StageName};
use crate::pipeline::state::{Peeked, StageState, StateStore};

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

    /// The stage's state file as it is, when it holds a valid state (a missing or corrupt one
    /// is none: the stage is made again).
    pub(crate) fn peek(&self, stage: Id) -> Option<StageState> {
        match self.store_for(stage).peek(stage.name()) {
            Ok(Peeked::Valid(state)) => Some(*state),
            _ => None,
        }
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
}
