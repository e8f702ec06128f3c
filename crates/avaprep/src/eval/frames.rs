//! Turning rows into per-keyframe groups: exclusions and unscored classes
//! are dropped here, each keyframe gets a dense id, and both inputs are
//! bucketed by keyframe so matching never looks beyond one keyframe.

use std::collections::{HashMap, HashSet};

use crate::annotations::{ActionId, Detection, FrameKey, GroundTruthRow, LabelMap, NormBox};

use super::EvalOptions;
use super::report::{DroppedRows, FrameCounts};

/// Dense class indices in label-map order, looked up by action id.
pub(super) struct ClassIndex {
    /// `slot[id]` is the class index plus one; 0 means not scored.
    slot: Vec<u16>,
    len: usize,
}

impl ClassIndex {
    pub(super) fn new(labels: &LabelMap) -> Self {
        let max = labels.ids().map(|a| usize::from(a.0)).max().unwrap_or(0);
        let mut slot = vec![0u16; max + 1];
        for (i, id) in labels.ids().enumerate() {
            // A LabelMap holds at most u16::MAX labels, so this fits.
            slot[usize::from(id.0)] = (i + 1) as u16;
        }
        Self {
            slot,
            len: labels.len(),
        }
    }

    pub(super) fn of(&self, id: ActionId) -> Option<u16> {
        let s = *self.slot.get(usize::from(id.0))?;
        s.checked_sub(1)
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }
}

/// A box as `[x1, y1, x2, y2]` in f64.
pub(super) type Bbox = [f64; 4];

/// The f64 value of the decimal text a reader turned into this f32.
///
/// The official evaluator computes IoU in float64 from the CSV text, and
/// IoU == 0.5 exactly is common with 3-decimal boxes; widening the f32 would
/// land on the other side of the threshold in some of those cases. Dividing
/// the integer `k` by `10^d` is correctly rounded, so it equals Python's
/// `float("0.123")` whenever the text had at most 6 decimals.
pub(super) fn decimal_value(x: f32) -> f64 {
    const SCALES: [f64; 6] = [1e1, 1e2, 1e3, 1e4, 1e5, 1e6];
    let wide = f64::from(x);
    for scale in SCALES {
        let candidate = (wide * scale).round() / scale;
        if candidate as f32 == x {
            return candidate;
        }
    }
    wide
}

pub(super) fn decimal_box(b: &NormBox) -> Bbox {
    b.to_array().map(decimal_value)
}

#[derive(Debug, Clone, Copy)]
pub(super) struct GtBox {
    pub(super) class: u16,
    pub(super) bbox: Bbox,
}

/// Both inputs bucketed by keyframe id.
pub(super) struct Grouped<'a> {
    pub(super) detections: &'a [Detection],
    /// Ground truth of keyframe `f` is `gt[gt_start[f]..gt_start[f + 1]]`,
    /// sorted by class, file order within a class.
    pub(super) gt: Vec<GtBox>,
    pub(super) gt_start: Vec<usize>,
    /// Indices into `detections`, keyframe by keyframe in file order; bounds
    /// in `det_start` like `gt_start`.
    pub(super) det_order: Vec<u32>,
    pub(super) det_start: Vec<usize>,
    pub(super) gt_per_class: Vec<usize>,
    pub(super) max_per_frame: Option<usize>,
    pub(super) frames: FrameCounts,
    pub(super) dropped: DroppedRows,
}

impl Grouped<'_> {
    pub(super) fn frame_count(&self) -> usize {
        self.gt_start.len() - 1
    }

    pub(super) fn gt_of(&self, frame: usize) -> &[GtBox] {
        &self.gt[self.gt_start[frame]..self.gt_start[frame + 1]]
    }

    pub(super) fn detections_of(&self, frame: usize) -> impl Iterator<Item = &Detection> {
        self.det_order[self.det_start[frame]..self.det_start[frame + 1]]
            .iter()
            .map(|&i| &self.detections[i as usize])
    }
}

/// Keyframe ids, plus which excluded keyframes each input mentioned.
struct FrameIds {
    ids: HashMap<FrameKey, u32>,
    excluded: HashSet<FrameKey>,
    excluded_seen_in_gt: HashSet<FrameKey>,
    excluded_seen_in_detections: HashSet<FrameKey>,
    /// Inputs come sorted by keyframe, so remembering the last answer saves
    /// almost every hash lookup on multi-million-row detection files.
    last: Option<(FrameKey, Option<u32>)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Source {
    GroundTruth,
    Detections,
}

impl FrameIds {
    fn new(excluded: &[FrameKey]) -> Self {
        Self {
            ids: HashMap::new(),
            excluded: excluded.iter().copied().collect(),
            excluded_seen_in_gt: HashSet::new(),
            excluded_seen_in_detections: HashSet::new(),
            last: None,
        }
    }

    /// The keyframe's id, or `None` when it is excluded.
    fn id(&mut self, key: FrameKey, source: Source) -> Option<u32> {
        match self.last {
            Some((k, id)) if k == key => id,
            _ => {
                let id = self.lookup(key, source);
                self.last = Some((key, id));
                id
            }
        }
    }

