//! Which instants to extract: time ranges around annotated keyframes, and the frame numbers k
//! whose target time falls inside them.

use serde::{Deserialize, Serialize};

/// A half-open span of AVA seconds (measured from the stream's first timestamp): [start, end).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeRange {
    pub start: f64,
    pub end: f64,
}

impl TimeRange {
    pub fn len(&self) -> f64 {
        (self.end - self.start).max(0.0)
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// Default half-width of the window extracted around each keyframe, in seconds.
///
/// AVA labels describe the 3 s around a keyframe (±1.5 s), and SlowFast-style trainers sample a
/// clip of about that span centred on it (32 frames at stride 2 of 30 fps = 2.1 s; 64 frames at
/// 15 fps = 4.3 s would need ±2.1 s). ±2.0 s covers the label context with 0.5 s to spare for
/// temporal jitter augmentation; on AVA's dense keyframes (every second) the windows merge anyway,
/// so the margin only adds about 2 x 0.5 s per annotated run.
pub const DEFAULT_MARGIN_S: f64 = 2.0;

/// The union of `[t - margin, t + margin)` over `keyframes`, merged and clipped to
/// `segment` (`[start, end)`), in ascending order.
pub fn ranges_around(keyframes: &[u32], margin: f64, segment: [f64; 2]) -> Vec<TimeRange> {
    let mut sorted: Vec<u32> = keyframes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<TimeRange> = Vec::new();
    for t in sorted {
        let range = TimeRange {
            start: (f64::from(t) - margin).max(segment[0]),
            end: (f64::from(t) + margin).min(segment[1]),
        };
        if range.is_empty() {
            continue;
        }
        match out.last_mut() {
            // Touching windows merge too: the frame at their common edge belongs to one of them.
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => out.push(range),
        }
    }
    out
}

/// The whole annotated segment as one range (`segment` extraction mode).
pub fn segment_range(segment: [f64; 2]) -> Vec<TimeRange> {
    let range = TimeRange {
        start: segment[0],
        end: segment[1],
    };
    if range.is_empty() {
        Vec::new()
    } else {
        vec![range]
    }
}

/// Frame numbers k (1-based) whose target time `segment_start + (k - 1) / fps` lies in one of
/// `ranges`, ascending and without duplicates. Targets before `segment_start` do not exist.
pub fn frame_numbers(ranges: &[TimeRange], segment_start: f64, fps: f64) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    if fps.is_nan() || fps <= 0.0 {
        return out;
    }
    for range in ranges {
        // Index i = k - 1 with start <= segment_start + i / fps < end.
        let first = ceil_tolerant((range.start - segment_start) * fps).max(0.0);
        let end = ceil_tolerant((range.end - segment_start) * fps).max(0.0);
        let mut i = first as u64;
        while (i as f64) < end {
            let k = (i + 1) as u32;
            if out.last().is_none_or(|&last| k > last) {
                out.push(k);
            }
            i += 1;
        }
    }
    out
}

/// `ceil`, except that values within float noise of an integer count as that integer, so that
/// `(904.0 - 900.0) * 29.97` style products do not gain or lose a frame at a range edge.
fn ceil_tolerant(x: f64) -> f64 {
    let rounded = x.round();
    if (x - rounded).abs() < 1e-7 {
        rounded
    } else {
        x.ceil()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: f64, end: f64) -> TimeRange {
        TimeRange { start, end }
    }

    #[test]
    fn windows_merge_and_clip() {
        let ranges = ranges_around(&[902, 903, 910, 1798], 2.0, [900.0, 1801.0]);
        assert_eq!(
            ranges,
            vec![r(900.0, 905.0), r(908.0, 912.0), r(1796.0, 1800.0)]
        );
        // Windows that touch merge; unsorted and repeated keyframes are fine.
        assert_eq!(
            ranges_around(&[10, 6, 6], 2.0, [0.0, 100.0]),
            vec![r(4.0, 12.0)]
        );
        // A keyframe outside the segment contributes only its clipped part.
        assert_eq!(ranges_around(&[1], 1.5, [2.0, 10.0]), vec![r(2.0, 2.5)]);
        assert!(ranges_around(&[20], 1.0, [0.0, 10.0]).is_empty());
        assert_eq!(segment_range([900.0, 1801.0]), vec![r(900.0, 1801.0)]);
    }

    #[test]
    fn frame_numbers_follow_the_grid() {
        // 5 fps from 900: k = 1 is 900.0, k = 6 is 901.0.
        assert_eq!(
            frame_numbers(&[r(900.0, 901.0)], 900.0, 5.0),
            vec![1, 2, 3, 4, 5]
        );
        assert_eq!(frame_numbers(&[r(901.0, 901.5)], 900.0, 5.0), vec![6, 7, 8]);
        // The whole AVA segment at 5 fps: 901 s x 5 = 4505 frames.
        let all = frame_numbers(&segment_range([900.0, 1801.0]), 900.0, 5.0);
        assert_eq!((all.len(), all[0], *all.last().unwrap()), (4505, 1, 4505));
        // Overlapping ranges do not repeat frames.
        assert_eq!(
            frame_numbers(&[r(0.0, 0.35), r(0.3, 0.45)], 0.0, 10.0),
            vec![1, 2, 3, 4, 5]
        );
        // Float noise at edges: 0.3 * 10 is 2.9999999999999996.
        assert_eq!(frame_numbers(&[r(0.1, 0.3)], 0.0, 10.0), vec![2, 3]);
        assert!(frame_numbers(&[r(0.0, 1.0)], 0.0, 0.0).is_empty());
    }
}
