//! The staged pipeline: pipeline files, the stage graph, and the runner that executes it.
//!
//! A pipeline file (`pipelines/*.toml`) names a dataset manifest, the splits and subset of videos,
//! and each stage's parameters. The runner executes the stages in dependency order and records, per
//! stage, a fingerprint of its inputs and parameters and what it produced, so a re-run skips what is
//! up to date, redoes what changed (and everything downstream), and resumes what was interrupted.

pub mod fingerprint;
pub mod lock;
pub mod made_by;
pub mod prints;
pub mod runner;
pub mod spec;
pub mod stage;
pub mod state;
pub mod status;

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

pub use runner::{Blocker, RunReport, Runner, StageOutcome, StageReport};
pub use spec::PipelineSpec;
pub use stage::{
    AnyStage, Closing, FailureKind, Granularity, ItemError, PlannedItem, Stage, StageContext,
    StageName, WHOLE,
};
pub use state::{ItemRecord, StateStore};

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    State(#[from] state::StateError),
    #[error("the stages {0:?} depend on each other in a cycle")]
    Cycle(Vec<String>),
}

/// One of N disjoint parts of the per-video work, for preparing a dataset on N machines. A video
/// belongs to shard `1 + hash(video) mod N`: stable across runs, machines and list order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based, as schedulers number array tasks from 1 (`--shard 1/4` .. `--shard 4/4`).
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub fn contains(&self, item: &str) -> bool {
        let digest = Sha256::digest(item.as_bytes());
        let value = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        value % u64::from(self.count) == u64::from(self.index - 1)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = || format!("`{text}` is not a shard: expected I/N with 1 <= I <= N, e.g. 2/8");
        let (index, count) = text.split_once('/').ok_or_else(usage)?;
        let index: u32 = index.trim().parse().map_err(|_| usage())?;
        let count: u32 = count.trim().parse().map_err(|_| usage())?;
        if count == 0 || index == 0 || index > count {
            return Err(usage());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_videos() {
        let videos: Vec<String> = (0..500).map(|index| format!("video{index:06}")).collect();
        let count = 4;
        let mut sizes = Vec::new();
        for video in &videos {
            let owners: Vec<u32> = (1..=count)
                .filter(|&index| Shard { index, count }.contains(video))
                .collect();
            assert_eq!(owners.len(), 1, "{video} must be in exactly one shard");
        }
        for index in 1..=count {
            sizes.push(
                videos
                    .iter()
                    .filter(|v| Shard { index, count }.contains(v))
                    .count(),
            );
        }
        assert!(
            sizes.iter().all(|&size| (90..=160).contains(&size)),
            "{sizes:?}"
        );
    }

    #[test]
    fn shard_parsing() {
        assert_eq!("2/8".parse::<Shard>(), Ok(Shard { index: 2, count: 8 }));
        for bad in ["0/4", "5/4", "1/0", "x/2", "3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
