//! `avaprep validate`: named checks of a prepared dataset in PySlowFast's layout, each with a
//! count and examples of what failed, for a person (a summary), a script (JSON) and a CI system
//! (JUnit XML, one test case per check).
//!
//! The checks are the failures users report most: lists whose videos differ from the box files'
//! (PySlowFast asserts deep in its loader), headers and quoted ids in box files, seconds outside
//! the keyframe range, frames a list or a clip needs that were never extracted or do not decode,
//! and clips from the wrong time. They read any folder in PySlowFast's layout; the checks that
//! need avaprep's frame index (timing) or recorded checksums are skipped, with the reason, where
//! those files are absent.

mod checks;
pub mod config;
pub mod junit;
mod options;
mod tables;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use config::{DatasetNames, PySlowFastYaml};
pub use options::ValidateOptions;

use crate::layout::DataLayout;
use crate::progress::Reporter;
use crate::records::{Mmaction2View, SplitFiles, WRITTEN_TIMING, WrittenTiming};

/// Most examples kept per check; the count is always complete.
pub const MAX_EXAMPLES: usize = 10;

/// Every check, in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckId {
    FilesPresent,
    ListFormat,
    ListOrder,
    RowCounts,
    AnnotationFormat,
    DuplicateRows,
    BoxesInRange,
    LabelsKnown,
    SecondsInRange,
    Exclusions,
    VideoSets,
    FramesExist,
    FramesDecode,
    FrameSizes,
    ClipFrames,
    ListTiming,
    FrameTiming,
    Checksums,
    LoaderViews,
    ConsumerClock,
}

impl CheckId {
    pub const ALL: [CheckId; 20] = [
        CheckId::FilesPresent,
        CheckId::ListFormat,
        CheckId::ListOrder,
        CheckId::RowCounts,
        CheckId::AnnotationFormat,
        CheckId::DuplicateRows,
        CheckId::BoxesInRange,
        CheckId::LabelsKnown,
        CheckId::SecondsInRange,
        CheckId::Exclusions,
        CheckId::VideoSets,
        CheckId::FramesExist,
        CheckId::FramesDecode,
        CheckId::FrameSizes,
        CheckId::ClipFrames,
        CheckId::ListTiming,
        CheckId::FrameTiming,
        CheckId::Checksums,
        CheckId::LoaderViews,
        CheckId::ConsumerClock,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            CheckId::FilesPresent => "files-present",
            CheckId::ListFormat => "list-format",
            CheckId::ListOrder => "list-order",
            CheckId::RowCounts => "row-counts",
            CheckId::AnnotationFormat => "annotation-format",
            CheckId::DuplicateRows => "duplicate-rows",
            CheckId::BoxesInRange => "boxes-in-range",
            CheckId::LabelsKnown => "labels-known",
            CheckId::SecondsInRange => "seconds-in-range",
            CheckId::Exclusions => "exclusions",
            CheckId::VideoSets => "video-sets",
            CheckId::FramesExist => "frames-exist",
            CheckId::FramesDecode => "frames-decode",
            CheckId::FrameSizes => "frame-sizes",
            CheckId::ClipFrames => "clip-frames",
            CheckId::ListTiming => "list-timing",
            CheckId::FrameTiming => "frame-timing",
            CheckId::Checksums => "checksums",
            CheckId::LoaderViews => "loader-views",
            CheckId::ConsumerClock => "consumer-clock",
        }
    }

    /// What the check holds to, in a sentence.
    pub const fn rule(self) -> &'static str {
        match self {
            CheckId::FilesPresent => {
                "every list, box file, exclusion file and label map the config names exists and reads"
            }
            CheckId::ListFormat => {
                "frame lists: a header line, then rows of 5 space-separated tokens with a plain video id and a path inside the frame folder"
            }
            CheckId::ListOrder => {
                "each video's rows are contiguous with frame_id 0, 1, 2, ... and videos are numbered by first appearance, the same in every list"
            }
            CheckId::RowCounts => {
                "each video has a row for every instant of the segment at the list rate (AVA at 30 a second: 27,030)"
            }
            CheckId::AnnotationFormat => {
                "box and exclusion files: no header, no quoting, numeric fields, 7 or 8 columns (a detector's boxes with their score)"
            }
            CheckId::DuplicateRows => "no line repeated within a box file",
            CheckId::BoxesInRange => "every box lies in [0, 1] with x1 < x2 and y1 < y2",
            CheckId::LabelsKnown => {
                "every action id is a class of the dataset (the label maps: the scored one and the full one beside it, else AVA's 1..80)"
            }
            CheckId::SecondsInRange => {
                "every keyframe second lies inside the dataset's keyframe range"
            }
            CheckId::Exclusions => {
                "every excluded keyframe names a listed video and a second inside the keyframe range"
            }
            CheckId::VideoSets => {
                "each split's frame lists and box files hold exactly the same videos (a split the config does not name may list a video without boxes)"
            }
            CheckId::FramesExist => "every frame a list names exists",
            CheckId::FramesDecode => "every frame decodes as a JPEG of its recorded size",
            CheckId::FrameSizes => {
                "a video's frames share one size, at the configured height where one is given"
            }
            CheckId::ClipFrames => {
                "every frame any clip of an annotated keyframe takes exists and shows the instant the loader assumes"
            }
            CheckId::ListTiming => {
                "each list row points at the extracted frame nearest the instant the loader assumes for it"
            }
            CheckId::FrameTiming => {
                "each extracted frame shows the source frame nearest its target time (within half a source frame)"
            }
            CheckId::Checksums => {
                "annotation files equal their recorded sha256 (SHA256SUMS beside them, the manifest)"
            }
            CheckId::LoaderViews => {
                "every index of every keyframe's clip mmaction2's AVADataset takes from the mmaction2 view is a link into the video's frames showing the instant the loader assumes"
            }
            CheckId::ConsumerClock => {
                "the lists are on AVA's clock, which PySlowFast and pytorchvideo hard-code: rows from second 900, every keyframe in 902..1798"
            }
        }
    }
}

