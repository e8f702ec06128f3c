//! Per-stage state files: what a stage last ran with (its fingerprint) and what it produced.
//!
//! A state file is rewritten atomically after every item, so a crash at any moment leaves either the
//! previous or the next state. Each file carries a checksum of its own content: a file that was
//! truncated or edited by hand is never trusted; it is moved aside and the stage is rebuilt.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::prints::{Comparison, FilePrint, Scrutiny};
use super::stage::FailureKind;
use crate::fsutil;

/// Format 2 records each item's key; format 1 files are read and adopted (see the runner).
pub(super) const STATE_FORMAT: u32 = 2;
pub(super) const LEGACY_FORMAT: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageStatus {
    /// Started and not finished: interrupted, or still running in another process.
    Running,
    /// Every planned item completed.
    Done,
    /// Finished with at least one item that failed or could not start.
    Failed,
    /// Was done, then a run could not run it because a stage it depends on failed: its outputs
    /// may no longer match its inputs, so nothing downstream builds on it until it runs again.
    Blocked,
}

/// What one completed item produced. Item records survive a parameter-preserving re-run, which is
/// how an interrupted stage resumes at per-video granularity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ItemRecord {
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Stage-specific counts (frames decoded, rows written, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    /// What the item made, as it was then: a later run that finds it changed redoes the item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<FilePrint>,
    /// What the item read besides its dependencies' outputs (annotation files), likewise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<FilePrint>,
    /// The item's key when it was made: the stage's parameters, the item's own inputs and what
    /// it read of the stages before it. A plan that gives the item another key redoes it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// The part of `key` that came from the stages before it, so a command that does not run
    /// this stage can still tell whether what it was made from has changed since.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub upstream: String,
}

impl ItemRecord {
    /// The record with prints of the files (or folders) it made and read, paths relative to the
    /// data directory.
    pub fn with_files(
        mut self,
        data_dir: &Path,
        outputs: &[&str],
        inputs: &[&str],
    ) -> std::io::Result<Self> {
        let print = |paths: &[&str]| -> std::io::Result<Vec<FilePrint>> {
            paths
                .iter()
                .map(|path| FilePrint::take_with_content(data_dir, path))
                .collect()
        };
        self.outputs = print(outputs)?;
        self.inputs = print(inputs)?;
        Ok(self)
    }

    /// The record of an item whose work is the files it made (a plan, a run's weights, a page):
    /// their prints, and their files and bytes as the item's figures.
    pub fn of_files(data_dir: &Path, outputs: &[&str], inputs: &[&str]) -> std::io::Result<Self> {
        let record = ItemRecord::default().with_files(data_dir, outputs, inputs)?;
        Ok(ItemRecord {
            files: record.outputs.iter().map(|print| print.files).sum(),
            bytes: record.outputs.iter().map(|print| print.bytes).sum(),
            ..record
        })
    }

    /// The record with outputs printed by name only: files that name where the data directory
    /// is (loader configs), rewritten when it moves, which must be there but whose bytes say
    /// nothing about the data.
    pub fn with_named_outputs(mut self, data_dir: &Path, paths: &[&str]) -> std::io::Result<Self> {
        for path in paths {
            self.outputs.push(FilePrint::take_names(data_dir, path)?);
        }
        Ok(self)
    }

    /// The record with the print of which files a folder it read holds, by name (a folder of
    /// videos on disk: each video's bytes are printed where it is read).
    pub fn with_names_input(mut self, data_dir: &Path, path: &str) -> std::io::Result<Self> {
        self.inputs.push(FilePrint::take_names(data_dir, path)?);
        Ok(self)
    }

