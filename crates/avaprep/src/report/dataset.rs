//! The dataset's numbers, read from what the stages wrote: the plan, the frame indexes, the
//! annotation files, the validation report and the missing-video markers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ReportError, read_json_if_present};
use crate::annotations::{
    ActionId, FrameKey, GroundTruthBox, KeyframeRange, LabelMap, ReadOptions, VideoId,
    read_ground_truth, read_label_map,
};
use crate::frame_index::FrameIndex;
use crate::layout::DataLayout;
use crate::records::{RecordError, VideoPlan};

/// The frame rate PySlowFast's own extraction keeps: every frame of a 30 fps video.
pub const NATIVE_FPS: f64 = 30.0;

#[derive(Debug, Clone, Serialize)]
pub struct SplitStats {
    pub name: String,
    /// Videos the plan puts in the split, and those of them with extracted frames.
    pub videos: usize,
    pub extracted: usize,
    /// Planned keyframes of the extracted videos, and the ground-truth boxes on them.
    pub keyframes: usize,
    pub boxes: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClassCount {
    pub id: u16,
    pub name: String,
    /// Ground-truth boxes per split name.
    pub boxes: BTreeMap<String, usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Dropped {
    pub video: String,
    pub split: String,
    pub reason: String,
}

/// One check of `slowfast/validation.json`, as `avaprep validate` wrote it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ValidationCheck {
    pub name: String,
    pub status: String,
    pub rule: String,
    pub checked: u64,
    pub failed: u64,
    #[serde(default)]
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Validation {
    pub passed: bool,
    pub checks: Vec<ValidationCheck>,
}

#[derive(Debug, Clone)]
pub struct DatasetStats {
    pub splits: Vec<SplitStats>,
    pub classes: Vec<ClassCount>,
    pub frames: u64,
    pub frame_bytes: u64,
    /// The frames a 30 fps extraction of the same segments would write.
    pub native_frames: u64,
    /// Frames per second of the extracted frames (of the first video) and their sizes.
    pub fps: Option<f64>,
    pub frame_sizes: std::collections::BTreeSet<(u32, u32)>,
    pub dropped: Vec<Dropped>,
    pub validation: Option<Validation>,
    pub plan: VideoPlan,
    pub keyframes: KeyframeRange,
    pub indexes: BTreeMap<VideoId, FrameIndex>,
    pub truth: BTreeMap<FrameKey, Vec<GroundTruthBox>>,
    pub labels: LabelMap,
}

impl DatasetStats {
    pub fn gather(layout: &DataLayout) -> Result<Self, ReportError> {
        let plan = VideoPlan::load(&layout.video_plan())?;
        let labels =
            read_label_map(&layout.annotations().join(&plan.files.label_map)).map_err(|error| {
                ReportError::Invalid {
                    path: layout.annotations().join(&plan.files.label_map),
                    message: error.to_string(),
                }
            })?;
        let indexes = read_indexes(layout, &plan)?;
        let [first, last] = plan.keyframes;
        let keyframes = KeyframeRange::new(first, last).ok_or_else(|| RecordError::Invalid {
            path: layout.video_plan(),
            message: format!("keyframes {first}-{last}: the first is after the last"),
        })?;
        let truth = read_truth(layout, &plan, keyframes, &indexes)?;
        let (frames, frame_bytes) = frame_totals(layout, &indexes)?;
        let segment_seconds = (plan.segment[1] - plan.segment[0]).max(0.0);
        let native_frames = (segment_seconds * NATIVE_FPS).round() as u64 * indexes.len() as u64;
        let first = indexes.values().next();
        Ok(DatasetStats {
            splits: split_stats(&plan, &indexes, &truth),
            classes: class_counts(&plan, &labels, &truth),
            frames,
            frame_bytes,
            native_frames,
            fps: first.map(|index| 1.0 / index.period),
            frame_sizes: indexes
                .values()
                .map(|index| (index.width, index.height))
                .collect(),
            dropped: dropped(layout, &plan, &indexes),
            validation: read_json_if_present(&layout.slowfast().join("validation.json"))?,
            plan,
            keyframes,
            indexes,
            truth,
            labels,
        })
    }

    pub fn split_of(&self, video: &VideoId) -> Option<&str> {
        self.plan
            .videos
            .iter()
            .find(|planned| planned.id == *video)
            .map(|planned| planned.split.as_str())
    }
}

/// The index of every planned video whose extraction completed (its index exists).
fn read_indexes(
    layout: &DataLayout,
    plan: &VideoPlan,
) -> Result<BTreeMap<VideoId, FrameIndex>, ReportError> {
    let mut indexes = BTreeMap::new();
    for video in &plan.videos {
        let path = layout.frame_index(&video.id);
        if path.is_file() {
            indexes.insert(video.id, FrameIndex::read(&path)?);
        }
    }
    Ok(indexes)
}

/// Ground-truth boxes of the extracted videos, by keyframe.
fn read_truth(
    layout: &DataLayout,
    plan: &VideoPlan,
    keyframes: KeyframeRange,
    indexes: &BTreeMap<VideoId, FrameIndex>,
) -> Result<BTreeMap<FrameKey, Vec<GroundTruthBox>>, ReportError> {
    let options = ReadOptions::new(keyframes, None);
    let mut truth: BTreeMap<FrameKey, Vec<GroundTruthBox>> = BTreeMap::new();
    for files in plan.files.splits.values() {
        let Some(name) = &files.ground_truth else {
            continue;
        };
        for row in read_ground_truth(&layout.annotations().join(name), &options)? {
            if let (Some(entry), true) = (row.entry, indexes.contains_key(&row.key.video)) {
                truth.entry(row.key).or_default().push(entry);
            }
        }
    }
    Ok(truth)
}

fn frame_totals(
    layout: &DataLayout,
    indexes: &BTreeMap<VideoId, FrameIndex>,
) -> Result<(u64, u64), ReportError> {
    let mut bytes = 0;
    for video in indexes.keys() {
        let folder = layout.video_frames(video);
        let entries = std::fs::read_dir(&folder).map_err(|e| ReportError::io(&folder, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| ReportError::io(&folder, e))?;
            bytes += entry
                .metadata()
                .map_err(|e| ReportError::io(&entry.path(), e))?
                .len();
        }
    }
    let frames = indexes
        .values()
        .map(|index| index.frames.len() as u64)
        .sum();
    Ok((frames, bytes))
}

fn split_stats(
    plan: &VideoPlan,
    indexes: &BTreeMap<VideoId, FrameIndex>,
    truth: &BTreeMap<FrameKey, Vec<GroundTruthBox>>,
) -> Vec<SplitStats> {
    let mut splits: BTreeMap<&str, SplitStats> = BTreeMap::new();
    for video in &plan.videos {
        let stats = splits.entry(&video.split).or_insert_with(|| SplitStats {
            name: video.split.clone(),
            videos: 0,
            extracted: 0,
            keyframes: 0,
            boxes: 0,
        });
        stats.videos += 1;
        if indexes.contains_key(&video.id) {
            stats.extracted += 1;
            stats.keyframes += video.keyframes.len();
            stats.boxes += truth
                .range(
                    FrameKey {
                        video: video.id,
                        second: 0,
                    }..=FrameKey {
                        video: video.id,
                        second: u32::MAX,
                    },
                )
                .map(|(_, boxes)| boxes.len())
                .sum::<usize>();
        }
    }
    splits.into_values().collect()
}

/// Boxes per class and split, for every class of the label map (a class with none shows as 0).
fn class_counts(
    plan: &VideoPlan,
    labels: &LabelMap,
    truth: &BTreeMap<FrameKey, Vec<GroundTruthBox>>,
) -> Vec<ClassCount> {
    let split_of: BTreeMap<VideoId, &str> = plan
        .videos
        .iter()
        .map(|video| (video.id, video.split.as_str()))
        .collect();
    let mut counts: BTreeMap<ActionId, BTreeMap<String, usize>> = BTreeMap::new();
    for (key, boxes) in truth {
        let split = split_of.get(&key.video).copied().unwrap_or("?");
        for entry in boxes {
            *counts
                .entry(entry.action)
                .or_default()
                .entry(split.to_string())
                .or_default() += 1;
        }
    }
    labels
        .labels()
        .iter()
        .map(|label| ClassCount {
            id: label.id.0,
            name: label.name.clone(),
            boxes: counts.remove(&label.id).unwrap_or_default(),
        })
        .collect()
}

/// Planned videos without frames, with the reason: the fetch stage's marker for a video the
/// server or folder does not have, else an extraction that did not complete.
fn dropped(
    layout: &DataLayout,
    plan: &VideoPlan,
    indexes: &BTreeMap<VideoId, FrameIndex>,
) -> Vec<Dropped> {
    plan.videos
        .iter()
        .filter(|video| !indexes.contains_key(&video.id))
        .map(|video| {
            let marker = layout.missing_videos().join(video.id.as_str());
            let reason = std::fs::read_to_string(&marker).unwrap_or_else(|_| {
                "no frames: its extraction has not completed (`avaprep status PIPELINE` or the \
                 extract command's output says why)"
                    .to_string()
            });
            Dropped {
                video: video.id.to_string(),
                split: video.split.clone(),
                reason,
            }
        })
        .collect()
}
