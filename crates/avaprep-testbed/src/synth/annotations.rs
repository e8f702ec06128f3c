//! Annotation files in the exact AVA 2.2 formats (see ava-data.md §2), built from the plan.

use std::fmt::Write as _;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::plan::{ACTIONS, Action, DatasetPlan, Split, VideoSpec};
use super::scene::visible_box;

/// Share of the actor's full width and height that must be in the frame for it to be boxed;
/// slivers at the edge are left out, as AVA annotators leave out barely visible people.
const MIN_VISIBLE: f64 = 0.15;

/// One ground-truth person box at a keyframe, normalised to [0, 1].
#[derive(Clone, Debug, PartialEq)]
pub struct GtBox {
    pub person_id: u32,
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
    pub motion: Action,
    pub spin: bool,
}

impl GtBox {
    pub fn action_ids(&self) -> Vec<u32> {
        let mut ids = vec![self.motion.id()];
        if self.spin {
            ids.push(Action::Spin.id());
        }
        ids
    }

    /// The box as AVA writes it: 3 decimals.
    fn text(&self) -> String {
        box_text(self.x1, self.y1, self.x2, self.y2)
    }
}

fn box_text(x1: f64, y1: f64, x2: f64, y2: f64) -> String {
    format!("{x1:.3},{y1:.3},{x2:.3},{y2:.3}")
}

/// Boxes of the actors visible at AVA second `t`, describing them at exactly that time.
pub fn gt_boxes(spec: &VideoSpec, t: u32) -> Vec<GtBox> {
    let (w, h) = (spec.width as f64, spec.height as f64);
    let mut out = Vec::new();
    for actor in &spec.actors {
        let Some(state) = spec.actor_state(actor, t as f64) else {
            continue;
        };
        let Some(b) = visible_box(spec, actor, &state) else {
            continue;
        };
        let min_w = (MIN_VISIBLE * 2.0 * state.half_w).max(8.0);
        let min_h = (MIN_VISIBLE * 2.0 * state.half_h).max(8.0);
        if ((b.x1 - b.x0) as f64) < min_w || ((b.y1 - b.y0) as f64) < min_h {
            continue;
        }
        out.push(GtBox {
            person_id: actor.person_id,
            x1: b.x0 as f64 / w,
            y1: b.y0 as f64 / h,
            x2: b.x1 as f64 / w,
            y2: b.y1 as f64 / h,
            motion: state.motion,
            spin: state.spin,
        });
    }
    out
}

