//! The clips of a split: one per keyframe, with its boxes and multi-label targets.
//!
//! Training boxes follow PySlowFast (`ava_helper.load_boxes_and_labels`): the ground truth plus
//! detector boxes scoring at least the threshold; a detector box takes the labels of the
//! ground-truth boxes it overlaps by IoU >= 0.9 and is kept with an all-zero target otherwise
//! (a negative). Evaluation and prediction use the detector boxes alone.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use avaprep::annotations::{
    ActionId, FrameKey, GroundTruthRow, KeyframeRange, LabelMap, NormBox, PredictedBox,
    ReadOptions, VideoId, read_excluded_timestamps, read_ground_truth, read_label_map,
    read_predicted_boxes,
};
use avaprep::records::{PlanFiles, SplitFiles, VideoPlan};

use super::{DataError, TrainError};
use avaprep::frame_index::FrameIndex;
use avaprep::layout::DataLayout;
use avaprep::trainer_settings::TrainConfig;

/// A box with its target classes (indices into the full label map; empty: a negative).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledBox {
    pub bbox: NormBox,
    pub classes: Vec<usize>,
}

/// One training or evaluation clip.
#[derive(Debug, Clone, PartialEq)]
pub struct ClipSample {
    pub key: FrameKey,
    /// Frame files in clip order.
    pub frames: Vec<PathBuf>,
    /// Source frame size, from the index.
    pub size: (u32, u32),
    pub boxes: Vec<LabelledBox>,
}

/// The annotation files of one split, read with the strict readers.
#[derive(Debug)]
pub struct SplitAnnotations {
    pub split: String,
    pub ground_truth: Vec<GroundTruthRow>,
    pub detector: Vec<PredictedBox>,
    pub excluded: Vec<FrameKey>,
}

impl SplitAnnotations {
    /// The rows of `videos` alone: a video left out is neither trained on nor scored.
    fn without(mut self, videos: &BTreeSet<VideoId>) -> Self {
        self.ground_truth
            .retain(|row| !videos.contains(&row.key.video));
        self.detector.retain(|row| !videos.contains(&row.key.video));
        self.excluded.retain(|key| !videos.contains(&key.video));
        self
    }
}

/// The clips of one split and what was left out of them.
#[derive(Debug)]
pub struct SplitClips {
    pub clips: Vec<ClipSample>,
    /// Its annotations, without the rows of the videos left out.
    pub annotations: SplitAnnotations,
    /// Keyframes skipped because no extracted frame lies near them.
    pub keyframes_without_frames: usize,
    /// Videos with no frames at all (a file gone, an extraction that failed), left out as the
    /// lists leave them out.
    pub videos_without_frames: Vec<VideoId>,
}

/// What the clip builder needs to know about the run.
#[derive(Debug, Clone, Copy)]
pub struct ClipSpec {
    pub frames: usize,
    pub stride: u32,
    pub box_threshold: f32,
    pub label_iou: f32,
}

/// The label maps: every class is a model output; the scored ones are evaluated.
#[derive(Debug, Clone)]
pub struct Classes {
    pub full: LabelMap,
    pub scored: LabelMap,
}

impl Classes {
    /// The label maps the plan names (the manifest's, as parse read them).
    pub fn read(data_dir: &Path, files: &PlanFiles) -> Result<Self, DataError> {
        let dir = DataLayout::new(data_dir).annotations();
        Ok(Self {
            full: read_label_map(&dir.join(&files.label_map))?,
            scored: read_label_map(&dir.join(&files.scored_label_map))?,
        })
    }

    /// The model output of an action id, if the full map has it.
    pub fn index(&self, id: ActionId) -> Option<usize> {
        self.full.labels().iter().position(|l| l.id == id)
    }

    pub fn len(&self) -> usize {
        self.full.len()
    }
}

