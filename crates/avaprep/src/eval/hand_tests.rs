//! Small cases whose AP is worked out by hand in the comments.

use std::path::Path;

use super::*;
use crate::annotations::{ActionId, GroundTruthBox, Label, NormBox};

const VIDEO: &str = "-5KQ66BBWC4";

fn key(second: u32) -> FrameKey {
    FrameKey {
        video: VIDEO.parse().unwrap(),
        second,
    }
}

fn bbox(b: [f32; 4]) -> NormBox {
    NormBox::new(b[0], b[1], b[2], b[3]).unwrap()
}

fn gt(second: u32, b: [f32; 4], action: u16) -> GroundTruthRow {
    GroundTruthRow {
        key: key(second),
        entry: Some(GroundTruthBox {
            bbox: bbox(b),
            action: ActionId(action),
            person: Some(0),
        }),
    }
}

fn det(second: u32, b: [f32; 4], action: u16, score: f32) -> Detection {
    Detection {
        key: key(second),
        bbox: bbox(b),
        action: ActionId(action),
        score,
    }
}

/// Classes 1, 2 and 3.
fn labels() -> LabelMap {
    let label = |id: u16, name: &str| Label {
        id: ActionId(id),
        name: name.into(),
        kind: None,
    };
    LabelMap::new(vec![
        label(1, "stand"),
        label(2, "sit"),
        label(3, "talk to"),
    ])
    .unwrap()
}

const A: [f32; 4] = [0.1, 0.1, 0.4, 0.9];
const B: [f32; 4] = [0.5, 0.2, 0.9, 0.8];
const FAR: [f32; 4] = [0.0, 0.0, 0.05, 0.05];