/// Whether a check passed, failed, or could not apply to this dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Passed,
    Failed,
    Skipped,
}

impl CheckStatus {
    /// The word the JSON, and the report's table, give it.
    pub const fn word(self) -> &'static str {
        match self {
            CheckStatus::Passed => "passed",
            CheckStatus::Failed => "failed",
            CheckStatus::Skipped => "skipped",
        }
    }
}

/// One check's outcome: how many things it looked at, how many failed, and the first few.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    pub id: CheckId,
    pub checked: u64,
    pub failed: u64,
    pub examples: Vec<String>,
    /// Why the check did not apply (a file it needs is absent).
    pub skipped: Option<String>,
}

impl CheckResult {
    pub fn new(id: CheckId) -> Self {
        CheckResult {
            id,
            checked: 0,
            failed: 0,
            examples: Vec::new(),
            skipped: None,
        }
    }

    pub fn pass(&mut self, count: u64) {
        self.checked += count;
    }

    pub fn fail(&mut self, example: String) {
        self.checked += 1;
        self.failed += 1;
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(example);
        }
    }

    pub fn skip(&mut self, reason: impl Into<String>) {
        if self.checked == 0 {
            self.skipped = Some(reason.into());
        }
    }

    pub fn status(&self) -> CheckStatus {
        match (self.failed, &self.skipped) {
            (0, Some(_)) => CheckStatus::Skipped,
            (0, None) => CheckStatus::Passed,
            _ => CheckStatus::Failed,
        }
    }
}

/// How much of the frames to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Depth {
    /// Every frame decoded.
    Full,
    /// Every frame's existence, but only a sample decoded (1 in [`QUICK_DECODE_EVERY`], and each
    /// video's first and last): for a pre-commit hook.
    Quick,
}

pub const QUICK_DECODE_EVERY: usize = 64;

/// The instants a loader assumes for list rows: row `p` of a video shows
/// `segment_start + p / list_fps`, and a clip is `num_frames` rows `sampling_rate` apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ListTiming {
    pub list_fps: f64,
    pub segment_start: f64,
    pub segment_end: f64,
    pub num_frames: u32,
    pub sampling_rate: u32,
    /// The first and last keyframe second, inclusive.
    pub keyframes: [u32; 2],
}

