//! The evaluation result (serde); the command lines render it for people.

use serde::{Deserialize, Serialize};

use crate::annotations::{ActionId, LabelMap};

use super::average_precision::class_ap;

/// Frame-mAP and what went into it. `null` in JSON means "no value": no
/// class had ground truth (`mean_ap`) or this class had none (`ap`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Mean of `ap` over the classes that have ground truth.
    pub mean_ap: Option<f64>,
    pub classes_with_ground_truth: usize,
    pub iou_threshold: f64,
    pub max_detections_per_frame: Option<usize>,
    /// Every class of the label map, in its order.
    pub classes: Vec<ClassReport>,
    pub frames: FrameCounts,
    pub dropped: DroppedRows,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassReport {
    pub id: ActionId,
    pub name: String,
    pub ap: Option<f64>,
    /// Ground-truth boxes scored (after exclusions).
    pub ground_truth: usize,
    /// Detections scored (after exclusions, the cap and invalid boxes).
    pub detections: usize,
    pub true_positives: usize,
}

/// Keyframe counts, after exclusions unless named `excluded_*`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameCounts {
    /// Keyframes with at least one ground-truth row (any class, or none).
    pub ground_truth: usize,
    /// Keyframes with at least one detection of a scored class.
    pub with_detections: usize,
    /// Keyframes whose detections all count as false positives because the
    /// ground truth does not mention them: many means mismatched inputs.
    pub detections_without_ground_truth: usize,
    /// Distinct keyframes in the exclusion list.
    pub excluded_listed: usize,
    /// Excluded keyframes that had ground-truth rows, dropped.
    pub excluded_in_ground_truth: usize,
    /// Excluded keyframes that had detections, dropped.
    pub excluded_in_detections: usize,
}

/// Rows that did not take part in scoring, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedRows {
    pub excluded_ground_truth: usize,
    pub excluded_detections: usize,
    /// Action id not in the label map.
    pub unscored_ground_truth: usize,
    pub unscored_detections: usize,
    /// Beyond the per-keyframe detection cap.
    pub over_frame_cap: usize,
    /// `x2 <= x1` or `y2 <= y1`: the official evaluator ignores these.
    pub invalid_box_detections: usize,
}

/// One report per label, from the matching outcome of each class.
pub(super) fn class_reports(
    labels: &LabelMap,
    gt_per_class: &[usize],
    per_class: Vec<Vec<(f32, bool)>>,
) -> Vec<ClassReport> {
    labels
        .labels()
        .iter()
        .zip(gt_per_class)
        .zip(per_class)
        .map(|((label, &ground_truth), mut scored)| ClassReport {
            id: label.id,
            name: label.name.clone(),
            ap: class_ap(&mut scored, ground_truth),
            ground_truth,
            detections: scored.len(),
            true_positives: scored.iter().filter(|s| s.1).count(),
        })
        .collect()
}

pub(super) fn mean_ap(classes: &[ClassReport]) -> (Option<f64>, usize) {
    let aps: Vec<f64> = classes.iter().filter_map(|c| c.ap).collect();
    let mean = (!aps.is_empty()).then(|| aps.iter().sum::<f64>() / aps.len() as f64);
    (mean, aps.len())
}
