//! Agreement with mmaction2's copy of the ActivityNet evaluator, run through
//! `scripts/reference_ava_eval.py` on random sets written to a temp dir.
//!
//! mmaction2 deviates from the official rules in ways the inputs are shaped
//! around (see the script's docs): exclusions and the 50-per-keyframe cap are
//! applied to the files it is given, every class with ground truth has a
//! detection, and no IoU lies within 1e-4 of 0.5.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::*;
use crate::testing::{self, DetRow, Synthetic};

const TOLERANCE: f64 = 1e-6;

fn script() -> PathBuf {
    testing::repo_root().join("scripts/reference_ava_eval.py")
}

/// The reference's JSON for the label map at `dir/map.pbtxt`, or `None`
/// (after saying so loudly) without Python.
pub(super) fn reference(dir: &Path, gt: &str, dets: &str) -> Option<Value> {
    let python = testing::repo_root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup.sh",
        python.display()
    );
    let gt_path = write(dir, "ref_gt.csv", gt);
    let det_path = write(dir, "ref_det.csv", dets);
    let output = Command::new(&python)
        .arg(script())
        .args([dir.join("map.pbtxt"), gt_path, det_path])
        .output()
        .expect("run the reference script");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "reference failed:\n{stderr}");
    Some(serde_json::from_slice(&output.stdout).expect("reference JSON"))
}

pub(super) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Every class with ground truth has the reference's AP, and the mean too.
pub(super) fn assert_agrees(ours: &EvalReport, theirs: &Value, what: &str) {
    let theirs_ap = |id: u16| {
        theirs["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .and_then(|c| c["ap"].as_f64())
    };
    let mut worst = 0.0f64;
    for c in &ours.classes {
        match (c.ap, theirs_ap(c.id.0)) {
            (Some(a), Some(b)) => {
                assert!(
                    (a - b).abs() <= TOLERANCE,
                    "{what}: class {} AP {a} vs reference {b}",
                    c.id
                );
                worst = worst.max((a - b).abs());
            }
            (None, None) => {}
            (a, b) => panic!("{what}: class {} AP {a:?} vs reference {b:?}", c.id),
        }
    }
    let (a, b) = (ours.mean_ap.unwrap(), theirs["mean_ap"].as_f64().unwrap());
    assert!(
        (a - b).abs() <= TOLERANCE,
        "{what}: mAP {a} vs reference {b}"
    );
    eprintln!(
        "{what}: mAP {a:.9} = reference {b:.9} ({} classes, largest AP difference {worst:.1e})",
        ours.classes_with_ground_truth
    );
}

struct Case {
    dir: tempfile::TempDir,
    set: Synthetic,
}

impl Case {
    fn new(seed: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let set = testing::generate(seed, 3 + (seed % 3) as u32, 25);
        write(dir.path(), "map.pbtxt", &testing::label_map_pbtxt());
        write(dir.path(), "gt.csv", &testing::gt_csv(&set.gt));
        write(dir.path(), "det.csv", &testing::det_csv(&set.dets));
        Self { dir, set }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Ours, through the file readers.
    fn ours(&self, exclusions: Option<&Path>, options: &EvalOptions) -> EvalReport {
        evaluate_files_with(
            &self.path("gt.csv"),
            &self.path("det.csv"),
            &self.path("map.pbtxt"),
            exclusions,
            KeyframeRange::AVA,
            options,
        )
        .unwrap()
    }

    /// Some keyframes with ground truth, one with detections only, and one
    /// that neither file mentions.
    fn exclusions(&self, seed: u64) -> Vec<FrameKey> {
        let mut rng = testing::Rng::seeded(seed ^ 0xE5C1);
        let gt_keys: HashSet<FrameKey> = self.set.gt.iter().map(|g| g.key).collect();
        let mut keys: Vec<FrameKey> = gt_keys.iter().copied().collect();
        keys.sort();
        keys.retain(|_| rng.percent(12));
        keys.extend(
            self.set
                .dets
                .iter()
                .map(|d| d.key)
                .find(|k| !gt_keys.contains(k)),
        );
        keys.push(FrameKey {
            video: testing::random_video(&mut rng),
            second: 1500,
        });
        keys.sort();
        keys
    }
}

fn check_seed(seed: u64) {
    let case = Case::new(seed);
    let dir = case.dir.path();
    let gt_all = testing::gt_csv(&case.set.gt);
    let det_all = testing::det_csv(&case.set.dets);
    let Some(plain) = reference(dir, &gt_all, &det_all) else {
        return;
    };
    let ours = case.ours(None, &EvalOptions::uncapped());
    assert!(
        ours.dropped.unscored_ground_truth > 0 && ours.frames.detections_without_ground_truth > 0
    );
    assert_agrees(&ours, &plain, &format!("seed {seed}, uncapped"));

    // The official cap: give the reference the 50 best per keyframe.
    let capped = testing::best_per_frame(&case.set.dets, OFFICIAL_DETECTIONS_PER_FRAME);
    let theirs = reference(dir, &gt_all, &testing::det_csv(&capped)).unwrap();
    let ours = case.ours(None, &EvalOptions::OFFICIAL);
    assert!(
        ours.dropped.over_frame_cap > 0,
        "the cap should matter in seed {seed}"
    );
    assert_agrees(&ours, &theirs, &format!("seed {seed}, capped"));

    // Exclusions: give the reference files without the excluded keyframes.
    let excluded = case.exclusions(seed);
    let ex_path = write(dir, "excluded.csv", &testing::keys_csv(&excluded));
    let kept = |k: &FrameKey| excluded.binary_search(k).is_err();
    let gt_kept = testing::gt_csv(case.set.gt.iter().filter(|g| kept(&g.key)));
    let dets_kept: Vec<DetRow> = case
        .set
        .dets
        .iter()
        .filter(|d| kept(&d.key))
        .cloned()
        .collect();
    let theirs = reference(dir, &gt_kept, &testing::det_csv(&dets_kept)).unwrap();
    let ours = case.ours(Some(&ex_path), &EvalOptions::uncapped());
    assert!(ours.frames.excluded_in_ground_truth > 0 && ours.frames.excluded_in_detections > 0);
    assert_agrees(&ours, &theirs, &format!("seed {seed}, exclusions"));
}

#[test]
fn agrees_with_mmaction2_seed_1() {
    check_seed(1);
}

#[test]
fn agrees_with_mmaction2_seed_2() {
    check_seed(2);
}

#[test]
fn agrees_with_mmaction2_seed_3() {
    check_seed(3);
}

#[test]
fn agrees_with_mmaction2_seed_4() {
    check_seed(4);
}

#[test]
fn generated_sets_look_like_ava() {
    let set = testing::generate(9, 4, 25);
    let frames: HashSet<FrameKey> = set.gt.iter().map(|g| g.key).collect();
    assert_eq!(frames.len(), 100);
    let boxes: HashSet<(FrameKey, u32)> = set.gt.iter().map(|g| (g.key, g.person)).collect();
    assert!(
        set.gt.len() > boxes.len(),
        "some people have several actions"
    );
    assert!(
        boxes.len() > frames.len(),
        "some keyframes have several people"
    );
    let scores: HashSet<u32> = set.dets.iter().map(|d| d.score).collect();
    assert_eq!(scores.len(), set.dets.len(), "distinct scores");
}