impl ListTiming {
    /// PySlowFast's AVA: 30 rows a second over [900, 1801) s, keyframes 902..=1798.
    pub fn pyslowfast(num_frames: u32, sampling_rate: u32) -> Self {
        ListTiming {
            list_fps: 30.0,
            segment_start: 900.0,
            segment_end: 1801.0,
            num_frames,
            sampling_rate,
            keyframes: [902, 1798],
        }
    }

    /// The row PySlowFast centres a keyframe's clip on: `(second - start) * fps`.
    fn centre_row(&self, second: i64) -> i64 {
        ((second as f64 - self.segment_start) * self.list_fps) as i64
    }

    /// Rows a video's list holds: the whole segment at the list rate, or up to the end of a
    /// file that ends sooner.
    fn rows_per_video(&self, span: Option<[f64; 2]>) -> usize {
        let end = span.map_or(self.segment_end, |[_, end]| end.min(self.segment_end));
        ((end - self.segment_start) * self.list_fps).round() as usize
    }

    fn row_seconds(&self, row: usize) -> f64 {
        self.segment_start + row as f64 / self.list_fps
    }
}

/// Everything one validation needs: where the files are and what they must satisfy.
#[derive(Debug, Clone)]
pub struct ValidateRequest {
    pub frame_dir: PathBuf,
    pub frame_list_dir: PathBuf,
    pub annotation_dir: PathBuf,
    /// avaprep's `frame_index/` (timing checks), when the dataset has one.
    pub frame_index_dir: Option<PathBuf>,
    pub names: DatasetNames,
    pub timing: ListTiming,
    /// The height every frame must have, when the user names one.
    pub height: Option<u32>,
    /// sha256 of annotation files known from elsewhere (a dataset manifest), by path.
    pub known_sha256: BTreeMap<PathBuf, String>,
    pub depth: Depth,
    /// The data directory's mmaction2 view (`lists --mmaction2`), when it has one.
    pub mmaction2_view: Option<PathBuf>,
    /// A detector's box below this score is no proposal, so no keyframe for the loaders.
    pub detection_score_thresh: f64,
    /// The seconds each video's file covers, where `avaprep lists` recorded them.
    pub video_spans: BTreeMap<String, [f64; 2]>,
    /// Splits the config names no list of (a test split to predict on), where `avaprep lists`
    /// recorded them: `<split>.csv` in the list folder and these tables.
    pub other_splits: BTreeMap<String, SplitFiles>,
}

impl WrittenTiming {
    fn with_clip(&self, num_frames: u32, sampling_rate: u32) -> ListTiming {
        ListTiming {
            list_fps: self.list_fps,
            segment_start: self.segment_start,
            segment_end: self.segment_end,
            num_frames,
            sampling_rate,
            keyframes: self.keyframes,
        }
    }
}

impl ValidateRequest {
    /// The seconds a video's rows and links show frames of: its file's, inside the segment (see
    /// [`crate::records::shown_instant`]).
    pub(crate) fn shown_span(&self, video: &str) -> [f64; 2] {
        let segment = [self.timing.segment_start, self.timing.segment_end];
        self.video_spans.get(video).map_or(segment, |[start, end]| {
            [segment[0].max(*start), segment[1].min(*end)]
        })
    }

