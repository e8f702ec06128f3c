//! Test machinery of the library's tests, compiled only for them: one seeded RNG and the one
//! generator of AVA-format CSVs. Random but realistic evaluation inputs: several videos, 1-4
//! people per keyframe with 1-3 actions each, detections that are jittered ground-truth boxes
//! under true and wrong classes plus stray false positives, keyframes with detections only, and
//! distinct scores; and large ground-truth files for the readers.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::path::Path;

use rand::{Rng as _, RngCore as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;

use crate::annotations::{FrameKey, KeyframeRange, VideoId};

/// The repository, whose `tests/data`, `scripts`, `manifests`, `pipelines` and `.venv` the
/// tests read (the library's crate sits two folders down).
pub(crate) fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The tests' one random generator: ChaCha8, seeded, so the same seed gives the same data on
/// every machine.
pub(crate) struct Rng(ChaCha8Rng);

impl Rng {
    pub(crate) fn seeded(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u32, hi: u32) -> u32 {
        self.0.random_range(lo..=hi)
    }

    pub(crate) fn percent(&mut self, p: u32) -> bool {
        self.range(0, 99) < p
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.range(0, items.len() as u32 - 1) as usize]
    }
}

/// A box in thousandths, `x1 < x2` and `y1 < y2`, like AVA's 3-decimal text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MilliBox(pub(crate) [u32; 4]);

impl MilliBox {
    pub(crate) fn random(rng: &mut Rng) -> Self {
        let (x1, x2) = span(rng);
        let (y1, y2) = span(rng);
        Self([x1, y1, x2, y2])
    }

    /// Each coordinate moved by up to `by`, kept inside [0, 1] and non-empty.
    pub(crate) fn jitter(self, rng: &mut Rng, by: u32) -> Self {
        let mut c = self
            .0
            .map(|v| (v + rng.range(0, 2 * by)).saturating_sub(by).min(1000));
        for (lo, hi) in [(0, 2), (1, 3)] {
            if c[lo] >= c[hi] {
                c[lo] = c[hi].min(999);
                c[hi] = c[lo] + 1;
            }
        }
        Self(c)
    }

    /// IoU within 1e-4 of the threshold: mmaction2 computes in float32 and
    /// may fall on the other side there, so comparisons avoid such pairs.
    fn near_half(&self, other: &MilliBox) -> bool {
        let [a, b] = [self.0, other.0].map(|c| c.map(i64::from));
        let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0);
        let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0);
        let inter = iw * ih;
        let area = |c: [i64; 4]| (c[2] - c[0]) * (c[3] - c[1]);
        let union = area(a) + area(b) - inter;
        (2 * inter - union).abs() * 10_000 < 2 * union
    }

    fn csv(&self) -> String {
        let t = |v: u32| format!("{}.{:03}", v / 1000, v % 1000);
        let [x1, y1, x2, y2] = self.0;
        format!("{},{},{},{}", t(x1), t(y1), t(x2), t(y2))
    }
}

fn span(rng: &mut Rng) -> (u32, u32) {
    let lo = rng.range(0, 700);
    (lo, rng.range(lo + 50, 1000))
}

#[derive(Debug, Clone)]
pub(crate) struct GtRow {
    pub(crate) key: FrameKey,
    pub(crate) bbox: MilliBox,
    pub(crate) action: u16,
    pub(crate) person: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct DetRow {
    pub(crate) key: FrameKey,
    pub(crate) bbox: MilliBox,
    pub(crate) action: u16,
    /// Score in millionths, distinct across the set.
    pub(crate) score: u32,
}

/// The scored classes of the generated label map, and ids outside it that
/// the inputs also use.
pub(crate) const SCORED: [u16; 12] = [1, 3, 5, 8, 11, 12, 14, 17, 20, 24, 27, 30];
const UNSCORED: [u16; 3] = [2, 16, 40];

pub(crate) struct Synthetic {
    pub(crate) gt: Vec<GtRow>,
    pub(crate) dets: Vec<DetRow>,
}

pub(crate) fn label_map_pbtxt() -> String {
    let mut out = String::new();
    for id in SCORED {
        let _ = write!(
            out,
            "item {{\n  name: \"action {id}, kind ({id})\"\n  id: {id}\n}}\n"
        );
    }
    out
}

pub(crate) fn random_video(rng: &mut Rng) -> VideoId {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let id: Vec<u8> = (0..11).map(|_| rng.pick(CHARS)).collect();
    VideoId::from_bytes(&id).unwrap()
}

struct Builder {
    rng: Rng,
    pool: Vec<u16>,
    scores: HashSet<u32>,
    out: Synthetic,
}

impl Builder {
    fn score(&mut self) -> u32 {
        loop {
            let s = self.rng.range(1, 999_999);
            if self.scores.insert(s) {
                return s;
            }
        }
    }