    fn lookup(&mut self, key: FrameKey, source: Source) -> Option<u32> {
        if self.excluded.contains(&key) {
            match source {
                Source::GroundTruth => self.excluded_seen_in_gt.insert(key),
                Source::Detections => self.excluded_seen_in_detections.insert(key),
            };
            return None;
        }
        let next = self.ids.len() as u32;
        Some(*self.ids.entry(key).or_insert(next))
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    /// Forgets the remembered key, whose answer was recorded for the other input.
    fn switch_input(&mut self) {
        self.last = None;
    }
}

/// Applies exclusions and the label map, and buckets both inputs by keyframe.
pub(super) fn group<'a>(
    groundtruth: &[GroundTruthRow],
    detections: &'a [Detection],
    classes: &ClassIndex,
    excluded: &[FrameKey],
    options: &EvalOptions,
) -> Grouped<'a> {
    let mut ids = FrameIds::new(excluded);
    let mut dropped = DroppedRows::default();
    let gt = keyed_ground_truth(groundtruth, classes, &mut ids, &mut dropped);
    // Keyframes with ground-truth rows got the ids below this one.
    let gt_frames = ids.len();
    ids.switch_input();
    let dets = keyed_detections(detections, classes, &mut ids, &mut dropped);
    let frame_count = ids.len();

    let (gt, gt_start) = bucket_ground_truth(gt, frame_count);
    let (det_order, det_start) = bucket_detections(&dets, frame_count);
    let mut gt_per_class = vec![0usize; classes.len()];
    for b in &gt {
        gt_per_class[usize::from(b.class)] += 1;
    }
    let with_detections = det_start.windows(2).filter(|w| w[1] > w[0]).count();
    let without_gt = det_start[gt_frames..]
        .windows(2)
        .filter(|w| w[1] > w[0])
        .count();
    let frames = FrameCounts {
        ground_truth: gt_frames,
        with_detections,
        detections_without_ground_truth: without_gt,
        excluded_listed: ids.excluded.len(),
        excluded_in_ground_truth: ids.excluded_seen_in_gt.len(),
        excluded_in_detections: ids.excluded_seen_in_detections.len(),
    };
    Grouped {
        detections,
        gt,
        gt_start,
        det_order,
        det_start,
        gt_per_class,
        max_per_frame: options.max_detections_per_frame,
        frames,
        dropped,
    }
}

/// `(frame id, box)` for every scored, non-excluded ground-truth box. Every
/// non-excluded row, box or not, gives its keyframe an id.
fn keyed_ground_truth(
    rows: &[GroundTruthRow],
    classes: &ClassIndex,
    ids: &mut FrameIds,
    dropped: &mut DroppedRows,
) -> Vec<(u32, GtBox)> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(frame) = ids.id(row.key, Source::GroundTruth) else {
            dropped.excluded_ground_truth += usize::from(row.entry.is_some());
            continue;
        };
        let Some(entry) = row.entry else { continue };
        match classes.of(entry.action) {
            Some(class) => out.push((
                frame,
                GtBox {
                    class,
                    bbox: decimal_box(&entry.bbox),
                },
            )),
            None => dropped.unscored_ground_truth += 1,
        }
    }
    out
}

/// `(frame id, row index)` for every scored, non-excluded detection.
fn keyed_detections(
    rows: &[Detection],
    classes: &ClassIndex,
    ids: &mut FrameIds,
    dropped: &mut DroppedRows,
) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(rows.len());
    for (i, d) in rows.iter().enumerate() {
        if classes.of(d.action).is_none() {
            dropped.unscored_detections += 1;
            continue;
        }
        match ids.id(d.key, Source::Detections) {
            Some(frame) => out.push((frame, index_u32(i))),
            None => dropped.excluded_detections += 1,
        }
    }
    out
}

fn index_u32(i: usize) -> u32 {
    u32::try_from(i).expect("more than 4 billion detections")
}

/// Sorts by (frame, class), keeping file order otherwise, and returns the
/// per-frame bounds.
fn bucket_ground_truth(
    mut keyed: Vec<(u32, GtBox)>,
    frame_count: usize,
) -> (Vec<GtBox>, Vec<usize>) {
    keyed.sort_by_key(|(frame, b)| (*frame, b.class));
    let start = bounds(keyed.iter().map(|(f, _)| *f), frame_count);
    (keyed.into_iter().map(|(_, b)| b).collect(), start)
}

/// A stable counting sort by frame: linear, which matters at 10^7 rows.
fn bucket_detections(keyed: &[(u32, u32)], frame_count: usize) -> (Vec<u32>, Vec<usize>) {
    let start = bounds(keyed.iter().map(|(f, _)| *f), frame_count);
    let mut next = start.clone();
    let mut order = vec![0u32; keyed.len()];
    for &(frame, row) in keyed {
        let slot = &mut next[frame as usize];
        order[*slot] = row;
        *slot += 1;
    }
    (order, start)
}

/// Prefix sums of per-frame counts: frame `f` owns `start[f]..start[f + 1]`.
fn bounds(frames: impl Iterator<Item = u32>, frame_count: usize) -> Vec<usize> {
    let mut start = vec![0usize; frame_count + 1];
    for f in frames {
        start[f as usize + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_value_recovers_the_text() {
        for text in [
            "0.1", "0.3", "0.123", "0.999", "0.5", "0.0123", "0.995518", "1", "0",
        ] {
            let x: f32 = text.parse().unwrap();
            let expected: f64 = text.parse().unwrap();
            assert_eq!(decimal_value(x), expected, "{text}");
        }
        // Not short decimal text: falls back to the exact widening.
        let odd = f32::from_bits(0x3e4c_cccd + 7);
        assert_eq!(decimal_value(odd), f64::from(odd));
    }

    #[test]
    fn bounds_are_prefix_sums() {
        assert_eq!(bounds([2u32, 0, 2].into_iter(), 3), [0, 1, 1, 3]);
        let (order, start) = bucket_detections(&[(1, 10), (0, 11), (1, 12)], 2);
        assert_eq!(order, [11, 10, 12]);
        assert_eq!(start, [0, 1, 3]);
    }
}
