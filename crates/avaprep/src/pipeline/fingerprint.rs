//! Keys: a stage's, from its name and parameters, and an item's, from the stage's key, the
//! item's own inputs and what it read of the stages before it.

use sha2::{Digest, Sha256};

use super::stage::{AnyStage, PlannedItem, StageName};

/// Digest of the stage's name and parameters: a change redoes every item of the stage (and,
/// through what they make, whatever reads them).
pub fn stage_key<Id: StageName>(stage: &dyn AnyStage<Id>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(stage.id().name().as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::to_vec(&stage.params()).expect("params serialise"));
    hex::encode(hasher.finalize())
}

/// Digest of what an item read of the stages before it, one identity per dependency.
pub fn upstream_digest(identities: &[String]) -> String {
    let mut hasher = Sha256::new();
    for identity in identities {
        hasher.update(identity.as_bytes());
        hasher.update([0]);
    }
    hex::encode(hasher.finalize())
}

/// Digest of the stage's key, the item's name and inputs, and its upstream digest.
pub fn item_key(stage_key: &str, item: &PlannedItem, upstream: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(stage_key.as_bytes());
    hasher.update([0]);
    hasher.update(item.name.as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::to_vec(&item.inputs).expect("inputs serialise"));
    hasher.update([0]);
    hasher.update(upstream.as_bytes());
    hex::encode(hasher.finalize())
}

/// The fingerprint earlier versions recorded (name, parameters and the dependencies' recorded
/// fingerprints and outputs), so their state files are adopted rather than redone.
pub fn legacy_fingerprint<Id: StageName>(
    stage: &dyn AnyStage<Id>,
    dependency_fingerprints: &[&str],
) -> String {
    let mut hasher = Sha256::new();
    hasher.update(stage.id().name().as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::to_vec(&stage.params()).expect("params serialise"));
    for dependency in dependency_fingerprints {
        hasher.update([0]);
        hasher.update(dependency.as_bytes());
    }
    hex::encode(hasher.finalize())
}
