//! The records stages hand each other through files under the data directory. A stage reads
//! what an earlier one wrote, never its in-memory state.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::annotations::{VideoFileName, VideoId};
use crate::fsutil;
use crate::layout::{DataLayout, FolderName};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "{path} does not exist yet: run `avaprep fetch` first (it parses the annotations into this plan of videos), or for videos already on disk `avaprep extract --videos DIR`"
    )]
    NoPlan { path: PathBuf },
}

/// The videos a run uses, written by `parse` and read by every later stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VideoPlan {
    /// The annotated segment, seconds from the stream's first timestamp: [start, end).
    pub segment: [f64; 2],
    pub keyframes: [u32; 2],
    pub videos: Vec<PlannedVideo>,
    /// The annotation files the plan was made from, inside the annotations folder.
    #[serde(default)]
    pub files: PlanFiles,
    /// Where the videos are when they were already on disk (not downloaded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub videos_on_disk: Option<VideosOnDisk>,
    /// The dataset second at each file's time 0: 0 for AVA's whole videos, the video start of
    /// videos on disk, or the dataset's own (`dataset.video_start`).
    #[serde(default)]
    pub video_start: f64,
    /// The videos are on their own clock (the manifest's `dataset.own_clock`, as an import
    /// writes it): what a person reads names each file's own seconds too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_clock: bool,
    /// The proposals are the ground-truth boxes (`dataset.ground_truth_proposals`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ground_truth_proposals: bool,
}

/// A folder of `<id>.<ext>` videos the user already has, read where they are and never deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VideosOnDisk {
    pub folder: PathBuf,
    /// The dataset second at the files' time 0: 0 for whole videos, 900 for AVA's pre-cut
    /// 15-minute clips (`videos_15min/`, seconds 900-1801).
    pub start_seconds: f64,
}

/// Names of annotation files relative to the annotations folder (from the manifest), so later
/// stages read the same files parse read without the manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanFiles {
    /// Every action class (`label { ... }` form).
    pub label_map: String,
    /// The scored classes (`item { ... }` form).
    pub scored_label_map: String,
    pub splits: BTreeMap<String, SplitFiles>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitFiles {
    pub ground_truth: Option<String>,
    pub excluded_timestamps: Option<String>,
    pub detected_boxes: Option<String>,
}