fn ap(report: &EvalReport, id: u16) -> Option<f64> {
    report.classes.iter().find(|c| c.id.0 == id).unwrap().ap
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn perfect_detections_score_one() {
    let g = [gt(902, A, 1), gt(902, B, 2), gt(903, A, 1)];
    let d = [
        det(902, A, 1, 0.9),
        det(902, B, 2, 0.8),
        det(903, A, 1, 0.7),
    ];
    let r = evaluate(&g, &d, &labels(), &[]);
    assert_eq!(r.mean_ap, Some(1.0));
    assert_eq!(
        (ap(&r, 1), ap(&r, 2), ap(&r, 3)),
        (Some(1.0), Some(1.0), None)
    );
    assert_eq!(r.classes_with_ground_truth, 2);
    assert_eq!(r.classes[0].ground_truth, 2);
    assert_eq!(r.classes[0].true_positives, 2);
    assert_eq!(r.frames.ground_truth, 2);
}

#[test]
fn false_positive_ranked_first() {
    // Ranks: FP, TP, TP over 2 boxes. Precision 1/2 then 2/3; the envelope
    // makes both recall steps of 1/2 worth 2/3: AP = 2/3.
    let g = [gt(902, A, 1), gt(903, A, 1)];
    let d = [
        det(902, FAR, 1, 0.9),
        det(902, A, 1, 0.8),
        det(903, A, 1, 0.7),
    ];
    let r = evaluate(&g, &d, &labels(), &[]);
    assert!(close(ap(&r, 1).unwrap(), 2.0 / 3.0), "{r:?}");
}

#[test]
fn duplicate_detection_of_one_box_is_a_false_positive() {
    // TP at 0.9, duplicate FP at 0.8, second box found at 0.7:
    // precisions 1, 1/2, 2/3 -> AP = 1/2 * 1 + 1/2 * 2/3.
    let g = [gt(902, A, 1), gt(903, A, 1)];
    let d = [
        det(902, A, 1, 0.9),
        det(902, [0.11, 0.1, 0.4, 0.9], 1, 0.8),
        det(903, A, 1, 0.7),
    ];
    let r = evaluate(&g, &d, &labels(), &[]);
    assert!(close(ap(&r, 1).unwrap(), 0.5 + 1.0 / 3.0));
    assert_eq!(r.classes[0].detections, 3);
    assert_eq!(r.classes[0].true_positives, 2);
}

#[test]
fn a_detection_only_competes_for_its_best_box() {
    // The second detection overlaps box A best (already taken) and box A2
    // enough, yet the official rule makes it a false positive.
    let a2 = [0.12, 0.1, 0.42, 0.9];
    let g = [gt(902, A, 1), gt(902, a2, 1)];
    let d = [det(902, A, 1, 0.9), det(902, [0.1, 0.1, 0.41, 0.9], 1, 0.8)];
    let r = evaluate(&g, &d, &labels(), &[]);
    assert_eq!(r.classes[0].true_positives, 1);
    assert_eq!(ap(&r, 1), Some(0.5));
}

#[test]
fn iou_just_below_and_above_half() {
    // Ground truth 0.2 x 0.2; a detection of the same width and height h
    // overlaps h / 0.2.
    let g = [gt(902, [0.1, 0.1, 0.3, 0.3], 1)];
    let tp = |y2| {
        let r = evaluate(&g, &[det(902, [0.1, 0.1, 0.3, y2], 1, 0.5)], &labels(), &[]);
        r.classes[0].true_positives == 1
    };
    assert!(!tp(0.199), "IoU 0.495");
    assert!(tp(0.201), "IoU 0.505");
}

#[test]
fn iou_of_exactly_half_follows_the_float64_of_the_text() {
    // In exact arithmetic both detections have IoU 0.5. In float64 from the
    // CSV text (what the official evaluator computes) the first gives
    // 0.5000000000000001 and the second 0.4999999999999999; widening the f32
    // values instead would give the opposite answers.
    let g = [gt(902, [0.1, 0.1, 0.3, 0.3], 1)];
    let tp = |b| {
        let r = evaluate(&g, &[det(902, b, 1, 0.5)], &labels(), &[]);
        r.classes[0].true_positives == 1
    };
    assert!(tp([0.1, 0.1, 0.3, 0.2]));
    assert!(!tp([0.1, 0.2, 0.3, 0.3]));
}

#[test]
fn excluded_frames_leave_ground_truth_and_detections() {
    // Keyframe 903 holds an unfound box and a high-scoring false positive.
    let g = [gt(902, A, 1), gt(903, B, 1)];
    let d = [det(903, FAR, 1, 0.9), det(902, A, 1, 0.8)];
    let all = evaluate(&g, &d, &labels(), &[]);
    // FP then TP over 2 boxes: 1/2 * 1/2.
    assert_eq!(ap(&all, 1), Some(0.25));
    let r = evaluate(&g, &d, &labels(), &[key(903), key(1000)]);
    assert_eq!(ap(&r, 1), Some(1.0));
    assert_eq!(r.classes[0].ground_truth, 1);
    assert_eq!(r.classes[0].detections, 1);
    assert_eq!(r.frames.ground_truth, 1);
    assert_eq!(r.frames.excluded_listed, 2);
    assert_eq!(r.frames.excluded_in_ground_truth, 1);
    assert_eq!(r.frames.excluded_in_detections, 1);
    assert_eq!(r.dropped.excluded_ground_truth, 1);
    assert_eq!(r.dropped.excluded_detections, 1);
}

#[test]
fn classes_without_ground_truth_are_left_out_of_the_mean() {
    // Class 2 has ground truth and no detections: AP 0, counted. Class 3
    // has detections only: no AP, not counted.
    let g = [gt(902, A, 1), gt(902, B, 2)];
    let d = [det(902, A, 1, 0.9), det(902, B, 3, 0.8)];
    let r = evaluate(&g, &d, &labels(), &[]);
    assert_eq!(
        (ap(&r, 1), ap(&r, 2), ap(&r, 3)),
        (Some(1.0), Some(0.0), None)
    );
    assert_eq!(r.mean_ap, Some(0.5));
    assert_eq!(r.classes[2].detections, 1);
    let empty = evaluate(&[], &d, &labels(), &[]);
    assert_eq!(empty.mean_ap, None);
    let json = serde_json::to_value(&empty).unwrap();
    assert!(json["mean_ap"].is_null());
}

#[test]
fn one_box_with_several_actions_is_one_ground_truth_box_per_class() {
    let g = [gt(902, A, 1), gt(902, A, 2), gt(902, A, 3)];
    let d = [
        det(902, A, 1, 0.9),
        det(902, A, 2, 0.8),
        det(902, A, 2, 0.7),
    ];
    let r = evaluate(&g, &d, &labels(), &[]);
    assert_eq!(
        (ap(&r, 1), ap(&r, 2), ap(&r, 3)),
        (Some(1.0), Some(1.0), Some(0.0))
    );
    assert_eq!(
        r.classes[1].true_positives, 1,
        "second class-2 detection is a duplicate"
    );
}

#[test]
fn unscored_classes_are_ignored_everywhere() {
    let g = [gt(902, A, 1), gt(902, B, 7)];
    let d = [det(902, B, 7, 0.99), det(902, A, 1, 0.5)];
    let r = evaluate(&g, &d, &labels(), &[]);
    assert_eq!(ap(&r, 1), Some(1.0));
    assert_eq!(r.dropped.unscored_ground_truth, 1);
    assert_eq!(r.dropped.unscored_detections, 1);
}

#[test]
fn detections_on_keyframes_without_ground_truth_are_false_positives() {
    let g = [gt(902, A, 1)];
    let d = [det(950, A, 1, 0.9), det(902, A, 1, 0.8)];
    let r = evaluate(&g, &d, &labels(), &[]);
    assert_eq!(ap(&r, 1), Some(0.5));
    assert_eq!(r.frames.detections_without_ground_truth, 1);
    assert_eq!(r.frames.with_detections, 2);
}

#[test]
fn only_the_best_fifty_detections_of_a_keyframe_count() {
    // 50 false positives outscore the one true positive.
    let g = [gt(902, A, 1)];
    let mut d: Vec<Detection> = (0..50)
        .map(|i| det(902, FAR, 2, 0.9 - i as f32 * 0.001))
        .collect();
    d.push(det(902, A, 1, 0.1));
    let capped = evaluate(&g, &d, &labels(), &[]);
    assert_eq!(ap(&capped, 1), Some(0.0));
    assert_eq!(capped.dropped.over_frame_cap, 1);
    let all = evaluate_with(&g, &d, &labels(), &[], &EvalOptions::uncapped());
    assert_eq!(ap(&all, 1), Some(1.0));
    assert_eq!(all.dropped.over_frame_cap, 0);
}

#[test]
fn detections_with_empty_boxes_are_ignored() {
    let g = [gt(902, A, 1)];
    let d = [det(902, [0.2, 0.2, 0.2, 0.5], 1, 0.9), det(902, A, 1, 0.8)];
    let r = evaluate(&g, &d, &labels(), &[]);
    assert_eq!(ap(&r, 1), Some(1.0));
    assert_eq!(r.dropped.invalid_box_detections, 1);
    assert_eq!(r.classes[0].detections, 1);
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn files_are_read_with_the_strict_readers() {
    let dir = tempfile::tempdir().unwrap();
    let map = write(
        dir.path(),
        "map.pbtxt",
        "item {\n  name: \"stand\"\n  id: 1\n}\n",
    );
    let gt_csv = write(
        dir.path(),
        "gt.csv",
        &format!("{VIDEO},0902,0.1,0.1,0.4,0.9,1,0\n{VIDEO},0903,0.1,0.1,0.4,0.9,5,0\n"),
    );
    let det_csv = write(
        dir.path(),
        "det.csv",
        &format!("{VIDEO},0902,0.1,0.1,0.4,0.9,1,0.9\n{VIDEO},0904,0.1,0.1,0.4,0.9,1,0.95\n"),
    );
    let ex = write(dir.path(), "ex.csv", &format!("{VIDEO},0904\n"));
    let r = evaluate_files(&gt_csv, &det_csv, &map, Some(&ex), KeyframeRange::AVA).unwrap();
    assert_eq!(r.mean_ap, Some(1.0));
    assert_eq!(r.dropped.unscored_ground_truth, 1);
    let r = evaluate_files(&gt_csv, &det_csv, &map, None, KeyframeRange::AVA).unwrap();
    assert_eq!(r.mean_ap, Some(0.5));

    let bad = write(
        dir.path(),
        "bad.csv",
        &format!("{VIDEO},0902,0.1,0.1,0.4\n"),
    );
    let e = evaluate_files(&gt_csv, &bad, &map, None, KeyframeRange::AVA).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "detections: {}:1: found 5 fields, expected 8",
            bad.display()
        )
    );
}