impl SplitAnnotations {
    /// Reads the files the plan names for the split (the manifest's, as parse read them); a
    /// file it names none of (a test split's ground truth) has no rows.
    pub fn read(
        data_dir: &Path,
        split: &str,
        files: &SplitFiles,
        keyframes: KeyframeRange,
    ) -> Result<Self, DataError> {
        let dir = DataLayout::new(data_dir).annotations();
        let options = ReadOptions::new(keyframes, None);
        let ground_truth = match &files.ground_truth {
            Some(name) => read_ground_truth(&dir.join(name), &options)?,
            None => Vec::new(),
        };
        let excluded = match &files.excluded_timestamps {
            Some(name) => read_excluded_timestamps(&dir.join(name), keyframes)?,
            None => Vec::new(),
        };
        let detector = match &files.detected_boxes {
            Some(name) => read_predicted_boxes(&dir.join(name), &options)?,
            None => Vec::new(),
        };
        Ok(Self {
            split: split.to_string(),
            ground_truth,
            detector,
            excluded,
        })
    }
}

/// Builds the clips of `annotations.split` for the videos the plan puts in it. `train` selects
/// the training boxes (GT + labelled detections); otherwise detections only. A video with no
/// frames at all is left out, rows and all, as the lists leave it out. Keyframes that are
/// excluded, have no boxes, or have no extracted frame are skipped; the count of the last is
/// returned because it means the extraction and the plan disagree.
pub fn build_clips(
    data_dir: &Path,
    plan: &VideoPlan,
    annotations: SplitAnnotations,
    classes: &Classes,
    spec: &ClipSpec,
    train: bool,
) -> Result<SplitClips, DataError> {
    let excluded: HashSet<FrameKey> = annotations.excluded.iter().copied().collect();
    let gt = group_ground_truth(&annotations.ground_truth, classes);
    let detections = group_detections(&annotations.detector, spec.box_threshold);
    let mut clips = Vec::new();
    let mut keyframes_without_frames = 0;
    let mut videos_without_frames = Vec::new();
    let layout = DataLayout::new(data_dir);
    for video in plan.videos.iter().filter(|v| v.split == annotations.split) {
        let path = layout.frame_index(&video.id);
        if !path.exists() {
            videos_without_frames.push(video.id);
            continue;
        }
        let index = FrameIndex::read(&path)?;
        for &second in &video.keyframes {
            let key = FrameKey {
                video: video.id,
                second,
            };
            if excluded.contains(&key) {
                continue;
            }
            let no_boxes = Vec::new();
            let truth = gt.get(&key).unwrap_or(&no_boxes);
            let detected = detections.get(&key).map_or(&[][..], Vec::as_slice);
            let boxes = match train {
                true => training_boxes(truth, detected, spec.label_iou),
                false => detected.iter().map(|&bbox| unlabelled(bbox)).collect(),
            };
            if boxes.is_empty() {
                continue;
            }
            let centre = f64::from(second);
            if !index.covers(centre) {
                keyframes_without_frames += 1;
                continue;
            }
            let frames = index.clip(centre, spec.frames, spec.stride);
            clips.push(ClipSample {
                key,
                frames: frames.iter().map(|&k| layout.frame(&video.id, k)).collect(),
                size: (index.width, index.height),
                boxes,
            });
        }
    }
    let left_out: BTreeSet<VideoId> = videos_without_frames.iter().copied().collect();
    Ok(SplitClips {
        clips,
        annotations: annotations.without(&left_out),
        keyframes_without_frames,
        videos_without_frames,
    })
}

/// Every frame some clip reads, checked to exist before training spends anything on them: a
/// missing one is found now, not when an epoch later reaches it.
pub fn check_frames_exist(splits: &[&[ClipSample]]) -> Result<(), TrainError> {
    use rayon::prelude::*;
    let needed: BTreeMap<&Path, VideoId> = splits
        .iter()
        .flat_map(|clips| clips.iter())
        .flat_map(|clip| {
            clip.frames
                .iter()
                .map(|frame| (frame.as_path(), clip.key.video))
        })
        .collect();
    let missing: Vec<VideoId> = needed
        .par_iter()
        .filter(|(frame, _)| !frame.is_file())
        .map(|(_, &video)| video)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut by_video: BTreeMap<VideoId, usize> = BTreeMap::new();
    for video in &missing {
        *by_video.entry(*video).or_default() += 1;
    }
    let videos: Vec<String> = by_video
        .iter()
        .map(|(video, count)| format!("{video} ({count})"))
        .collect();
    Err(TrainError::FramesMissing {
        missing: missing.len(),
        videos: videos.join(", "),
    })
}