impl PlanFiles {
    fn names(&self) -> impl Iterator<Item = &String> {
        [&self.label_map, &self.scored_label_map]
            .into_iter()
            .chain(self.splits.values().flat_map(|split| {
                [
                    &split.ground_truth,
                    &split.excluded_timestamps,
                    &split.detected_boxes,
                ]
                .into_iter()
                .flatten()
            }))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedVideo {
    pub id: VideoId,
    pub file_name: VideoFileName,
    /// The manifest's video folder (`trainval`, `test`) the file is downloaded from.
    pub folder: FolderName,
    pub split: String,
    /// Annotated keyframe seconds, ascending (for test videos: the included timestamps).
    pub keyframes: Vec<u32>,
    /// The seconds the file covers on the dataset's clock, where the dataset says
    /// (`dataset.video_spans`): its start is the dataset second at the file's time 0, and nothing
    /// past its end is extracted or listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<[f64; 2]>,
}

impl PlannedVideo {
    /// The dataset second at its file's time 0: its span's start where the dataset records one
    /// (videos on their own clock each have theirs), else the dataset's `default`.
    pub fn file_start(&self, default: f64) -> f64 {
        self.span.map_or(default, |[start, _]| start)
    }

    /// The seconds its lists cover: from the dataset segment's start (every consumer counts a
    /// video's rows from there, even before its file begins) to the segment's end or the file's,
    /// whichever comes first.
    pub fn listed(&self, segment: [f64; 2]) -> [f64; 2] {
        match self.span {
            Some([_, end]) => [segment[0], segment[1].min(end)],
            None => segment,
        }
    }

    /// The seconds that can be extracted: the segment, inside the file.
    pub fn extractable(&self, segment: [f64; 2]) -> [f64; 2] {
        match self.span {
            Some([start, end]) => [segment[0].max(start), segment[1].min(end)],
            None => segment,
        }
    }

    /// The extracted instant that stands for `at`: `at` itself inside the file and the segment;
    /// before the file begins or after it (or the segment) ends, its first or last frame (half a
    /// frame `period` inside its end), as every consumer repeats a video's end frames. The last
    /// rows of a segment, within half a frame of its end, show its last frame: nothing past the
    /// end is extracted.
    pub fn shown_at(&self, segment: [f64; 2], at: f64, period: f64) -> f64 {
        shown_instant(at, self.extractable(segment), period)
    }
}

/// The instant a row or link at `at` shows in a video whose frames cover `span` (its file's
/// seconds inside the segment): `at` itself inside it; before it begins or after it ends, its
/// first or last frame (half a frame `period` inside its end).
pub fn shown_instant(at: f64, span: [f64; 2], period: f64) -> f64 {
    at.min(span[1] - period / 2.0).max(span[0])
}

/// Beside a detections file, the same rows on the videos' own clock (`NAME.own-seconds.csv`), for
/// a dataset of videos on their own clock: the detections file stays on the dataset's, which
/// `avaprep eval` and the official evaluator score against its ground truth.
pub fn own_seconds_file(detections: &Path) -> PathBuf {
    let stem = detections.file_stem().unwrap_or_default().to_string_lossy();
    detections.with_file_name(format!("{stem}.own-seconds.csv"))
}

impl VideoPlan {
    /// Why a plan written at `path` cannot be read from: one from before plans named their
    /// annotation files (the lists and the trainer read the files it names).
    pub fn unnamed_files(&self, path: &Path) -> Option<String> {
        self.files.label_map.is_empty().then(|| {
            format!(
                "{} predates the lists stage (it names no annotation files); run `avaprep fetch` to parse again",
                path.display()
            )
        })
    }

    /// A dataset second on the video file's own clock, for a dataset of videos on their own
    /// clock (`None` for AVA, whose seconds are the ones people use): the file's id (a part's is
    /// its longer file's) and the second in it.
    /// For a part of a longer file, the file's id and the second in it.
    pub fn own_second(&self, video: &VideoId, dataset_second: f64) -> Option<(VideoId, f64)> {
        if !self.own_clock {
            return None;
        }
        let planned = self.video(video.as_str());
        let default = self.default_file_start();
        let start = planned.map_or(default, |v| v.file_start(default));
        let file = planned.map_or(*video, |v| v.file_name.id);
        Some((file, dataset_second - start))
    }

    /// The dataset second at each file's time 0, where the files do not say their own: the
    /// folder of videos on disk's, else the dataset's.
    pub fn default_file_start(&self) -> f64 {
        self.videos_on_disk
            .as_ref()
            .map_or(self.video_start, |on_disk| on_disk.start_seconds)
    }

    pub fn load(path: &Path) -> Result<Self, RecordError> {
        let bytes = crate::fsutil::read_regular(path, crate::fsutil::FileKind::Config).map_err(
            |source| match source.kind() {
                std::io::ErrorKind::NotFound => RecordError::NoPlan {
                    path: path.to_path_buf(),
                },
                _ => RecordError::Io {
                    path: path.to_path_buf(),
                    source,
                },
            },
        )?;
        let plan: VideoPlan =
            serde_json::from_slice(&bytes).map_err(|error| RecordError::Invalid {
                path: path.to_path_buf(),
                message: error.to_string(),
            })?;
        // Names from a file are joined to the annotations folder: none may leave it.
        for name in plan.files.names().filter(|name| !name.is_empty()) {
            crate::layout::check_relative_name(name).map_err(|message| RecordError::Invalid {
                path: path.to_path_buf(),
                message,
            })?;
        }
        Ok(plan)
    }

    /// Written atomically: a reader sees the previous plan or this one, never a part. A plan equal
    /// to the one on disk leaves the file untouched, so what reads it is not made stale.
    pub fn write(&self, path: &Path) -> Result<(), RecordError> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a plan serialises");
        bytes.push(b'\n');
        if std::fs::read(path).is_ok_and(|existing| existing == bytes) {
            return Ok(());
        }
        fsutil::write_atomic(path, &bytes).map_err(|source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    pub fn video(&self, id: &str) -> Option<&PlannedVideo> {
        self.videos.iter().find(|video| video.id.as_str() == id)
    }
}

/// The timing of the mmaction2 view (`mmaction2/view.json`, written by `lists --mmaction2`, read
/// by `validate`): the `AVADataset` arguments the view was named for and the clip its config
/// samples.
///
/// mmaction2 1.x's `SampleAVAFrames` centres keyframe `t` on index
/// `c = fps * (t - timestamp_start) + start_index`, takes `clip_len` indices `frame_interval`
/// apart from `c - (clip_len / 2) * frame_interval`, clips them to
/// `[0, (timestamp_end - timestamp_start) * fps)` and then adds `start_index` again, so with its
/// default `start_index = 1` every clip is one frame late. The view's config sets
/// `start_index = 0`: file `img_{k:05}.jpg` shows the instant `timestamp_start + k / fps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mmaction2View {
    pub fps: u32,
    pub timestamp_start: i64,
    pub timestamp_end: i64,
    pub clip_len: u32,
    pub frame_interval: u32,
}

impl Mmaction2View {
    /// `AVADataset`'s `filename_tmpl`.
    pub const FILENAME_TEMPLATE: &'static str = "img_{:05}.jpg";

    /// The record's file name in the view's folder.
    pub const RECORD: &'static str = "view.json";

    /// The file the loader opens for index `k`.
    pub fn file_name(k: i64) -> String {
        format!("img_{k:05}.jpg")
    }

    /// The instant index `k` is taken to show.
    pub fn instant(&self, k: i64) -> f64 {
        self.timestamp_start as f64 + k as f64 / f64::from(self.fps)
    }

    /// Indices the loader can read: `0 .. (timestamp_end - timestamp_start) * fps`.
    pub fn index_count(&self) -> i64 {
        (self.timestamp_end - self.timestamp_start) * i64::from(self.fps)
    }

    /// The indices of keyframe `second`'s clip, as `SampleAVAFrames` computes them in test mode
    /// with `start_index = 0`; the clip's centre, index `clip_len / 2`, is the keyframe's.
    pub fn clip_indices(&self, second: i64) -> Vec<i64> {
        self.unclamped(second)
            .map(|k| k.clamp(0, self.index_count() - 1))
            .collect()
    }

    /// Every index a training clip of keyframe `second` can take: training adds its own jitter
    /// to each index (`randint(-interval // 2, (interval + 1) // 2)`, 0 or -1 for an interval
    /// of 1).
    pub fn training_indices(&self, second: i64) -> BTreeSet<i64> {
        let interval = i64::from(self.frame_interval.max(1));
        let jitter = (-interval).div_euclid(2)..(interval + 1) / 2;
        self.unclamped(second)
            .flat_map(|k| jitter.clone().map(move |j| k + j))
            .map(|k| k.clamp(0, self.index_count() - 1))
            .collect()
    }

    fn unclamped(&self, second: i64) -> impl Iterator<Item = i64> {
        let interval = i64::from(self.frame_interval.max(1));
        let first = i64::from(self.fps) * (second - self.timestamp_start)
            - i64::from(self.clip_len / 2) * interval;
        (0..i64::from(self.clip_len)).map(move |i| first + i * interval)
    }
}

/// The file beside `slowfast/ava.yaml` that holds the lists' timing.
pub const WRITTEN_TIMING: &str = "lists.json";

/// The timing `avaprep lists` wrote beside its config (`slowfast/lists.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrittenTiming {
    pub list_fps: f64,
    pub segment_start: f64,
    pub segment_end: f64,
    pub keyframes: [u32; 2],
    /// The seconds each video's file covers, for datasets whose videos differ in length: its
    /// rows end where it does, and rows before it begins show its first frame.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub video_spans: BTreeMap<String, [f64; 2]>,
    /// The splits the config names no list of (its phases are train and val), such as a test
    /// split to predict on: each one's list is `frame_lists/<split>.csv` and its tables these
    /// files in `slowfast/annotations/`, so that `validate` checks them too.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_splits: BTreeMap<String, SplitFiles>,
}

/// What `train` hands to `eval` and to the person reading the run's end: paths relative to the
/// data directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainedRun {
    pub run_dir: String,
    /// Weights of the best validation mAP (the last checkpoint's when no evaluation scored).
    pub weights: String,
    pub curves: String,
    pub stop: String,
    pub epochs_run: u64,
    pub steps: u64,
    /// Best validation mAP during training and its epoch.
    pub best: Option<(f64, u64)>,
    /// The split training evaluated on (its `val_split`), whose mAP `best` is.
    #[serde(default = "default_val_split")]
    pub val_split: String,
}

