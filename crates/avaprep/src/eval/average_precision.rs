//! PASCAL VOC all-point average precision.

/// AP of one class from its detections' `(score, true positive)` pairs and
/// its number of ground-truth boxes; `None` when it has no ground truth.
///
/// Sorts `scored` by descending score (stable: earlier pairs win ties).
pub(super) fn class_ap(scored: &mut [(f32, bool)], num_gt: usize) -> Option<f64> {
    if num_gt == 0 {
        return None;
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    Some(average_precision(scored.iter().map(|s| s.1), num_gt))
}

/// Area under the precision envelope, for true-positive flags in rank order.
///
/// Recall only grows at a true positive, and the envelope at rank `i` is the
/// best precision at rank `i` or later, so AP is the sum, over true
/// positives, of the recall step times the envelope there. The recall step
/// is computed as a difference of recalls, as `metrics.py` does, so results
/// agree to rounding.
fn average_precision(ranked: impl Iterator<Item = bool>, num_gt: usize) -> f64 {
    let mut points = Vec::new();
    let mut tp = 0usize;
    for (rank, is_tp) in ranked.enumerate() {
        tp += usize::from(is_tp);
        let precision = tp as f64 / (rank + 1) as f64;
        points.push((precision, is_tp.then_some(tp)));
    }
    let recall = |tp: usize| tp as f64 / num_gt as f64;
    let mut envelope = 0.0f64;
    let mut ap = 0.0;
    for &(precision, tp) in points.iter().rev() {
        envelope = envelope.max(precision);
        if let Some(tp) = tp {
            ap += (recall(tp) - recall(tp - 1)) * envelope;
        }
    }
    ap
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ap(flags: &[bool], num_gt: usize) -> f64 {
        average_precision(flags.iter().copied(), num_gt)
    }

    #[test]
    fn by_hand() {
        assert_eq!(ap(&[true, true], 2), 1.0);
        assert_eq!(ap(&[], 3), 0.0);
        assert_eq!(ap(&[false, false], 1), 0.0);
        // P = 1/2 at the only recall step.
        assert_eq!(ap(&[false, true], 1), 0.5);
        // Steps of 1/2 at precisions 1 and 2/3.
        assert!((ap(&[true, false, true], 2) - (0.5 + 0.5 * 2.0 / 3.0)).abs() < 1e-15);
        // The envelope lifts the 1/2 at rank 2 to the 2/3 at rank 3.
        let v = ap(&[false, true, true], 2);
        assert!((v - 2.0 / 3.0).abs() < 1e-15, "{v}");
        // Recall never reaches 1: the missing box counts as zero.
        assert_eq!(ap(&[true], 4), 0.25);
    }

    #[test]
    fn class_ap_sorts_by_score() {
        let mut scored = [(0.2, true), (0.9, false)];
        assert_eq!(class_ap(&mut scored, 1), Some(0.5));
        assert_eq!(class_ap(&mut [(0.5, false)], 0), None);
    }
}