fn unlabelled(bbox: NormBox) -> LabelledBox {
    LabelledBox {
        bbox,
        classes: Vec::new(),
    }
}

/// Ground-truth rows merged per keyframe and box: one box per person, with all its actions.
/// Actions outside the full label map are dropped.
pub fn group_ground_truth(
    rows: &[GroundTruthRow],
    classes: &Classes,
) -> BTreeMap<FrameKey, Vec<LabelledBox>> {
    let mut out: BTreeMap<FrameKey, Vec<LabelledBox>> = BTreeMap::new();
    for row in rows {
        let Some(entry) = row.entry else { continue };
        let boxes = out.entry(row.key).or_default();
        let position = boxes.iter().position(|b| b.bbox == entry.bbox);
        let target = match position {
            Some(i) => &mut boxes[i],
            None => {
                boxes.push(unlabelled(entry.bbox));
                boxes.last_mut().expect("just pushed")
            }
        };
        if let Some(class) = classes.index(entry.action)
            && !target.classes.contains(&class)
        {
            target.classes.push(class);
            target.classes.sort_unstable();
        }
    }
    out
}

/// Detector boxes at or above `threshold`, once per keyframe and box (the train file repeats a
/// box once per label).
pub fn group_detections(rows: &[PredictedBox], threshold: f32) -> BTreeMap<FrameKey, Vec<NormBox>> {
    let mut out: BTreeMap<FrameKey, Vec<NormBox>> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.score >= threshold) {
        let boxes = out.entry(row.key).or_default();
        if !boxes.contains(&row.bbox) {
            boxes.push(row.bbox);
        }
    }
    out
}

/// The ground truth plus each detector box not identical to a ground-truth box, labelled with
/// the union of the classes of the ground-truth boxes it overlaps by at least `min_iou`.
pub fn training_boxes(
    truth: &[LabelledBox],
    detected: &[NormBox],
    min_iou: f32,
) -> Vec<LabelledBox> {
    let mut boxes = truth.to_vec();
    for &bbox in detected {
        if truth.iter().any(|t| t.bbox == bbox) {
            continue;
        }
        let mut classes: Vec<usize> = truth
            .iter()
            .filter(|t| t.bbox.iou(&bbox) >= f64::from(min_iou))
            .flat_map(|t| t.classes.iter().copied())
            .collect();
        classes.sort_unstable();
        classes.dedup();
        boxes.push(LabelledBox { bbox, classes });
    }
    boxes
}

/// Permutes the label sets of all boxes among the boxes (the `shuffle_labels` control).
pub fn shuffle_labels(clips: &mut [ClipSample], seed: u64) {
    use rand::SeedableRng;
    use rand::seq::SliceRandom;
    let mut labels: Vec<Vec<usize>> = clips
        .iter()
        .flat_map(|c| c.boxes.iter().map(|b| b.classes.clone()))
        .collect();
    labels.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    let mut labels = labels.into_iter();
    for b in clips.iter_mut().flat_map(|c| c.boxes.iter_mut()) {
        b.classes = labels.next().expect("one label set per box");
    }
}

/// Data the run reads once: the plan, the label maps, the keyframe range.
pub struct Dataset {
    pub data_dir: PathBuf,
    pub plan: VideoPlan,
    pub classes: Classes,
    pub keyframes: KeyframeRange,
}

impl Dataset {
    pub fn open(data_dir: &Path) -> Result<Self, TrainError> {
        let path = DataLayout::new(data_dir).video_plan();
        let plan = VideoPlan::load(&path).map_err(super::DataError::from)?;
        if let Some(problem) = plan.unnamed_files(&path) {
            return Err(TrainError::Config(problem));
        }
        let keyframes = KeyframeRange::new(plan.keyframes[0], plan.keyframes[1])
            .ok_or_else(|| TrainError::Config("the plan's keyframe range is empty".into()))?;
        Ok(Self {
            data_dir: data_dir.to_path_buf(),
            classes: Classes::read(data_dir, &plan.files)?,
            plan,
            keyframes,
        })
    }