    /// A data directory avaprep prepared: its layout, the config and timing `avaprep lists`
    /// wrote, and its frame index.
    pub fn for_data_dir(data_dir: &Path, depth: Depth) -> Result<Self, ValidateError> {
        let layout = DataLayout::new(data_dir);
        let config_path = layout.slowfast().join("ava.yaml");
        if !config_path.exists() {
            return Err(ValidateError::NotPrepared {
                path: config_path,
                lists: crate::stages::make_command(data_dir, crate::stages::StageId::Lists),
            });
        }
        let config = PySlowFastYaml::load(&config_path)?;
        check_names_this_directory(&config, &config_path, &layout)?;
        let timing_path = layout.slowfast().join(WRITTEN_TIMING);
        let written: WrittenTiming = read_json(&timing_path)?;
        ValidateRequest {
            frame_dir: layout.frames(),
            frame_list_dir: layout.frame_lists(),
            annotation_dir: layout.slowfast().join("annotations"),
            frame_index_dir: Some(data_dir.join("frame_index")),
            names: config.names,
            timing: written.with_clip(config.num_frames, config.sampling_rate),
            height: None,
            known_sha256: BTreeMap::new(),
            depth,
            mmaction2_view: Some(layout.mmaction2())
                .filter(|view| view.join(Mmaction2View::RECORD).exists()),
            detection_score_thresh: config.detection_score_thresh,
            video_spans: written.video_spans,
            other_splits: BTreeMap::new(),
        }
        .with_other_splits(written.other_splits, &timing_path)
    }

    /// The splits `avaprep lists` recorded in `record`, but for those whose list the config
    /// names already. Their names are read as untrusted: each must stay inside its folder.
    fn with_other_splits(
        mut self,
        recorded: BTreeMap<String, SplitFiles>,
        record: &Path,
    ) -> Result<Self, ValidateError> {
        for (split, files) in &recorded {
            let tables = [
                &files.ground_truth,
                &files.excluded_timestamps,
                &files.detected_boxes,
            ];
            let names = tables.into_iter().flatten().cloned();
            for name in std::iter::once(other_split_list(split)).chain(names) {
                crate::layout::check_relative_name(&name).map_err(|message| {
                    ValidateError::Config {
                        path: record.to_path_buf(),
                        message: format!("split {split:?}: {name:?}: {message}"),
                    }
                })?;
            }
        }
        let named: Vec<&String> = self.configured_lists().collect();
        self.other_splits = recorded
            .into_iter()
            .filter(|(split, _)| !named.contains(&&other_split_list(split)))
            .collect();
        Ok(self)
    }

    /// Every list validated: the config's, then the other splits'.
    pub fn list_names(&self) -> Vec<String> {
        let others = self
            .other_splits
            .keys()
            .map(|split| other_split_list(split));
        self.configured_lists().cloned().chain(others).collect()
    }

    fn configured_lists(&self) -> impl Iterator<Item = &String> {
        self.names.train_lists.iter().chain(&self.names.test_lists)
    }

    /// A config `avaprep lists` wrote, named by path (`--config DATA/slowfast/ava.yaml`): the
    /// timing it recorded beside it (`lists.json`), and the data directory's frame index and
    /// mmaction2 view when the config's frames are that directory's. A config without `lists.json` beside it keeps
    /// PySlowFast's timing.
    pub fn with_records_beside(mut self, config: &PySlowFastYaml) -> Result<Self, ValidateError> {
        // The first config of the `_BASE_` chain with avaprep's records beside it: a config of
        // one's own that names the data directory's as its base checks what that one does.
        let folders = config
            .files
            .iter()
            .map(|file| file.parent().unwrap_or(Path::new(".")));
        let Some(folder) = folders
            .into_iter()
            .find(|folder| folder.join(WRITTEN_TIMING).exists())
        else {
            return Ok(self);
        };
        let timing_path = folder.join(WRITTEN_TIMING);
        let mut written: WrittenTiming = read_json(&timing_path)?;
        let other_splits = std::mem::take(&mut written.other_splits);
        self.timing = written.with_clip(self.timing.num_frames, self.timing.sampling_rate);
        self.video_spans = written.video_spans;
        let data_dir = folder.parent().unwrap_or(Path::new("."));
        let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        let index = data_dir.join("frame_index");
        let layout = DataLayout::new(data_dir);
        if index.is_dir() && same(&self.frame_dir, &layout.frames()) {
            self.frame_index_dir = Some(index);
            self.mmaction2_view =
                Some(layout.mmaction2()).filter(|view| view.join(Mmaction2View::RECORD).exists());
        }
        let own_tables = same(&self.frame_list_dir, &layout.frame_lists())
            && same(&self.annotation_dir, &layout.slowfast().join("annotations"));
        if own_tables {
            self = self.with_other_splits(other_splits, &timing_path)?;
        }
        Ok(self)
    }