    /// A jittered copy of `of` that is not near IoU 0.5 with any box of `frame_gt`.
    fn jittered(&mut self, of: MilliBox, frame_gt: &[MilliBox]) -> MilliBox {
        loop {
            let by = if self.rng.percent(70) { 30 } else { 120 };
            let b = of.jitter(&mut self.rng, by);
            if !frame_gt.iter().any(|g| b.near_half(g)) {
                return b;
            }
        }
    }

    fn stray(&mut self, frame_gt: &[MilliBox]) -> MilliBox {
        let b = MilliBox::random(&mut self.rng);
        self.jittered(b, frame_gt)
    }

    fn detect(&mut self, key: FrameKey, bbox: MilliBox, action: u16) {
        let score = self.score();
        self.out.dets.push(DetRow {
            key,
            bbox,
            action,
            score,
        });
    }

    /// A crowded keyframe has 4 people and more detections than the
    /// official cap of 50 keeps.
    fn frame(&mut self, key: FrameKey, crowded: bool) {
        let count = if crowded { 4 } else { self.rng.range(1, 4) };
        let people: Vec<(MilliBox, Vec<u16>)> = (0..count)
            .map(|_| (MilliBox::random(&mut self.rng), self.actions()))
            .collect();
        let boxes: Vec<MilliBox> = people.iter().map(|p| p.0).collect();
        for (person, (bbox, actions)) in people.iter().enumerate() {
            for &action in actions {
                self.out.gt.push(GtRow {
                    key,
                    bbox: *bbox,
                    action,
                    person: person as u32,
                });
            }
            let extra = if crowded { 20 } else { self.rng.range(0, 18) };
            self.person_detections(key, *bbox, actions, &boxes, extra);
        }
        for _ in 0..self.rng.range(0, 3) {
            let b = self.stray(&boxes);
            let action = self.rng.pick(&self.pool);
            self.detect(key, b, action);
        }
    }

    fn actions(&mut self) -> Vec<u16> {
        let mut actions = Vec::new();
        for _ in 0..self.rng.range(1, 3) {
            let a = self.rng.pick(&self.pool);
            if !actions.contains(&a) {
                actions.push(a);
            }
        }
        actions
    }

    fn person_detections(
        &mut self,
        key: FrameKey,
        bbox: MilliBox,
        actions: &[u16],
        all: &[MilliBox],
        extra: u32,
    ) {
        for &action in actions {
            if self.rng.percent(85) {
                let b = self.jittered(bbox, all);
                self.detect(key, b, action);
            }
        }
        for _ in 0..extra {
            let b = self.jittered(bbox, all);
            let action = self.rng.pick(&self.pool);
            self.detect(key, b, action);
        }
    }

