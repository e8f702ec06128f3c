//! The dataset's numbers, read from what the stages wrote: the plan, the frame indexes, the
//! annotation files, the validation report and the missing-video markers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use super::{ReportError, read_json_if_present};
use crate::annotations::{
    ActionId, FrameKey, GroundTruthBox, KeyframeRange, LabelMap, NormBox, ReadOptions, VideoId,
    read_ground_truth, read_label_map,
};
use crate::frame_index::FrameIndex;
use crate::layout::DataLayout;
use crate::records::{PlannedVideo, RecordError, VideoPlan};
use crate::stages::validate::validation_file;

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

#[derive(Debug, Clone)]
pub struct DatasetStats {
    pub splits: Vec<SplitStats>,
    pub classes: Vec<ClassCount>,
    pub frames: u64,
    pub frame_bytes: u64,
    /// The frames a 30 fps extraction of the same segments would write (each within its file).
    pub native_frames: u64,
    /// Frames per second of the extracted frames (of the first video) and their sizes.
    pub fps: Option<f64>,
    pub frame_sizes: std::collections::BTreeSet<(u32, u32)>,
    pub dropped: Vec<Dropped>,
    pub validation: Option<crate::validate::Findings>,
    /// A file or folder of the dataset written after its kept validation: the findings no
    /// longer describe the data (a frame deleted since, or the frames extracted again).
    pub changed_since_validation: Option<String>,
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
        let (frames, frame_bytes, newest_frame) = frame_totals(layout, &indexes)?;
        let native_frames = plan
            .videos
            .iter()
            .filter(|video| indexes.contains_key(&video.id))
            .map(|video| native_frames(video, plan.segment))
            .sum();
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
            validation: read_json_if_present(&validation_file(layout))?,
            changed_since_validation: changed_since_validation(layout, &plan, newest_frame),
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

/// The first of the lists, annotations, frame indexes and frame folders (a frame deleted or
/// added changes its folder's time) written after the kept validation, else the newest frame
/// where it was (one rewritten in place changes only its own time), as a path in the data
/// directory.
fn changed_since_validation(
    layout: &DataLayout,
    plan: &VideoPlan,
    newest_frame: Option<WrittenFrame>,
) -> Option<String> {
    let modified = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|meta| meta.modified())
            .ok()
    };
    let validated = modified(&validation_file(layout))?;
    let listed = |folder: PathBuf| -> Vec<PathBuf> {
        std::fs::read_dir(folder)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .collect()
    };
    let mut written = listed(layout.frame_lists());
    written.extend(listed(layout.slowfast().join("annotations")));
    for video in &plan.videos {
        written.push(layout.frame_index(&video.id));
        written.push(layout.video_frames(&video.id));
    }
    let frame = newest_frame
        .filter(|(time, _)| *time > validated)
        .map(|(_, path)| path);
    written
        .into_iter()
        .find(|path| modified(path).is_some_and(|time| time > validated))
        .or(frame)
        .map(|path| layout.relative(&path))
}

/// The frames PySlowFast's extraction writes of a video: every frame at 30 fps of the segment,
/// or of the part of it the file covers (a video of your own shorter than AVA's 15 minutes).
fn native_frames(video: &PlannedVideo, segment: [f64; 2]) -> u64 {
    let [start, end] = video.span.map_or(segment, |[start, end]| {
        [start.max(segment[0]), end.min(segment[1])]
    });
    ((end - start).max(0.0) * NATIVE_FPS).round() as u64
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

/// A frame and when it was last written.
type WrittenFrame = (SystemTime, PathBuf);

/// The frames, their bytes on disk, and the last written of them (in one pass).
fn frame_totals(
    layout: &DataLayout,
    indexes: &BTreeMap<VideoId, FrameIndex>,
) -> Result<(u64, u64, Option<WrittenFrame>), ReportError> {
    let mut bytes = 0;
    let mut newest: Option<WrittenFrame> = None;
    for video in indexes.keys() {
        let folder = layout.video_frames(video);
        let entries = std::fs::read_dir(&folder).map_err(|e| ReportError::io(&folder, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| ReportError::io(&folder, e))?;
            let meta = entry
                .metadata()
                .map_err(|e| ReportError::io(&entry.path(), e))?;
            bytes += meta.len();
            if let Ok(written) = meta.modified()
                && newest.as_ref().is_none_or(|(time, _)| written > *time)
            {
                newest = Some((written, entry.path()));
            }
        }
    }
    let frames = indexes
        .values()
        .map(|index| index.frames.len() as u64)
        .sum();
    Ok((frames, bytes, newest))
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
                .map(|(_, rows)| person_boxes(rows))
                .sum::<usize>();
        }
    }
    splits.into_values().collect()
}

/// The boxes of a keyframe's rows: a box with several actions is a row each, and one box.
fn person_boxes(rows: &[GroundTruthBox]) -> usize {
    let mut boxes: Vec<&NormBox> = Vec::new();
    for row in rows {
        if !boxes.contains(&&row.bbox) {
            boxes.push(&row.bbox);
        }
    }
    boxes.len()
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

/// Planned videos without frames, with the reason (`stages::no_frames_reason`).
fn dropped(
    layout: &DataLayout,
    plan: &VideoPlan,
    indexes: &BTreeMap<VideoId, FrameIndex>,
) -> Vec<Dropped> {
    plan.videos
        .iter()
        .filter(|video| !indexes.contains_key(&video.id))
        .map(|video| {
            let reason = crate::stages::no_frames_reason(layout, video.id.as_str());
            Dropped {
                video: video.id.to_string(),
                split: video.split.clone(),
                reason,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::FolderName;

    #[test]
    fn a_box_with_two_actions_is_one_box() {
        let row = |corner: f32, action: u16| GroundTruthBox {
            bbox: NormBox::new(corner, 0.1, 0.5, 0.9).unwrap(),
            action: ActionId(action),
            person: Some(0),
        };
        assert_eq!(person_boxes(&[row(0.1, 1), row(0.1, 3), row(0.2, 1)]), 2);
        assert_eq!(person_boxes(&[]), 0);
    }

    #[test]
    fn thirty_fps_frames_count_only_the_seconds_a_file_covers() {
        let video = |span: Option<[f64; 2]>| PlannedVideo {
            id: "walk_01".parse().unwrap(),
            file_name: "walk_01.mp4".parse().unwrap(),
            folder: FolderName::try_from("trainval").unwrap(),
            split: "train".into(),
            keyframes: vec![902],
            span,
        };
        // AVA's 15 minutes; a 12 s file starting 2 s before the segment; one ending past it.
        assert_eq!(native_frames(&video(None), [900.0, 1800.0]), 27_000);
        assert_eq!(
            native_frames(&video(Some([898.0, 910.0])), [900.0, 1800.0]),
            300
        );
        assert_eq!(
            native_frames(&video(Some([1790.0, 1830.0])), [900.0, 1800.0]),
            300
        );
    }
}