fn default_val_split() -> String {
    "val".into()
}

impl TrainedRun {
    pub fn path(layout: &DataLayout) -> PathBuf {
        layout.root().join("work").join("train.json")
    }

    pub fn load(layout: &DataLayout) -> Result<Self, RecordError> {
        let path = Self::path(layout);
        let bytes = std::fs::read(&path).map_err(|error| RecordError::Invalid {
            message: format!("{error}; `avaprep run` trains first"),
            path: path.clone(),
        })?;
        serde_json::from_slice(&bytes).map_err(|error| RecordError::Invalid {
            path,
            message: error.to_string(),
        })
    }
}

/// One split's detections and, where it has ground truth, their score; paths relative to the
/// data directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitResult {
    pub split: String,
    pub detections: String,
    /// The detections on the videos' own clock, for a dataset of videos on their own clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_seconds: Option<String>,
    pub report: Option<String>,
    pub mean_ap: Option<f64>,
}

/// What `eval` made: `work/eval.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub weights: String,
    pub splits: Vec<SplitResult>,
}

impl Evaluation {
    pub fn path(layout: &DataLayout) -> PathBuf {
        layout.root().join("work").join("eval.json")
    }

    pub fn load(layout: &DataLayout) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(Self::path(layout)).ok()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(own_clock: bool) -> VideoPlan {
        let video = |id: &str, file: &str, span: [f64; 2]| PlannedVideo {
            id: id.parse().unwrap(),
            file_name: file.parse::<VideoFileName>().unwrap(),
            folder: "videos".try_into().unwrap(),
            split: "train".into(),
            keyframes: vec![902],
            span: Some(span),
        };
        VideoPlan {
            segment: [900.0, 1801.0],
            keyframes: [902, 1798],
            videos: vec![
                video("long_cam_part2", "long_cam.mp4", [2.0, 974.0]),
                video("short", "short.mp4", [895.0, 907.0]),
            ],
            files: PlanFiles::default(),
            videos_on_disk: None,
            video_start: 0.0,
            own_clock,
            ground_truth_proposals: false,
        }
    }

    #[test]
    fn a_dataset_second_is_named_on_its_file_s_clock_a_part_s_on_its_long_file_s() {
        let own = plan(true);
        let id = |id: &str| id.parse::<VideoId>().unwrap();
        assert_eq!(
            own.own_second(&id("long_cam_part2"), 902.0),
            Some((id("long_cam"), 900.0))
        );
        assert_eq!(
            own.own_second(&id("short"), 910.0),
            Some((id("short"), 15.0))
        );
        // AVA's own seconds are the ones people use.
        assert_eq!(plan(false).own_second(&id("short"), 910.0), None);
    }
}
