//! AVA frame-mAP@0.5: the metric of the official ActivityNet evaluator
//! (`Evaluation/get_ava_performance.py`, the 2019 AVA v2.2 version that reads
//! an excluded-timestamps file), computed in seconds on full-size inputs.
//!
//! What the official evaluator does, and so what this module does:
//! - only classes in the label map count, in ground truth and detections;
//! - an excluded keyframe is removed from both ground truth and detections;
//! - per keyframe, only the 50 highest-scoring detections are kept (the
//!   official `read_csv(detections, class_whitelist, 50)`); PySlowFast's own
//!   evaluator has no such cap, see [`EvalOptions::uncapped`];
//! - detections with `x2 <= x1` or `y2 <= y1` are dropped before matching;
//! - per class and keyframe, detections in descending score order each take
//!   the ground-truth box of highest IoU; a true positive needs IoU >= 0.5 and
//!   that box still unmatched (otherwise it is a false positive, even when
//!   another free box also overlaps enough);
//! - detections on keyframes with no ground truth of their class are false
//!   positives; IoU uses the normalised coordinates as they are (no `+1`);
//! - AP is the PASCAL VOC all-point area under the precision envelope; a class
//!   with ground truth and no detections scores 0; a class without ground
//!   truth has no AP and is left out of the mean.
//!
//! Ties in score make AP depend on input order in every implementation; here
//! the earlier row wins.

mod average_precision;
mod frames;
mod matching;
mod report;

#[cfg(test)]
mod hand_tests;
#[cfg(test)]
mod real_files_tests;
#[cfg(test)]
mod reference_tests;
#[cfg(test)]
mod timing_tests;

use std::path::Path;

use crate::annotations::{
    AnnotationError, Detection, FrameKey, GroundTruthRow, KeyframeRange, LabelMap, ReadOptions,
    read_detections, read_excluded_timestamps, read_ground_truth, read_label_map,
};

pub use report::{ClassReport, DroppedRows, EvalReport, FrameCounts};

/// The official evaluator's per-keyframe detection cap.
pub const OFFICIAL_DETECTIONS_PER_FRAME: usize = 50;

/// How to score; [`EvalOptions::default`] is the official evaluator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvalOptions {
    /// A detection matches a ground-truth box when IoU is at least this.
    pub iou_threshold: f64,
    /// Keep only this many highest-scoring detections per keyframe (counted
    /// over the scored classes); `None` keeps all.
    pub max_detections_per_frame: Option<usize>,
}

impl EvalOptions {
    pub const OFFICIAL: EvalOptions = EvalOptions {
        iou_threshold: 0.5,
        max_detections_per_frame: Some(OFFICIAL_DETECTIONS_PER_FRAME),
    };

    /// The official rule without the per-keyframe cap: what PySlowFast's
    /// in-training evaluator computes.
    pub const fn uncapped() -> Self {
        Self {
            max_detections_per_frame: None,
            ..Self::OFFICIAL
        }
    }
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self::OFFICIAL
    }
}

/// Why [`evaluate_files`] could not produce a report.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The reader's message already names the file and line.
    #[error("{what}: {source}")]
    Read {
        what: &'static str,
        source: AnnotationError,
    },
}

/// Frame-mAP@0.5 with the official rules; see the module docs.
pub fn evaluate(
    groundtruth: &[GroundTruthRow],
    detections: &[Detection],
    labels: &LabelMap,
    excluded: &[FrameKey],
) -> EvalReport {
    evaluate_with(
        groundtruth,
        detections,
        labels,
        excluded,
        &EvalOptions::OFFICIAL,
    )
}

/// [`evaluate`] with explicit options.
pub fn evaluate_with(
    groundtruth: &[GroundTruthRow],
    detections: &[Detection],
    labels: &LabelMap,
    excluded: &[FrameKey],
    options: &EvalOptions,
) -> EvalReport {
    let classes = frames::ClassIndex::new(labels);
    let grouped = frames::group(groundtruth, detections, &classes, excluded, options);
    let matched = matching::match_all(&grouped, &classes, options.iou_threshold);
    let per_class = report::class_reports(labels, &grouped.gt_per_class, matched.per_class);
    let (mean_ap, classes_with_ground_truth) = report::mean_ap(&per_class);
    let mut dropped = grouped.dropped;
    dropped.over_frame_cap = matched.over_frame_cap;
    dropped.invalid_box_detections = matched.invalid_boxes;
    EvalReport {
        mean_ap,
        classes_with_ground_truth,
        iou_threshold: options.iou_threshold,
        max_detections_per_frame: options.max_detections_per_frame,
        classes: per_class,
        frames: grouped.frames,
        dropped,
    }
}

/// Reads the four files with the strict readers and evaluates them with the
/// official rules. Action ids outside the label map are allowed in the
/// inputs (the ground truth has all 80 classes) and are not scored.
pub fn evaluate_files(
    gt_path: &Path,
    detections_path: &Path,
    labelmap_path: &Path,
    exclusions_path: Option<&Path>,
    keyframes: KeyframeRange,
) -> Result<EvalReport, EvalError> {
    evaluate_files_with(
        gt_path,
        detections_path,
        labelmap_path,
        exclusions_path,
        keyframes,
        &EvalOptions::OFFICIAL,
    )
}

/// [`evaluate_files`] with explicit options.
pub fn evaluate_files_with(
    gt_path: &Path,
    detections_path: &Path,
    labelmap_path: &Path,
    exclusions_path: Option<&Path>,
    keyframes: KeyframeRange,
    options: &EvalOptions,
) -> Result<EvalReport, EvalError> {
    let read = |what| move |source| EvalError::Read { what, source };
    let labels = read_label_map(labelmap_path).map_err(read("label map"))?;
    // No label map here: unscored ids are legal input, filtered when scoring.
    let rows = ReadOptions::new(keyframes, None);
    let groundtruth = read_ground_truth(gt_path, &rows).map_err(read("ground truth"))?;
    let detections = read_detections(detections_path, &rows).map_err(read("detections"))?;
    let excluded = match exclusions_path {
        Some(path) => {
            read_excluded_timestamps(path, keyframes).map_err(read("excluded timestamps"))?
        }
        None => Vec::new(),
    };
    Ok(evaluate_with(
        &groundtruth,
        &detections,
        &labels,
        &excluded,
        options,
    ))
}
