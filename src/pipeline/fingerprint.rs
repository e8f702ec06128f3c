//! A stage's fingerprint: a digest of everything its output depends on.

use sha2::{Digest, Sha256};

use super::stage::Stage;

/// Digest of the stage's name, its parameters and its dependencies' fingerprints (in dependency
/// order), so a change anywhere upstream changes every fingerprint downstream of it.
pub fn fingerprint(stage: &dyn Stage, dependency_fingerprints: &[&str]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(stage.name().as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::to_vec(&stage.params()).expect("params serialise"));
    for dependency in dependency_fingerprints {
        hasher.update([0]);
        hasher.update(dependency.as_bytes());
    }
    hex::encode(hasher.finalize())
}