    /// Any folder in PySlowFast's layout, described by a PySlowFast config: its roots, its file
    /// names, PySlowFast's own timing (30 rows a second from 900 s).
    pub fn for_config(config: &PySlowFastYaml, depth: Depth) -> Result<Self, ValidateError> {
        let root = |dir: &Option<PathBuf>, key: &'static str| {
            dir.clone().ok_or(ValidateError::MissingRoot { key })
        };
        Ok(ValidateRequest {
            frame_dir: root(&config.frame_dir, "AVA.FRAME_DIR (--frame-dir)")?,
            frame_list_dir: root(
                &config.frame_list_dir,
                "AVA.FRAME_LIST_DIR (--frame-list-dir)",
            )?,
            annotation_dir: root(
                &config.annotation_dir,
                "AVA.ANNOTATION_DIR (--annotation-dir)",
            )?,
            frame_index_dir: None,
            names: config.names.clone(),
            timing: ListTiming::pyslowfast(config.num_frames, config.sampling_rate),
            height: None,
            known_sha256: BTreeMap::new(),
            depth,
            mmaction2_view: None,
            detection_score_thresh: config.detection_score_thresh,
            video_spans: BTreeMap::new(),
            other_splits: BTreeMap::new(),
        })
    }
}

/// The frame list of a split the config does not name, as `avaprep lists` writes it.
pub fn other_split_list(split: &str) -> String {
    format!("{split}.csv")
}

/// The data directory's config names its own folders: one moved or copied still names the old
/// place (where PySlowFast would read) until a command that writes there rewrites it.
fn check_names_this_directory(
    config: &PySlowFastYaml,
    config_path: &Path,
    layout: &DataLayout,
) -> Result<(), ValidateError> {
    let here = std::path::absolute(layout.frames()).unwrap_or_else(|_| layout.frames());
    match &config.frame_dir {
        Some(named) if !crate::fsutil::same_place(named, &here) => Err(ValidateError::Config {
            path: config_path.to_path_buf(),
            message: format!(
                "names the frames at {}, not this data directory's ({}): it was moved or copied; `{}` rewrites the configs for it",
                named.display(),
                here.display(),
                crate::stages::remake_command(layout.root(), crate::stages::StageId::Lists)
            ),
        }),
        _ => Ok(()),
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ValidateError> {
    let bytes =
        crate::fsutil::read_regular(path, crate::fsutil::FileKind::Config).map_err(|error| {
            ValidateError::Config {
                path: path.to_path_buf(),
                message: error.to_string(),
            }
        })?;
    serde_json::from_slice(&bytes).map_err(|error| ValidateError::Config {
        path: path.to_path_buf(),
        message: error.to_string(),
    })
}

/// Why validation could not start (a defect in the data is a failed check, not an error).
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error(
        "{path} does not exist: the data directory has no frame lists yet; run `{lists}` (or the pipeline's `avaprep run`), or name a PySlowFast config with --config"
    )]
    NotPrepared { path: PathBuf, lists: String },
    #[error("no {key}: name it in the config or with the flag")]
    MissingRoot { key: &'static str },
    #[error("{name:?} in the config: {message}")]
    BadName { name: String, message: String },
    #[error(transparent)]
    Setting(crate::bad_setting::BadSetting),
    #[error("interrupted before every frame was read: nothing was written; run it again")]
    Interrupted,
}

impl ValidateError {
    /// An error in what the user asked for (exit 2) rather than in reading the data.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ValidateError::MissingRoot { .. }
                | ValidateError::BadName { .. }
                | ValidateError::Setting(_)
        )
    }
}

/// Every check's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationReport {
    pub passed: bool,
    pub depth: Depth,
    pub checks: Vec<CheckResult>,
    /// Distinct frame files the lists name, how many were decoded, and the seconds it took.
    pub frames_listed: u64,
    pub frames_decoded: u64,
    pub seconds: f64,
}

