//! State files an earlier version wrote (format 1, without item keys): a stage that was up to
//! date by that version's rule is adopted under its current keys instead of redone.

use std::collections::BTreeSet;

use super::Runner;
use super::keys::external;
use crate::pipeline::fingerprint::legacy_fingerprint;
use crate::pipeline::prints::{combined_digest, items_digest};
use crate::pipeline::stage::{AnyStage, Granularity, StageName, WHOLE};
use crate::pipeline::state::{LEGACY_FORMAT, StageState};

/// A record an earlier version made (no key) that was current by that version's rule takes its
/// key now, as does an item it found missing.
pub(crate) fn adopt_item(state: &mut StageState, item: &str, key: &str, upstream: &str) {
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

impl<Id: StageName> Runner<'_, Id> {
    /// Stages whose state an earlier version wrote (format 1) and that were up to date by that
    /// version's rule: their items are adopted under their current keys instead of redone.
    /// Computed from the state files as they are before anything runs.
    pub(crate) fn legacy_current(&self, order: &[&dyn AnyStage<Id>]) -> BTreeSet<Id> {
        order
            .iter()
            .filter(|stage| {
                let Some(state) = self.peek(stage.id()) else {
                    return false;
                };
                if state.format != LEGACY_FORMAT {
                    return false;
                }
                let dependencies: Vec<String> = stage
                    .depends_on()
                    .iter()
                    .map(|&dependency| match self.peek(dependency) {
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
                        None => external(dependency),
                    })
                    .collect();
                let dependencies: Vec<&str> = dependencies.iter().map(String::as_str).collect();
                legacy_fingerprint(**stage, &dependencies) == state.fingerprint
            })
            .map(|stage| stage.id())
            .collect()
    }
}
