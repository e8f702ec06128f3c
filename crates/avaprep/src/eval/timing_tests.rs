//! Full-size timing: about 10^5 ground-truth rows and every person box
//! under all 80 classes as detections (PySlowFast's output shape). Ignored
//! by default; run with
//! `cargo test --release --lib timing -- --ignored --nocapture`.

use std::fmt::Write;
use std::time::Instant;

use super::*;
use crate::annotations::{ActionId, GroundTruthBox, Label, NormBox};
use crate::testing::{self, MilliBox, Rng};

fn norm(b: MilliBox) -> NormBox {
    let [x1, y1, x2, y2] = b.0.map(|v| v as f32 / 1000.0);
    NormBox::new(x1, y1, x2, y2).unwrap()
}

struct FullSize {
    gt: Vec<GroundTruthRow>,
    dets: Vec<Detection>,
}

/// `videos` videos of 897 keyframes, 1-3 people with 1-3 actions each.
fn full_size(videos: u32) -> FullSize {
    let mut rng = Rng::seeded(77);
    let (mut gt, mut dets) = (Vec::new(), Vec::new());
    for _ in 0..videos {
        let video = testing::random_video(&mut rng);
        for second in KeyframeRange::AVA.first()..=KeyframeRange::AVA.last() {
            let key = FrameKey { video, second };
            for person in 0..rng.range(1, 3) {
                let bbox = MilliBox::random(&mut rng);
                for _ in 0..rng.range(1, 3) {
                    let entry = GroundTruthBox {
                        bbox: norm(bbox),
                        action: ActionId(rng.range(1, 80) as u16),
                        person: Some(person),
                    };
                    gt.push(GroundTruthRow {
                        key,
                        entry: Some(entry),
                    });
                }
                let detected = norm(bbox.jitter(&mut rng, 40));
                for action in 1..=80 {
                    let score = (rng.next() % 1_000_000) as f32 / 1e6;
                    dets.push(Detection {
                        key,
                        bbox: detected,
                        action: ActionId(action),
                        score,
                    });
                }
            }
        }
    }
    FullSize { gt, dets }
}

fn all_80_classes() -> LabelMap {
    let labels = (1..=80)
        .map(|id| Label {
            id: ActionId(id),
            name: format!("action {id}"),
            kind: None,
        })
        .collect();
    LabelMap::new(labels).unwrap()
}

#[test]
#[ignore = "full-size timing; run in release"]
fn timing_five_million_detections() {
    let data = full_size(35);
    let labels = all_80_classes();
    let excluded: Vec<FrameKey> = data.gt.iter().step_by(3000).map(|r| r.key).collect();
    eprintln!(
        "{} ground-truth rows, {} detections",
        data.gt.len(),
        data.dets.len()
    );
    for options in [EvalOptions::OFFICIAL, EvalOptions::uncapped()] {
        let start = Instant::now();
        let r = evaluate_with(&data.gt, &data.dets, &labels, &excluded, &options);
        eprintln!(
            "evaluate (cap {:?}): {:.2?}, mAP {:.4}",
            options.max_detections_per_frame,
            start.elapsed(),
            r.mean_ap.unwrap()
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let mut text = String::with_capacity(data.dets.len() * 52);
    for d in &data.dets {
        let [x1, y1, x2, y2] = d.bbox.to_array();
        let _ = writeln!(
            text,
            "{},{x1:.3},{y1:.3},{x2:.3},{y2:.3},{},{:.4}",
            d.key, d.action, d.score
        );
    }
    let det_path = dir.path().join("det.csv");
    std::fs::write(&det_path, text).unwrap();
    let mut gt_text = String::new();
    for g in &data.gt {
        let e = g.entry.unwrap();
        let [x1, y1, x2, y2] = e.bbox.to_array();
        let _ = writeln!(
            gt_text,
            "{},{x1:.3},{y1:.3},{x2:.3},{y2:.3},{},0",
            g.key, e.action
        );
    }
    let gt_path = dir.path().join("gt.csv");
    std::fs::write(&gt_path, gt_text).unwrap();
    let map_path = dir.path().join("map.pbtxt");
    let pbtxt: String = (1..=80)
        .map(|id| format!("item {{\n  name: \"action {id}\"\n  id: {id}\n}}\n"))
        .collect();
    std::fs::write(&map_path, pbtxt).unwrap();
    eprintln!("writing the CSVs: {:.2?}", start.elapsed());
    let start = Instant::now();
    let map = read_label_map(&map_path).unwrap();
    let scored = map.len();
    let r = evaluate_files(&gt_path, &det_path, &map_path, None, KeyframeRange::AVA).unwrap();
    eprintln!(
        "evaluate_files ({scored} scored classes, reading included): {:.2?}, mAP {:.4}",
        start.elapsed(),
        r.mean_ap.unwrap()
    );
}