impl ValidationReport {
    pub fn failed_checks(&self) -> impl Iterator<Item = &CheckResult> {
        self.checks
            .iter()
            .filter(|check| check.status() == CheckStatus::Failed)
    }

    /// The checks that did not run at this depth (`--quick`) or on this data.
    pub fn skipped_checks(&self) -> impl Iterator<Item = &CheckResult> {
        self.checks
            .iter()
            .filter(|check| check.status() == CheckStatus::Skipped)
    }

    /// The report as scripts read it: every check with its name, status, rule, counts and
    /// examples, and the seconds it took.
    pub fn to_json(&self) -> serde_json::Value {
        let mut json = serde_json::to_value(self.findings()).expect("findings serialise");
        json["seconds"] = self.seconds.into();
        json
    }

    /// The report without its timing: the same data validated again gives the same bytes, so the
    /// pipeline's file of it changes only when a finding does (training's fingerprint reads it).
    pub fn findings(&self) -> Findings {
        let checks = self
            .checks
            .iter()
            .map(|check| CheckFinding {
                checked: check.checked,
                examples: check.examples.clone(),
                failed: check.failed,
                name: check.id.name().to_string(),
                rule: check.id.rule().to_string(),
                skipped: check.skipped.clone(),
                status: check.status(),
            })
            .collect();
        Findings {
            checks,
            depth: self.depth,
            frames_decoded: self.frames_decoded,
            frames_listed: self.frames_listed,
            passed: self.passed,
        }
    }

    pub fn check(&self, id: CheckId) -> &CheckResult {
        self.checks
            .iter()
            .find(|check| check.id == id)
            .expect("every check is reported")
    }
}

/// What a validation found, as `slowfast/validation.json` keeps it for training's gate and the
/// report, and as `--json` prints it (with the seconds). The fields are in the order the file has
/// always had them: training's fingerprint reads its bytes, and a new order would redo training.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Findings {
    pub checks: Vec<CheckFinding>,
    pub depth: Depth,
    pub frames_decoded: u64,
    pub frames_listed: u64,
    pub passed: bool,
}

impl Findings {
    pub fn failed_checks(&self) -> impl Iterator<Item = &CheckFinding> {
        self.checks
            .iter()
            .filter(|check| check.status == CheckStatus::Failed)
    }
}

/// One check of [`Findings`], by its name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckFinding {
    pub checked: u64,
    pub examples: Vec<String>,
    pub failed: u64,
    pub name: String,
    pub rule: String,
    pub skipped: Option<String>,
    pub status: CheckStatus,
}

/// Runs every check. Progress over the frames goes to `reporter` (stage `validate`).
/// `cancel`: the first Ctrl-C; the frames are no longer read and the validation ends
/// [`ValidateError::Interrupted`] within moments (it writes nothing until it is complete).
pub fn validate(
    request: &ValidateRequest,
    reporter: &dyn Reporter,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<ValidationReport, ValidateError> {
    let started = std::time::Instant::now();
    for name in request.names.all() {
        crate::layout::check_relative_name(name).map_err(|message| ValidateError::BadName {
            name: name.clone(),
            message,
        })?;
    }
    let mut results: BTreeMap<CheckId, CheckResult> = CheckId::ALL
        .into_iter()
        .map(|id| (id, CheckResult::new(id)))
        .collect();
    let dataset = checks::DatasetTables::load(request, &mut results);
    checks::check_tables(request, &dataset, &mut results);
    let frames = checks::check_frames(request, &dataset, &mut results, reporter, cancel);
    if cancel.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(ValidateError::Interrupted);
    }
    checks::check_checksums(request, &mut results);
    checks::check_mmaction2_view(request, &dataset, &mut results);
    checks::check_consumer_clock(request, &dataset, &mut results);
    let checks: Vec<CheckResult> = results.into_values().collect();
    Ok(ValidationReport {
        passed: checks
            .iter()
            .all(|check| check.status() != CheckStatus::Failed),
        depth: request.depth,
        checks,
        frames_listed: frames.listed,
        frames_decoded: frames.decoded,
        seconds: started.elapsed().as_secs_f64(),
    })
}
