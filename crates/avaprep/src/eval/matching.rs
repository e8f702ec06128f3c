//! Per keyframe and class: which detections are true positives.

use crate::annotations::{NormBox, iou};

use super::frames::{Bbox, ClassIndex, Grouped, GtBox, decimal_box};

/// What matching produced.
pub(super) struct Matched {
    /// Per class index: `(score, true positive)` of every scored detection.
    pub(super) per_class: Vec<Vec<(f32, bool)>>,
    /// Detections beyond the per-keyframe cap.
    pub(super) over_frame_cap: usize,
    /// Detections with `x2 <= x1` or `y2 <= y1`.
    pub(super) invalid_boxes: usize,
}

#[derive(Clone, Copy)]
struct Candidate {
    class: u16,
    score: f32,
    bbox: NormBox,
}

/// Labels every kept detection true or false positive, keyframe by keyframe.
pub(super) fn match_all(grouped: &Grouped<'_>, classes: &ClassIndex, threshold: f64) -> Matched {
    let mut matched = Matched {
        per_class: vec![Vec::new(); classes.len()],
        over_frame_cap: 0,
        invalid_boxes: 0,
    };
    let mut candidates = Vec::new();
    let mut taken = Vec::new();
    for frame in 0..grouped.frame_count() {
        select(grouped, frame, classes, &mut candidates, &mut matched);
        let mut gt = grouped.gt_of(frame);
        for run in candidates.chunk_by(|a, b| a.class == b.class) {
            let class = run[0].class;
            // Both lists are sorted by class: skip ground truth of classes
            // this keyframe has no detections for.
            let skip = gt.partition_point(|b| b.class < class);
            gt = &gt[skip..];
            let same = gt.partition_point(|b| b.class == class);
            let out = &mut matched.per_class[usize::from(class)];
            match_class(run, &gt[..same], threshold, &mut taken, out);
        }
    }
    matched
}

/// The keyframe's scored detections as the official evaluator keeps them:
/// the highest-scoring ones up to the cap, then without invalid boxes,
/// grouped by class in descending score order.
fn select(
    grouped: &Grouped<'_>,
    frame: usize,
    classes: &ClassIndex,
    out: &mut Vec<Candidate>,
    matched: &mut Matched,
) {
    out.clear();
    out.extend(grouped.detections_of(frame).filter_map(|d| {
        Some(Candidate {
            class: classes.of(d.action)?,
            score: d.score,
            bbox: d.bbox,
        })
    }));
    // Stable sorts: among equal scores the earlier row ranks first.
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    if let Some(cap) = grouped.max_per_frame.filter(|&cap| out.len() > cap) {
        matched.over_frame_cap += out.len() - cap;
        out.truncate(cap);
    }
    let before = out.len();
    out.retain(|c| c.bbox.x1() < c.bbox.x2() && c.bbox.y1() < c.bbox.y2());
    matched.invalid_boxes += before - out.len();
    out.sort_by_key(|c| c.class);
}

/// Greedy matching in descending score order: each detection takes the box
/// of highest IoU (the first on ties, like `np.argmax`), and is a true
/// positive only if that box is close enough and still free.
fn match_class(
    detections: &[Candidate],
    gt: &[GtBox],
    threshold: f64,
    taken: &mut Vec<bool>,
    out: &mut Vec<(f32, bool)>,
) {
    taken.clear();
    taken.resize(gt.len(), false);
    for d in detections {
        let tp = best_overlap(&decimal_box(&d.bbox), gt)
            .filter(|&(_, iou)| iou >= threshold)
            .is_some_and(|(j, _)| !std::mem::replace(&mut taken[j], true));
        out.push((d.score, tp));
    }
}

/// Index and IoU of the ground-truth box overlapping `det` most.
fn best_overlap(det: &Bbox, gt: &[GtBox]) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    for (j, g) in gt.iter().enumerate() {
        let v = iou(det, &g.bbox);
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((j, v));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iou_of_simple_boxes() {
        let a = [0.0, 0.0, 0.5, 1.0];
        assert_eq!(iou(&a, &a), 1.0);
        assert_eq!(iou(&a, &[0.5, 0.0, 1.0, 1.0]), 0.0, "touching edges");
        assert_eq!(iou(&a, &[0.0, 0.0, 0.25, 1.0]), 0.5);
        assert_eq!(iou(&[0.0, 0.0, 1.0, 1.0], &[0.5, 0.5, 1.0, 1.0]), 0.25);
    }

    #[test]
    fn argmax_takes_the_first_of_equal_overlaps() {
        let gt = |x1, x2| GtBox {
            class: 0,
            bbox: [x1, 0.0, x2, 1.0],
        };
        let boxes = [gt(0.0, 0.5), gt(0.5, 1.0), gt(0.25, 0.75)];
        let (j, v) = best_overlap(&[0.25, 0.0, 0.75, 1.0], &boxes).unwrap();
        assert_eq!((j, v), (2, 1.0));
        let (j, _) = best_overlap(&[0.0, 0.0, 1.0, 1.0], &boxes[..2]).unwrap();
        assert_eq!(j, 0);
        assert_eq!(best_overlap(&[0.0, 0.0, 1.0, 1.0], &[]), None);
    }
}