    /// The clips of `split` ([`build_clips`]): training boxes when `train`, detector boxes
    /// otherwise.
    pub fn clips(
        &self,
        config: &TrainConfig,
        split: &str,
        train: bool,
    ) -> Result<SplitClips, TrainError> {
        let files = self.plan.files.splits.get(split).ok_or_else(|| {
            TrainError::Config(format!(
                "the prepared dataset has no split {split} (it has {}): name one it has as `train_split` or `val_split` (`val_split = \"\"` trains without validating)",
                self.plan
                    .files
                    .splits
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let annotations = SplitAnnotations::read(&self.data_dir, split, files, self.keyframes)?;
        let spec = ClipSpec {
            frames: config.clip_frames as usize,
            stride: config.clip_stride,
            box_threshold: config.box_threshold,
            label_iou: config.label_iou,
        };
        let built = build_clips(
            &self.data_dir,
            &self.plan,
            annotations,
            &self.classes,
            &spec,
            train,
        )?;
        if built.clips.is_empty() {
            let why = match built.videos_without_frames.as_slice() {
                [] => "check the plan's splits, the detector boxes and the frames".to_string(),
                videos => format!(
                    "its videos without frames: {} (slowfast/dropped_videos.txt says why); bring them back, or give the split other videos",
                    avaprep::progress::first_named(
                        &videos.iter().map(ToString::to_string).collect::<Vec<_>>(),
                        5
                    )
                ),
            };
            return Err(TrainError::EmptySplit {
                split: split.to_string(),
                why,
            });
        }
        Ok(built)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nb(x1: f32, y1: f32, x2: f32, y2: f32) -> NormBox {
        NormBox::new(x1, y1, x2, y2).unwrap()
    }

    #[test]
    fn iou_of_known_boxes() {
        assert_eq!(nb(0.0, 0.0, 0.5, 0.5).iou(&nb(0.0, 0.0, 0.5, 0.5)), 1.0);
        assert_eq!(nb(0.0, 0.0, 0.2, 0.2).iou(&nb(0.5, 0.5, 0.7, 0.7)), 0.0);
        let half = nb(0.0, 0.0, 0.4, 0.2).iou(&nb(0.2, 0.0, 0.6, 0.2));
        assert!((half - 1.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn detections_are_labelled_by_iou_with_the_ground_truth() {
        let truth = vec![
            LabelledBox {
                bbox: nb(0.1, 0.1, 0.5, 0.9),
                classes: vec![0, 3],
            },
            LabelledBox {
                bbox: nb(0.6, 0.1, 0.9, 0.9),
                classes: vec![1],
            },
        ];
        let close = nb(0.1, 0.1, 0.5, 0.88); // IoU 0.975 with the first
        let loose = nb(0.6, 0.1, 0.9, 0.7); // IoU 0.75 with the second
        let same = nb(0.6, 0.1, 0.9, 0.9); // identical to the second: not added twice
        let boxes = training_boxes(&truth, &[close, loose, same], 0.9);
        assert_eq!(boxes.len(), 4);
        assert_eq!(
            boxes[2],
            LabelledBox {
                bbox: close,
                classes: vec![0, 3]
            }
        );
        assert_eq!(
            boxes[3],
            LabelledBox {
                bbox: loose,
                classes: vec![]
            },
            "a negative"
        );
    }

    #[test]
    fn detections_below_threshold_and_repeats_are_dropped() {
        let key = FrameKey {
            video: "abcdefghijk".parse().unwrap(),
            second: 902,
        };
        let row = |score, x2| PredictedBox {
            key,
            bbox: nb(0.0, 0.0, x2, 0.5),
            label: avaprep::annotations::BoxLabel::Unlabelled,
            score,
        };
        let grouped = group_detections(&[row(0.9, 0.5), row(0.9, 0.5), row(0.7, 0.4)], 0.8);
        assert_eq!(grouped[&key], vec![nb(0.0, 0.0, 0.5, 0.5)]);
    }
}