/// Contents of every annotation file, keyed by the official file names.
pub struct AnnotationTexts {
    pub files: Vec<(&'static str, String)>,
    pub det_train: String,
    pub det_val: String,
    pub trainval_names: String,
    pub test_names: String,
}

pub const GT_TRAIN: &str = "ava_train_v2.2.csv";
pub const GT_VAL: &str = "ava_val_v2.2.csv";
pub const EXCL_TRAIN: &str = "ava_train_excluded_timestamps_v2.2.csv";
pub const EXCL_VAL: &str = "ava_val_excluded_timestamps_v2.2.csv";
pub const EXCL_TEST: &str = "ava_test_excluded_timestamps_v2.2.csv";
pub const LABELS: &str = "ava_action_list_v2.2.pbtxt";
pub const LABELS_SCORED: &str = "ava_action_list_v2.2_for_activitynet_2019.pbtxt";
pub const INCLUDED: &str = "ava_included_timestamps_v2.2.txt";
pub const TEST_IDS: &str = "ava_test_v2.2.txt";

impl AnnotationTexts {
    pub fn build(plan: &DatasetPlan) -> Self {
        // Official files list videos in id order; so do these.
        let mut videos: Vec<&VideoSpec> = plan.videos.iter().collect();
        videos.sort_by(|a, b| a.id.cmp(&b.id));
        let of = |split: Split| -> Vec<&VideoSpec> {
            videos
                .iter()
                .copied()
                .filter(|v| v.split == split)
                .collect()
        };
        let (train, val, test) = (of(Split::Train), of(Split::Val), of(Split::Test));
        let files = vec![
            (LABELS, label_map()),
            (LABELS_SCORED, scored_label_map()),
            (INCLUDED, included(plan)),
            (EXCL_TEST, excluded(plan, &test)),
            (TEST_IDS, lines(test.iter().map(|v| v.id.clone()))),
            (EXCL_TRAIN, excluded(plan, &train)),
            (GT_TRAIN, ground_truth(&train, plan.video_start)),
            (EXCL_VAL, excluded(plan, &val)),
            (GT_VAL, ground_truth(&val, plan.video_start)),
        ];
        let mut trainval: Vec<String> = train.iter().chain(&val).map(|v| v.file_name()).collect();
        trainval.sort();
        AnnotationTexts {
            files,
            det_train: detections(&train, true, plan.video_start),
            det_val: detections(&val, false, plan.video_start),
            trainval_names: lines(trainval.into_iter()),
            test_names: lines(test.iter().map(|v| v.file_name())),
        }
    }
}

fn lines(items: impl Iterator<Item = String>) -> String {
    items.map(|s| s + "\n").collect()
}

fn label_map() -> String {
    let mut s = String::new();
    for &(_, id, name, label_type, _) in &ACTIONS {
        let _ = write!(
            s,
            "label {{\n  name: \"{name}\"\n  label_id: {id}\n  label_type: {label_type}\n}}\n"
        );
    }
    s
}

fn scored_label_map() -> String {
    let mut s = String::new();
    for &(_, id, name, _, scored) in &ACTIONS {
        if scored {
            let _ = write!(s, "item {{\n  name: \"{name}\"\n  id: {id}\n}}\n");
        }
    }
    s
}

fn included(plan: &DatasetPlan) -> String {
    let t = &plan.times;
    let start = plan.video_start;
    lines((t.first_keyframe + start..=t.last_keyframe + start).map(|s| format!("{s:04}")))
}

fn excluded(plan: &DatasetPlan, videos: &[&VideoSpec]) -> String {
    let mut s = String::new();
    for v in videos {
        for &(_, t) in plan.excluded.iter().filter(|e| e.0 == v.index) {
            let _ = writeln!(s, "{},{:04}", v.id, t + plan.video_start);
        }
    }
    s
}

fn keyframes(v: &VideoSpec) -> impl Iterator<Item = u32> {
    let (first, last) = v.keyframes.unwrap_or((1, 0));
    first..=last
}

/// Rows on the dataset's clock: the file's second `t` is the dataset's `t + video_start`.
fn ground_truth(videos: &[&VideoSpec], video_start: u32) -> String {
    let mut s = String::new();
    for v in videos {
        for t in keyframes(v) {
            let second = t + video_start;
            for b in gt_boxes(v, t) {
                for action in b.action_ids() {
                    let _ = writeln!(
                        s,
                        "{},{second:04},{},{action},{}",
                        v.id,
                        b.text(),
                        b.person_id
                    );
                }
            }
        }
    }
    s
}

/// Person-detector boxes: jittered ground truth (some missed) plus false positives. In the
/// train file a box takes its ground truth's labels when IoU >= 0.9, else `-1` (the PySlowFast
/// `include_negative` convention); val boxes have an empty label column.
fn detections(videos: &[&VideoSpec], with_labels: bool, video_start: u32) -> String {
    let mut s = String::new();
    for v in videos {
        let mut rng = ChaCha20Rng::seed_from_u64(v.seed ^ 0x6465_7465_6374);
        for t in keyframes(v) {
            let second = t + video_start;
            for det in detect_keyframe(&mut rng, &gt_boxes(v, t)) {
                let labels: Vec<String> = match (&det.matched, with_labels) {
                    (_, false) => vec![String::new()],
                    (Some(ids), true) => ids.iter().map(u32::to_string).collect(),
                    (None, true) => vec!["-1".into()],
                };
                for label in labels {
                    let _ = writeln!(
                        s,
                        "{},{second:04},{},{label},{:.6}",
                        v.id, det.text, det.score
                    );
                }
            }
        }
    }
    s
}

struct Detection {
    text: String,
    score: f64,
    matched: Option<Vec<u32>>,
}

fn detect_keyframe(rng: &mut ChaCha20Rng, gts: &[GtBox]) -> Vec<Detection> {
    let mut out = Vec::new();
    for gt in gts {
        if rng.random_bool(0.1) {
            continue; // missed person
        }
        let (w, h) = (gt.x2 - gt.x1, gt.y2 - gt.y1);
        let mut j =
            |v: f64, scale: f64| (v + rng.random_range(-0.04..0.04) * scale).clamp(0.0, 1.0);
        let b = [j(gt.x1, w), j(gt.y1, h), j(gt.x2, w), j(gt.y2, h)];
        let b = rounded(b);
        let iou = avaprep::annotations::iou(&b, &rounded([gt.x1, gt.y1, gt.x2, gt.y2]));
        out.push(Detection {
            text: box_text(b[0], b[1], b[2], b[3]),
            score: rng.random_range(0.55..1.0),
            matched: (iou >= 0.9).then(|| gt.action_ids()),
        });
    }
    if rng.random_bool(0.3) {
        let (w, h) = (rng.random_range(0.08..0.3), rng.random_range(0.15..0.5));
        let (x, y) = (
            rng.random_range(0.0..1.0 - w),
            rng.random_range(0.05..1.0 - h),
        );
        out.push(Detection {
            text: box_text(x, y, x + w, y + h),
            score: rng.random_range(0.02..0.7),
            matched: None,
        });
    }
    out
}

/// The box as a reader sees it after the 3-decimal text round trip.
fn rounded(b: [f64; 4]) -> [f64; 4] {
    b.map(|v| (v * 1000.0).round() / 1000.0)
}