    /// mmaction2 leaves out classes without detections, so give every
    /// class with ground truth at least one.
    fn cover_every_class(&mut self) {
        let detected: HashSet<u16> = self.out.dets.iter().map(|d| d.action).collect();
        let mut first: HashMap<u16, (FrameKey, MilliBox)> = HashMap::new();
        for g in &self.out.gt {
            first.entry(g.action).or_insert((g.key, g.bbox));
        }
        let mut missing: Vec<_> = first
            .into_iter()
            .filter(|(a, _)| !detected.contains(a))
            .collect();
        missing.sort_by_key(|(a, _)| *a);
        for (action, (key, bbox)) in missing {
            self.detect(key, bbox, action);
        }
    }
}

/// `videos` videos of `frames` keyframes each, deterministic in `seed`.
pub(crate) fn generate(seed: u64, videos: u32, frames: u32) -> Synthetic {
    let mut b = Builder {
        rng: Rng::seeded(seed),
        pool: SCORED.iter().chain(&UNSCORED).copied().collect(),
        scores: HashSet::new(),
        out: Synthetic {
            gt: Vec::new(),
            dets: Vec::new(),
        },
    };
    for _ in 0..videos {
        let video = random_video(&mut b.rng);
        let mut second = 902;
        for i in 0..frames {
            second += b.rng.range(1, 3);
            b.frame(FrameKey { video, second }, i == 0);
        }
        // Keyframes the ground truth never mentions: all false positives.
        for _ in 0..2 {
            second += b.rng.range(1, 3);
            let key = FrameKey { video, second };
            let stray = b.stray(&[]);
            let action = b.rng.pick(&SCORED);
            b.detect(key, stray, action);
        }
    }
    b.cover_every_class();
    b.out
}

pub(crate) fn gt_csv<'a>(rows: impl IntoIterator<Item = &'a GtRow>) -> String {
    let mut out = String::new();
    for r in rows {
        let _ = writeln!(out, "{},{},{},{}", r.key, r.bbox.csv(), r.action, r.person);
    }
    out
}

pub(crate) fn det_csv<'a>(rows: impl IntoIterator<Item = &'a DetRow>) -> String {
    let mut out = String::new();
    for r in rows {
        let s = r.score;
        let _ = writeln!(out, "{},{},{},0.{s:06}", r.key, r.bbox.csv(), r.action);
    }
    out
}

pub(crate) fn keys_csv<'a>(keys: impl IntoIterator<Item = &'a FrameKey>) -> String {
    keys.into_iter().map(|k| format!("{k}\n")).collect()
}

/// The `cap` best-scoring detections of scored classes per keyframe: what
/// the official evaluator keeps.
pub(crate) fn best_per_frame(dets: &[DetRow], cap: usize) -> Vec<DetRow> {
    let mut by_frame: HashMap<FrameKey, Vec<&DetRow>> = HashMap::new();
    for d in dets.iter().filter(|d| SCORED.contains(&d.action)) {
        by_frame.entry(d.key).or_default().push(d);
    }
    let mut out = Vec::new();
    for mut frame in by_frame.into_values() {
        frame.sort_by_key(|d| std::cmp::Reverse(d.score));
        out.extend(frame.into_iter().take(cap).cloned());
    }
    out
}

/// Valid 8-field ground-truth CSV with exactly `rows` rows, in AVA's order (video, second,
/// person) with 1-4 people per keyframe and 1-3 actions each, all within
/// [`KeyframeRange::AVA`]. Same `seed`, same bytes.
pub(crate) fn generate_ground_truth_csv(rows: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::seeded(seed);
    let mut out = String::with_capacity(rows * 48);
    let mut written = 0;
    let range = KeyframeRange::AVA;
    while written < rows {
        let video = random_video(&mut rng);
        for second in range.first()..=range.last() {
            for person in 0..rng.range(1, 4) {
                let bbox = MilliBox::random(&mut rng);
                let first_action = rng.range(1, 78);
                for action in first_action..=first_action + rng.range(0, 2) {
                    if written == rows {
                        return out.into_bytes();
                    }
                    let _ = writeln!(out, "{video},{second:04},{},{action},{person}", bbox.csv());
                    written += 1;
                }
            }
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_rows_parse_and_are_deterministic() {
        use crate::annotations::{ReadOptions, parse_ground_truth};
        let bytes = generate_ground_truth_csv(5_000, 7);
        assert_eq!(bytes, generate_ground_truth_csv(5_000, 7));
        assert_ne!(bytes, generate_ground_truth_csv(5_000, 8));
        let rows = parse_ground_truth(&bytes, "gen.csv", &ReadOptions::AVA).unwrap();
        assert_eq!(rows.len(), 5_000);
        assert!(rows.iter().all(|r| r.entry.is_some()));
        assert!(
            rows.windows(2)
                .all(|w| w[0].key.second <= w[1].key.second || w[0].key.video != w[1].key.video)
        );
        assert!(generate_ground_truth_csv(0, 1).is_empty());
    }
}