    /// How the item's outputs or inputs differ from what it recorded, in words (`Err`); else
    /// `Ok`, with the record to keep instead where files were only touched (see
    /// [`FilePrint::compare`]).
    pub fn compare(&self, data_dir: &Path, scrutiny: Scrutiny) -> Result<Option<Self>, String> {
        let mut retimed = self.clone();
        let mut touched = false;
        for (prints, what) in [(&mut retimed.outputs, ""), (&mut retimed.inputs, "input ")] {
            for print in prints.iter_mut() {
                match print.compare(data_dir, scrutiny) {
                    Comparison::Same => {}
                    Comparison::Retimed(now) => {
                        *print = now;
                        touched = true;
                    }
                    Comparison::Changed(change) => return Err(format!("{what}{change}")),
                }
            }
        }
        Ok(touched.then_some(retimed))
    }

    /// What later stages see of this item: the content of what it made, when it recorded its
    /// outputs (so the same bytes made again change nothing downstream); else the prints of what
    /// it read (a video on disk: moved to another folder, it is the same video); else its key.
    pub fn identity(&self) -> String {
        let mut hasher = Sha256::new();
        if !self.outputs.is_empty() {
            hasher.update(b"outputs\0");
            hasher.update(super::prints::combined_digest(&self.outputs).as_bytes());
        } else if !self.inputs.is_empty() {
            hasher.update(b"inputs\0");
            hasher.update(self.files.to_le_bytes());
            hasher.update(self.bytes.to_le_bytes());
            for input in &self.inputs {
                hasher.update(input.content.as_ref().unwrap_or(&input.digest).as_bytes());
            }
        } else {
            hasher.update(b"key\0");
            hasher.update(self.key.as_bytes());
            hasher.update(self.files.to_le_bytes());
            hasher.update(self.bytes.to_le_bytes());
        }
        hex::encode(hasher.finalize())
    }

    /// The record with a stage's typed counts (a struct of `u64` fields) as its counts.
    pub fn with_counts<T: Serialize>(mut self, counts: &T) -> Self {
        self.counts = counts_map(counts);
        self
    }
}

