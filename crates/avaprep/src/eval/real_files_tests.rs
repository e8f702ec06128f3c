//! The official label maps and the first rows of the real val ground truth
//! and PySlowFast's person boxes, copied into `tests/data/ava/`.

use std::collections::HashSet;
use std::path::PathBuf;

use super::reference_tests::{assert_agrees, reference, write};
use super::*;
use crate::annotations::{ActionId, BoxLabel, read_predicted_boxes};
use crate::testing::Rng;

/// Copies of official AVA files, kept in the repository (see `tests/data/ava/README.md`).
fn ava(name: &str) -> PathBuf {
    crate::testing::repo_root()
        .join("tests/data/ava")
        .join(name)
}

const SCORED_MAP: &str = "ava_action_list_v2.2_for_activitynet_2019.pbtxt";
const GT_ROWS: &str = "ava_val_v2.2.first50.csv";

fn ground_truth() -> Vec<GroundTruthRow> {
    read_ground_truth(&ava(GT_ROWS), &ReadOptions::AVA).unwrap()
}

/// Ground truth handed back as detections, with distinct scores.
fn as_detections(rows: &[GroundTruthRow]) -> Vec<Detection> {
    rows.iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let e = r.entry?;
            Some(Detection {
                key: r.key,
                bbox: e.bbox,
                action: e.action,
                score: 1.0 - i as f32 * 0.001,
            })
        })
        .collect()
}

#[test]
fn ground_truth_as_detections_scores_one_with_both_label_maps() {
    let rows = ground_truth();
    let dets = as_detections(&rows);
    for (map_file, classes) in [(SCORED_MAP, 60), ("ava_action_list_v2.2.pbtxt", 80)] {
        let labels = read_label_map(&ava(map_file)).unwrap();
        assert_eq!(labels.len(), classes);
        let r = evaluate(&rows, &dets, &labels, &[]);
        assert_eq!(r.mean_ap, Some(1.0), "{map_file}");
        assert_eq!(r.classes.len(), classes);
        let scored: HashSet<ActionId> = rows
            .iter()
            .filter_map(|r| r.entry.map(|e| e.action))
            .filter(|&a| labels.contains(a))
            .collect();
        assert_eq!(r.classes_with_ground_truth, scored.len(), "{map_file}");
        let frames: HashSet<FrameKey> = rows.iter().map(|r| r.key).collect();
        assert_eq!(r.frames.ground_truth, frames.len());
    }
}

/// Every PySlowFast person box under every scored class, as its detection
/// files are (distinct random scores stand in for the model's).
fn person_boxes_times_classes(labels: &LabelMap) -> String {
    let boxes = read_predicted_boxes(
        &ava("ava_val_predicted_boxes.first30.csv"),
        &ReadOptions::AVA,
    )
    .unwrap();
    let mut rng = Rng::seeded(2019);
    let mut seen = HashSet::new();
    let mut out = String::new();
    for b in &boxes {
        assert_eq!(b.label, BoxLabel::Unlabelled);
        let [x1, y1, x2, y2] = b.bbox.to_array();
        for id in labels.ids() {
            let score = loop {
                let s = rng.range(1, 999_999);
                if seen.insert(s) {
                    break s;
                }
            };
            out += &format!(
                "{},{x1:.3},{y1:.3},{x2:.3},{y2:.3},{id},0.{score:06}\n",
                b.key
            );
        }
    }
    out
}

#[test]
fn real_person_boxes_agree_with_mmaction2() {
    let dir = tempfile::tempdir().unwrap();
    let labels = read_label_map(&ava(SCORED_MAP)).unwrap();
    std::fs::copy(ava(SCORED_MAP), dir.path().join("map.pbtxt")).unwrap();
    let gt_text = std::fs::read_to_string(ava(GT_ROWS)).unwrap();
    let det_text = person_boxes_times_classes(&labels);
    let det_path = write(dir.path(), "det.csv", &det_text);
    let run = |options| {
        evaluate_files_with(
            &ava(GT_ROWS),
            &det_path,
            &ava(SCORED_MAP),
            None,
            KeyframeRange::AVA,
            &options,
        )
        .unwrap()
    };
    let Some(theirs) = reference(dir.path(), &gt_text, &det_text) else {
        return;
    };
    let ours = run(EvalOptions::uncapped());
    assert!(ours.mean_ap.unwrap() > 0.0);
    assert_agrees(&ours, &theirs, "real val rows, uncapped");
    let capped = run(EvalOptions::OFFICIAL);
    assert!(capped.dropped.over_frame_cap > 0);
    eprintln!("real val rows, capped: mAP {:?}", capped.mean_ap);
}