/// A struct of `u64` fields as the name -> value map that state files store.
pub fn counts_map<T: Serialize>(counts: &T) -> BTreeMap<String, u64> {
    match serde_json::to_value(counts) {
        Ok(serde_json::Value::Object(fields)) => fields
            .into_iter()
            .filter_map(|(name, value)| Some((name, value.as_u64()?)))
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// A stage's recorded counts that its typed counts cannot hold: a name it does not have, or a
/// value out of its range. The state was written by another version of the stage.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{stage}: the recorded counts do not match the stage's: {problem}")]
pub struct CountsMismatch {
    pub stage: String,
    pub problem: String,
}

/// A name -> value map back as a stage's typed counts; missing names take their default (an
/// item that counted none), a name the struct does not have is a [`CountsMismatch`].
pub fn typed_counts<T: serde::de::DeserializeOwned + Serialize + Default>(
    stage: &str,
    map: &BTreeMap<String, u64>,
) -> Result<T, CountsMismatch> {
    let mismatch = |problem: String| CountsMismatch {
        stage: stage.to_string(),
        problem,
    };
    let known = counts_map(&T::default());
    if let Some(unknown) = map.keys().find(|name| !known.contains_key(*name)) {
        return Err(mismatch(format!("no count named {unknown:?}")));
    }
    let value = serde_json::to_value(map).map_err(|error| mismatch(error.to_string()))?;
    serde_json::from_value(value).map_err(|error| mismatch(error.to_string()))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemFailure {
    pub item: String,
    /// Absent in state files written before kinds were recorded.
    #[serde(default)]
    pub kind: FailureKind,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageState {
    pub format: u32,
    pub stage: String,
    pub fingerprint: String,
    pub status: StageStatus,
    pub params: serde_json::Value,
    pub items: BTreeMap<String, ItemRecord>,
    #[serde(default)]
    pub failures: Vec<ItemFailure>,
    /// Items that can never complete (a video the server does not have), with the reason. They
    /// count as resolved: later stages drop them instead of waiting for them.
    #[serde(default)]
    pub missing: BTreeMap<String, String>,
    /// The key each missing item was found missing under: another key (the video appeared in
    /// its folder) tries it again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub missing_keys: BTreeMap<String, String>,
    pub planned_items: usize,
    /// The items of the last plan. Records of items no longer planned are kept (a plan that
    /// names them again reuses them) but count for nothing until then.
    #[serde(default)]
    pub planned: Vec<String>,
    /// The stages this one read, so a command that runs a later stage can check them all.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// For a per-video stage: what each whole-dataset stage it reads had made (its content
    /// digest) when this one last ran. Its items read only their own part of it (their inputs);
    /// a command that does not run this stage refuses when that has changed since.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub read: BTreeMap<String, String>,
    pub seconds: f64,
}

impl StageState {
    pub fn new(stage: &str, fingerprint: &str, params: serde_json::Value) -> Self {
        StageState {
            format: STATE_FORMAT,
            stage: stage.to_string(),
            fingerprint: fingerprint.to_string(),
            status: StageStatus::Running,
            params,
            items: BTreeMap::new(),
            failures: Vec::new(),
            missing: BTreeMap::new(),
            missing_keys: BTreeMap::new(),
            planned_items: 0,
            planned: Vec::new(),
            depends_on: Vec::new(),
            read: BTreeMap::new(),
            seconds: 0.0,
        }
    }

    /// The stages this state says it read, as the pipeline's ids; a name no stage of the
    /// pipeline has is left out.
    pub fn dependencies<Id: super::StageName>(&self) -> Vec<Id> {
        self.depends_on
            .iter()
            .filter_map(|name| Id::from_name(name))
            .collect()
    }

    /// Completed or permanently missing: nothing more will come of this item.
    pub fn is_resolved(&self, item: &str) -> bool {
        self.items.contains_key(item) || self.missing.contains_key(item)
    }

    /// The records of the items the last plan named (all of them for a state written before
    /// plans were recorded).
    pub fn planned_records(&self) -> impl Iterator<Item = (&String, &ItemRecord)> {
        let planned: std::collections::BTreeSet<&String> = self.planned.iter().collect();
        let all = self.planned.is_empty();
        self.items
            .iter()
            .filter(move |(item, _)| all || planned.contains(item))
    }

    /// One digest of what the planned items made (by [`ItemRecord::identity`]) and which of
    /// them are missing: what a whole-dataset stage after this one reads.
    pub fn content_digest(&self) -> String {
        let mut hasher = Sha256::new();
        for (item, record) in self.planned_records() {
            hasher.update(item.as_bytes());
            hasher.update([0]);
            hasher.update(record.identity().as_bytes());
            hasher.update([0]);
        }
        let planned: std::collections::BTreeSet<&String> = self.planned.iter().collect();
        for item in self.missing.keys() {
            if self.planned.is_empty() || planned.contains(item) {
                hasher.update(b"missing\0");
                hasher.update(item.as_bytes());
                hasher.update([0]);
            }
        }
        hex::encode(hasher.finalize())
    }

    pub fn total_bytes(&self) -> u64 {
        self.planned_records().map(|(_, record)| record.bytes).sum()
    }

    pub fn total_counts(&self) -> BTreeMap<String, u64> {
        let mut totals = BTreeMap::new();
        for (_, record) in self.planned_records() {
            for (name, value) in &record.counts {
                *totals.entry(name.clone()).or_insert(0) += value;
            }
        }
        totals
    }

    pub fn total_files(&self) -> u64 {
        self.planned_records().map(|(_, record)| record.files).sum()
    }
}

/// The on-disk envelope: the state's JSON text and the sha256 of exactly that text (checking the
/// text, not a re-serialisation, keeps the check independent of float formatting).
#[derive(Serialize, Deserialize)]
struct Envelope {
    sha256: String,
    state: Box<serde_json::value::RawValue>,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: cannot read state file: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: cannot write state file: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// Why a state file on disk was not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptState {
    pub path: PathBuf,
    pub moved_to: PathBuf,
    pub reason: String,
}

/// A read-only look at a state file, for `status`.
pub enum Peeked {
    Missing,
    Valid(Box<StageState>),
    Corrupt(String),
}

pub enum Loaded {
    Missing,
    Valid(StageState),
    /// The file existed but was unreadable as a state; it has been moved aside.
    Corrupt(CorruptState),
}

/// A shard's state file of a stage, as a command that only looks reads it.
#[derive(Debug, Clone)]
pub struct ShardState {
    pub written: SystemTime,
    pub state: StageState,
    /// Which shard wrote it, from its file name.
    pub shard: super::Shard,
}

/// The shard whose state file of `stage` `path` is (`<stage>.shard-I-of-N.json`).
fn shard_of(path: &Path, stage: &str) -> Option<super::Shard> {
    let name = path.file_name()?.to_str()?;
    let numbers = name
        .strip_prefix(stage)?
        .strip_prefix(".shard-")?
        .strip_suffix(".json")?;
    let (index, count) = numbers.split_once("-of-")?;
    format!("{index}/{count}").parse().ok()
}

/// The folder of state files under a data directory, optionally for one shard of a sharded run.
#[derive(Debug, Clone)]
pub struct StateStore {
    dir: PathBuf,
    shard_suffix: Option<String>,
}

impl StateStore {
    pub fn new(data_dir: &Path, shard: Option<super::Shard>) -> Self {
        StateStore {
            dir: data_dir.join(".avaprep").join("state"),
            shard_suffix: shard.map(|shard| format!("shard-{}-of-{}", shard.index, shard.count)),
        }
    }

    pub fn path(&self, stage: &str) -> PathBuf {
        match &self.shard_suffix {
            Some(suffix) => self.dir.join(format!("{stage}.{suffix}.json")),
            None => self.dir.join(format!("{stage}.json")),
        }
    }

    pub fn load(&self, stage: &str) -> Result<Loaded, StateError> {
        load_file(&self.path(stage), stage)
    }

    /// Reads a state file without setting a corrupt one aside.
    pub fn peek(&self, stage: &str) -> Result<Peeked, StateError> {
        let path = self.path(stage);
        match fsutil::read_own_file(&path) {
            Ok(bytes) => Ok(match parse(&bytes, stage) {
                Ok(state) => Peeked::Valid(Box::new(state)),
                Err(reason) => Peeked::Corrupt(reason),
            }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Peeked::Missing),
            Err(source) => Err(StateError::Read { path, source }),
        }
    }

    /// The state files that shards of a sharded run left for `stage` (`<stage>.shard-I-of-N.json`).
    fn shard_paths(&self, stage: &str) -> Result<Vec<PathBuf>, StateError> {
        let prefix = format!("{stage}.shard-");
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(StateError::Read {
                    path: self.dir.clone(),
                    source,
                });
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .filter(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.starts_with(&prefix) && name.ends_with(".json")
            })
            .map(|entry| entry.path())
            .collect();
        paths.sort();
        Ok(paths)
    }

    /// The valid state files that shards of a sharded run left for `stage`; an unsharded run merges
    /// their completed items so work done on other machines is not redone.
    pub fn load_shards(&self, stage: &str) -> Result<Vec<StageState>, StateError> {
        let mut states = Vec::new();
        for path in self.shard_paths(stage)? {
            if let Loaded::Valid(state) = load_file(&path, stage)? {
                states.push(state);
            }
        }
        Ok(states)
    }

    /// The shards' valid states of `stage`, newest first, read without setting a damaged one
    /// aside (for commands that only look).
    pub fn peek_shards(&self, stage: &str) -> Vec<ShardState> {
        let mut states: Vec<ShardState> = self
            .shard_paths(stage)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|path| {
                let shard = shard_of(&path, stage)?;
                let written = fs::metadata(&path).and_then(|meta| meta.modified()).ok()?;
                let state = parse(&fsutil::read_own_file(&path).ok()?, stage).ok()?;
                Some(ShardState {
                    written,
                    state,
                    shard,
                })
            })
            .collect();
        states.sort_by_key(|shard| std::cmp::Reverse(shard.written));
        states
    }

    /// When the stage's own state file was written, if it is there.
    pub fn written(&self, stage: &str) -> Option<SystemTime> {
        fs::metadata(self.path(stage))
            .and_then(|meta| meta.modified())
            .ok()
    }

    /// Makes a stage redo `items` on its next run (their output turned out to be damaged). Outside
    /// a shard, the shards' records of them go too: the run that merges the shards would
    /// otherwise take them back.
    pub fn forget_items(&self, stage: &str, items: &[String]) -> Result<(), StateError> {
        if let Loaded::Valid(mut state) = self.load(stage)?
            && items.iter().any(|item| state.is_resolved(item))
        {
            forget(&mut state, items);
            self.save(&state)?;
        }
        if self.shard_suffix.is_some() {
            return Ok(());
        }
        for path in self.shard_paths(stage)? {
            if let Loaded::Valid(mut state) = load_file(&path, stage)?
                && items.iter().any(|item| state.is_resolved(item))
            {
                // Its time stays: a shard file newer than the stage's own is read as later work.
                let written = fs::metadata(&path).and_then(|meta| meta.modified());
                forget(&mut state, items);
                save_at(&path, &state)?;
                if let Ok(written) = written {
                    fs::File::options()
                        .write(true)
                        .open(&path)
                        .and_then(|file| file.set_modified(written))
                        .map_err(|source| StateError::Write {
                            path: path.clone(),
                            source,
                        })?;
                }
            }
        }
        Ok(())
    }

    pub fn save(&self, state: &StageState) -> Result<(), StateError> {
        save_at(&self.path(&state.stage), state)
    }
}

/// The stage's status stays: a forgotten item is one not made yet (not an interrupted run).
fn forget(state: &mut StageState, items: &[String]) {
    for item in items {
        state.items.remove(item);
        state.missing.remove(item);
        state.missing_keys.remove(item);
    }
}

fn save_at(path: &Path, state: &StageState) -> Result<(), StateError> {
    let text = serde_json::to_string_pretty(state).expect("state serialises");
    let envelope = Envelope {
        sha256: hex::encode(Sha256::digest(text.as_bytes())),
        state: serde_json::value::RawValue::from_string(text).expect("valid JSON"),
    };
    let mut bytes = serde_json::to_vec_pretty(&envelope).expect("state serialises");
    bytes.push(b'\n');
    fsutil::write_atomic(path, &bytes).map_err(|source| StateError::Write {
        path: path.to_path_buf(),
        source,
    })
}

fn load_file(path: &Path, stage: &str) -> Result<Loaded, StateError> {
    let bytes = match fsutil::read_own_file(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Loaded::Missing),
        Err(source) => {
            return Err(StateError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    match parse(&bytes, stage) {
        Ok(state) => Ok(Loaded::Valid(state)),
        Err(reason) => {
            let moved_to = quarantine(path).map_err(|source| StateError::Write {
                path: path.to_path_buf(),
                source,
            })?;
            Ok(Loaded::Corrupt(CorruptState {
                path: path.to_path_buf(),
                moved_to,
                reason,
            }))
        }
    }
}

fn parse(bytes: &[u8], stage: &str) -> Result<StageState, String> {
    let envelope: Envelope = serde_json::from_slice(bytes)
        .map_err(|error| format!("not a valid state file ({error})"))?;
    let text = envelope.state.get();
    if hex::encode(Sha256::digest(text.as_bytes())) != envelope.sha256 {
        return Err("its checksum does not match its content (edited or damaged)".to_string());
    }
    let state: StageState =
        serde_json::from_str(text).map_err(|error| format!("not a valid state ({error})"))?;
    if state.format != STATE_FORMAT && state.format != LEGACY_FORMAT {
        return Err(format!(
            "state format {} is not the supported format {STATE_FORMAT}",
            state.format
        ));
    }
    if state.stage != stage {
        return Err(format!("it records stage `{}`, not `{stage}`", state.stage));
    }
    Ok(state)
}

/// Keeps the untrusted file for inspection instead of deleting what a user may want to look at.
fn quarantine(path: &Path) -> io::Result<PathBuf> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".corrupt");
    let target = path.with_file_name(name);
    fs::rename(path, &target)?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StageState {
        let mut state = StageState::new("extract", "abc", serde_json::json!({"fps": 5}));
        // A value whose decimal text a fast float parser reads back one ULP off.
        state.seconds = 0.1 + 0.2 + 1.0e-17 * 3.0 + 1.383_777_331_247_221;
        state.items.insert(
            "video-00001".into(),
            ItemRecord {
                files: 3,
                bytes: 300,
                ..ItemRecord::default()
            },
        );
        state
    }

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    struct Counts {
        frames: u64,
        videos: u64,
    }

    #[test]
    fn counts_come_back_typed_and_a_foreign_count_is_an_error() {
        let recorded = counts_map(&Counts {
            frames: 7,
            videos: 2,
        });
        let back: Counts = typed_counts("extract", &recorded).unwrap();
        assert_eq!(
            back,
            Counts {
                frames: 7,
                videos: 2
            }
        );
        // An item that counted nothing (or an earlier version without a count) reads as zero.
        let partial = BTreeMap::from([("frames".to_string(), 3)]);
        let back: Counts = typed_counts("extract", &partial).unwrap();
        assert_eq!(
            back,
            Counts {
                frames: 3,
                videos: 0
            }
        );
        let foreign = BTreeMap::from([("rows".to_string(), 3)]);
        let error = typed_counts::<Counts>("extract", &foreign).unwrap_err();
        assert!(
            error.to_string().contains("extract") && error.to_string().contains("\"rows\""),
            "{error}"
        );
    }

    #[test]
    fn round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path(), None);
        store.save(&sample()).unwrap();
        match store.load("extract").unwrap() {
            Loaded::Valid(state) => assert_eq!(state, sample()),
            _ => panic!("expected a valid state"),
        }
    }

    /// A state file planted as a link (to a valid state made elsewhere) is an error naming it,
    /// to `run` and to `status` alike: it was trusted as the stage's record.
    #[test]
    fn a_state_file_that_is_a_link_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path(), None);
        store.save(&sample()).unwrap();
        let path = store.path("extract");
        let elsewhere = dir.path().join("elsewhere.json");
        fs::rename(&path, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        for error in [
            store.load("extract").map(|_| ()).unwrap_err(),
            store.peek("extract").map(|_| ()).unwrap_err(),
        ] {
            let text = error.to_string();
            assert!(
                text.contains(&path.display().to_string()) && text.contains("never follows a link"),
                "{text}"
            );
        }
        assert!(
            fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn truncated_file_is_quarantined_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path(), None);
        store.save(&sample()).unwrap();
        let path = store.path("extract");
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        match store.load("extract").unwrap() {
            Loaded::Corrupt(corrupt) => {
                assert!(corrupt.reason.contains("not a valid state file"));
                assert!(corrupt.moved_to.exists());
                assert!(!path.exists());
            }
            _ => panic!("a truncated state must not load"),
        }
    }

    #[test]
    fn edited_file_fails_its_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path(), None);
        store.save(&sample()).unwrap();
        let path = store.path("extract");
        let text = fs::read_to_string(&path).unwrap().replace("300", "301");
        fs::write(&path, text).unwrap();
        match store.load("extract").unwrap() {
            Loaded::Corrupt(corrupt) => assert!(corrupt.reason.contains("checksum")),
            _ => panic!("an edited state must not load"),
        }
    }

    #[test]
    fn shard_files_are_separate_and_mergeable() {
        let dir = tempfile::tempdir().unwrap();
        let shard = super::super::Shard { index: 2, count: 3 };
        let store = StateStore::new(dir.path(), Some(shard));
        store.save(&sample()).unwrap();
        assert!(store.path("extract").ends_with("extract.shard-2-of-3.json"));
        let whole = StateStore::new(dir.path(), None);
        assert!(matches!(whole.load("extract").unwrap(), Loaded::Missing));
        assert_eq!(whole.load_shards("extract").unwrap(), vec![sample()]);
    }
}
