//! Frame checks: every listed frame present and decodable, sizes, and each frame's source
//! frame near its instant.

use std::collections::{BTreeMap, HashMap};
use std::io::Cursor;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use image::ImageDecoder as _;
use rayon::prelude::*;

use super::dataset::DatasetTables;
use super::lists::check_clips;
use super::{Results, result};
use crate::frame_index::FrameIndex;
use crate::fsutil::{self, FileKind};
use crate::progress::{Reporter, Unit};
use crate::validate::{CheckId, CheckResult, Depth, QUICK_DECODE_EVERY, ValidateRequest};

/// One video's frame sizes: how many frames have each, and one of them.
pub(super) type SizeCounts<'a> = BTreeMap<(u32, u32), (u64, &'a str)>;

/// What the frame checks read.
pub struct FrameTotals {
    pub listed: u64,
    pub decoded: u64,
}

/// One frame file as found on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FrameState {
    Missing,
    /// There, but not a frame a loader can read (a FIFO, a device, a directory, a huge file).
    Unusable,
    /// Exists; not decoded in a quick check.
    Present,
    Decoded {
        width: u32,
        height: u32,
    },
    Undecodable,
}

pub fn check_frames(
    request: &ValidateRequest,
    dataset: &DatasetTables,
    results: &mut Results,
    reporter: &dyn Reporter,
    cancel: &std::sync::atomic::AtomicBool,
) -> FrameTotals {
    let frames = listed_frames(dataset);
    let decode: Vec<bool> = decode_choice(&frames, request.depth);
    let done = AtomicU64::new(0);
    let total = frames.len() as u64;
    reporter.stage_started("validate", 1, 0);
    let states: Vec<(FrameState, Option<String>)> = frames
        .par_iter()
        .zip(decode.par_iter())
        .map(|((path, _), &decode)| {
            if cancel.load(Ordering::Relaxed) {
                // Read no more: the caller stops once the workers are back.
                return (FrameState::Missing, None);
            }
            let state = inspect(&request.frame_dir.join(path), decode);
            let count = done.fetch_add(1, Ordering::Relaxed) + 1;
            if count.is_multiple_of(512) || count == total {
                reporter.item_progress("validate", "frames", count, total, Unit::Frames);
            }
            state
        })
        .collect();
    reporter.item_finished("validate", "frames", None);
    reporter.stage_finished("validate");
    if frames.is_empty() && !dataset.splits.is_empty() {
        // Nothing to train or test on passes no check of a dataset: PySlowFast fails on it.
        result(results, CheckId::FramesExist).fail(
            "the frame lists name no frame: every video was dropped (dropped_videos.txt beside the annotations says why) or none was extracted".to_string(),
        );
    }
    let state_of: HashMap<&str, FrameState> = frames
        .iter()
        .zip(&states)
        .map(|((path, _), (state, _))| (*path, *state))
        .collect();
    let mut sizes: BTreeMap<&str, SizeCounts> = BTreeMap::new();
    for ((path, video), (state, problem)) in frames.iter().zip(&states) {
        match state {
            FrameState::Missing => {
                result(results, CheckId::FramesExist).fail(format!("{path}: missing"))
            }
            FrameState::Unusable => result(results, CheckId::FramesExist).fail(format!(
                "{path}: {}",
                problem.as_deref().unwrap_or("not a regular file")
            )),
            _ => result(results, CheckId::FramesExist).pass(1),
        }
        let recorded = dataset
            .indexes
            .get(*video)
            .map(|index| (index.width, index.height));
        match state {
            FrameState::Decoded { width, height } => {
                if recorded.is_some_and(|size| size != (*width, *height)) {
                    let (w, h) = recorded.expect("checked");
                    result(results, CheckId::FramesDecode).fail(format!(
                        "{path}: {width}x{height}, the frame index records {w}x{h}"
                    ));
                } else {
                    result(results, CheckId::FramesDecode).pass(1);
                }
                let entry = sizes
                    .entry(*video)
                    .or_default()
                    .entry((*width, *height))
                    .or_insert((0, *path));
                entry.0 += 1;
            }
            FrameState::Undecodable => result(results, CheckId::FramesDecode).fail(format!(
                "{path}: {}",
                problem.as_deref().unwrap_or("not a JPEG")
            )),
            FrameState::Missing | FrameState::Unusable | FrameState::Present => {}
        }
    }
    check_sizes(&sizes, request.height, result(results, CheckId::FrameSizes));
    for split in &dataset.splits {
        check_clips(request, dataset, split, &state_of, results);
    }
    check_frame_timing(
        dataset,
        &request.video_spans,
        result(results, CheckId::FrameTiming),
    );
    if request.frame_index_dir.is_none() {
        let reason = "no frame index (avaprep's frame_index/): frame times are not recorded";
        result(results, CheckId::ListTiming).skip(reason);
        result(results, CheckId::FrameTiming).skip(reason);
    }
    FrameTotals {
        listed: total,
        decoded: states
            .iter()
            .filter(|(state, _)| {
                matches!(state, FrameState::Decoded { .. } | FrameState::Undecodable)
            })
            .count() as u64,
    }
}

/// Every distinct frame path the lists name, with its video, sorted.
pub(super) fn listed_frames(dataset: &DatasetTables) -> Vec<(&str, &str)> {
    let mut frames: Vec<(&str, &str)> = Vec::new();
    let rows = dataset
        .splits
        .iter()
        .flat_map(|split| &split.lists)
        .flat_map(|list| &list.rows);
    for row in rows {
        // A frame's rows follow each other (six at 30 a second from 5 fps): one entry each.
        if frames.last() != Some(&(&*row.path, &*row.video)) {
            frames.push((&*row.path, &*row.video));
        }
    }
    frames.sort_unstable();
    frames.dedup();
    frames
}

/// Which frames to decode: all, or a sample with each video's first and last.
pub(super) fn decode_choice(frames: &[(&str, &str)], depth: Depth) -> Vec<bool> {
    (0..frames.len())
        .map(|i| match depth {
            Depth::Full => true,
            Depth::Quick => {
                let video = &frames[i].1;
                i % QUICK_DECODE_EVERY == 0
                    || i + 1 == frames.len()
                    || frames[i - 1].1 != *video
                    || frames[i + 1].1 != *video
            }
        })
        .collect()
}

pub(super) fn inspect(path: &Path, decode: bool) -> (FrameState, Option<String>) {
    let unusable = |error: std::io::Error| match error.kind() {
        std::io::ErrorKind::NotFound => (FrameState::Missing, None),
        _ => (FrameState::Unusable, Some(error.to_string())),
    };
    if !decode {
        return match fsutil::check_regular(path, FileKind::Frame) {
            Ok(_) => (FrameState::Present, None),
            Err(error) => unusable(error),
        };
    }
    let bytes = match fsutil::read_regular(path, FileKind::Frame) {
        Ok(bytes) => bytes,
        Err(error) => return unusable(error),
    };
    let decoded = image::codecs::jpeg::JpegDecoder::new(Cursor::new(&bytes)).and_then(|decoder| {
        let (width, height) = decoder.dimensions();
        let mut pixels = vec![0; decoder.total_bytes() as usize];
        decoder.read_image(&mut pixels)?;
        Ok((width, height))
    });
    match decoded {
        Ok(_) if !ends_whole(&bytes) => (
            FrameState::Undecodable,
            Some(format!(
                "is cut short: {} bytes with no end-of-image marker (the decoder fills what is missing with grey)",
                bytes.len()
            )),
        ),
        Ok((width, height)) => (FrameState::Decoded { width, height }, None),
        Err(error) => (
            FrameState::Undecodable,
            Some(format!("does not decode as a JPEG ({error})")),
        ),
    }
}

/// Whether a JPEG ends with its end-of-image marker (FF D9), padding after it allowed: the
/// decoder takes a file cut short (a copy or a disk that filled) for a whole one. The marker is
/// found nowhere else near the end, as the compressed data escapes every FF byte.
fn ends_whole(bytes: &[u8]) -> bool {
    let tail = &bytes[bytes.len().saturating_sub(64)..];
    tail.windows(2).any(|pair| pair == [0xFF, 0xD9])
}

pub(super) fn check_sizes(
    sizes: &BTreeMap<&str, SizeCounts>,
    height: Option<u32>,
    check: &mut CheckResult,
) {
    for (video, by_size) in sizes {
        let described: Vec<String> = by_size
            .iter()
            .map(|((w, h), (count, example))| format!("{w}x{h} x{count} (e.g. {example})"))
            .collect();
        if by_size.len() > 1 {
            check.fail(format!(
                "{video}: frames of {} sizes: {}",
                by_size.len(),
                described.join(", ")
            ));
        } else if let Some(wanted) = height
            && by_size.keys().any(|(_, h)| *h != wanted)
        {
            // A source smaller than the height asked keeps its size (extract upscales only with
            // --upscale): say so, rather than leave a user to suspect the extraction.
            let smaller = by_size.keys().all(|(_, h)| *h < wanted);
            let why = match smaller {
                true => format!(
                    "; a source under {wanted} lines keeps its size (extract --upscale scales it up): if the source is that small, validate with the frames' own height"
                ),
                false => String::new(),
            };
            check.fail(format!(
                "{video}: frames are {}, not {wanted} high{why}",
                described.join(", ")
            ));
        } else {
            check.pass(1);
        }
    }
}

/// Each frame's source frame within half the gap between the source frames around its target,
/// and every target on the index's own grid. A frame whose target precedes every source frame
/// (the file begins after it) is the video's first frame; it passes only when that frame lies
/// within half of the video's typical source frame gap, as a frame at the target would. A frame
/// whose target follows the file's last frame, before the file's end (where the video's span is
/// recorded), shows that last frame: the nearest there is.
pub(super) fn check_frame_timing(
    dataset: &DatasetTables,
    video_spans: &BTreeMap<String, [f64; 2]>,
    check: &mut CheckResult,
) {
    let mut videos: Vec<(&String, &FrameIndex)> = dataset.indexes.iter().collect();
    videos.sort_by_key(|(video, _)| *video);
    let mut gaps_recorded = false;
    for (video, index) in videos {
        if !index.gaps_recorded {
            continue;
        }
        gaps_recorded = true;
        let typical_gap = median(index.source_gaps.iter().flatten().copied());
        let (first_frame, first_time) = (index.frames[0], index.times[0]);
        let video_end = video_spans.get(video.as_str()).map(|[_, end]| *end);
        for i in 0..index.frames.len() {
            let k = index.frames[i];
            let target = index.times[i];
            let on_grid = first_time + f64::from(k - first_frame) * index.period;
            if (target - on_grid).abs() > 1e-4 {
                check.fail(format!(
                    "{video} frame {k}: target {target:.6} s is off the frame grid ({on_grid:.6} s)"
                ));
                continue;
            }
            let source = index.source_times[i];
            let off = (source - target).abs();
            let Some(gap) = index.source_gaps[i].or(typical_gap.filter(|_| source >= target))
            else {
                check.fail(format!(
                    "{video} frame {k}: no source frame before its target {target:.6} s, and none recorded for the video to compare with"
                ));
                continue;
            };
            // The index holds microseconds: allow their rounding.
            let last = LastFrame {
                source,
                gap,
                typical_gap,
            };
            if off <= gap / 2.0 + 2e-6 || last.shows(target, video_end) {
                check.pass(1);
            } else if index.source_gaps[i].is_none() {
                check.fail(format!(
                    "{video} frame {k}: its target {target:.6} s is {off:.6} s before the file's first frame (at {source:.6} s), which it shows: the video does not cover it (a --video-start after the extracted ranges?)"
                ));
            } else {
                check.fail(format!(
                    "{video} frame {k}: shows the source frame at {source:.6} s for {target:.6} s, {off:.6} s away; the nearest is at most {:.6} s away",
                    gap / 2.0
                ));
            }
        }
    }
    if !gaps_recorded {
        check.skip(
            "the frame index records no source frame gaps (written before they were recorded)",
        );
    }
}

/// A frame's source frame, the gap recorded on its target's side, and its video's typical gap.
struct LastFrame {
    source: f64,
    gap: f64,
    typical_gap: Option<f64>,
}

impl LastFrame {
    /// Whether the source frame is the file's last and `target` falls after it within the file.
    /// The gap recorded after a frame reaches its neighbour, or the file's end after the last
    /// frame; a neighbour is itself shown for about a typical gap before the end, so only a gap
    /// that lands on the end, within half a typical gap, has none.
    fn shows(&self, target: f64, video_end: Option<f64>) -> bool {
        let (Some(end), Some(typical)) = (video_end, self.typical_gap) else {
            return false;
        };
        target > self.source
            && target <= end + 2e-6
            && (self.source + self.gap - end).abs() <= typical / 2.0
    }
}

pub(super) fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame_index::HEADER;

    /// A frame cut short (a copy or a disk that filled) fails its decode: the decoder gave it
    /// back whole, and a full validation passed it.
    #[test]
    fn a_frame_cut_short_is_not_taken_for_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("frame.jpg");
        let picture = image::RgbImage::from_fn(320, 240, |x, y| {
            image::Rgb([
                (x * 7 % 256) as u8,
                (y * 13 % 256) as u8,
                ((x ^ y) % 256) as u8,
            ])
        });
        let mut whole = Vec::new();
        picture
            .write_to(&mut Cursor::new(&mut whole), image::ImageFormat::Jpeg)
            .unwrap();
        std::fs::write(&path, &whole).unwrap();
        assert!(matches!(
            inspect(&path, true),
            (FrameState::Decoded { .. }, None)
        ));
        // Cut short, the decoder gives a picture filled with grey for some cuts, an error for
        // others: each fails, and the first kind is named.
        let mut named_cut_short = 0;
        for eighths in 2..8 {
            std::fs::write(&path, &whole[..whole.len() * eighths / 8]).unwrap();
            let (state, why) = inspect(&path, true);
            assert_eq!(
                state,
                FrameState::Undecodable,
                "cut at {eighths}/8: {why:?}"
            );
            named_cut_short += usize::from(why.unwrap().starts_with("is cut short"));
        }
        assert!(named_cut_short > 0);
    }

    /// `--height`: frames of that height pass; frames smaller than it fail saying that a small
    /// source keeps its size; larger ones fail plainly.
    #[test]
    fn a_height_check_says_why_smaller_frames_differ() {
        let check = |size: (u32, u32)| {
            let sizes = BTreeMap::from([("v1", SizeCounts::from([(size, (3, "v1_000001.jpg"))]))]);
            let mut result = CheckResult::new(CheckId::FrameSizes);
            check_sizes(&sizes, Some(480), &mut result);
            result
        };
        assert_eq!(check((854, 480)).failed, 0);
        let smaller = check((640, 360));
        assert_eq!(smaller.failed, 1);
        assert!(
            smaller.examples[0].contains("keeps its size"),
            "{smaller:?}"
        );
        let larger = check((1280, 720));
        assert_eq!(larger.failed, 1);
        assert!(!larger.examples[0].contains("keeps its size"), "{larger:?}");
    }

    /// A 29.97 fps clip of 300 frames ends at 10.010 s: the frame for 10.0 s shows its last frame
    /// (at 9.977 s, shown until the end), the nearest there is. It passes where the file's span
    /// is recorded; a frame as far from its target before the last one still fails.
    #[test]
    fn a_target_after_the_last_frame_and_before_the_end_shows_the_last_frame() {
        let row = |k: u32, target: f64, source: f64, gap: f64| {
            let file = source - 902.0;
            format!("{k},{target:.6},{source:.6},640,360,{gap:.6},{file:.6}\n")
        };
        let period = 0.033367;
        // Frames 56..=60 at 911.0..=911.8, each within a few ms of its target.
        let before: String = (56..=60)
            .map(|k| {
                let target = 911.0 + f64::from(k - 56) * 0.2;
                row(k, target, target + 0.0098, period)
            })
            .collect();
        let timing = |last: &str, spans: &[(&str, [f64; 2])]| {
            let index = FrameIndex::parse(&format!("{HEADER}\n{before}{last}")).expect("an index");
            let dataset = DatasetTables {
                splits: Vec::new(),
                labels: None,
                indexes: HashMap::from([("phone".to_string(), index)]),
            };
            let spans = spans.iter().map(|(v, s)| (v.to_string(), *s)).collect();
            let mut result = CheckResult::new(CheckId::FrameTiming);
            check_frame_timing(&dataset, &spans, &mut result);
            result
        };
        let last_frame = row(61, 912.0, 911.976633, period);
        let spans = [("phone", [902.0, 912.01])];
        assert_eq!(timing(&last_frame, &spans).failed, 0);
        assert_eq!(timing(&last_frame, &spans).checked, 6);
        // Without the file's end, nothing says no frame follows at 912.01.
        assert_eq!(timing(&last_frame, &[]).failed, 1);
        // Past the file's end, or a frame that has a neighbour nearer its target.
        let past_end = [("phone", [902.0, 911.99])];
        assert_eq!(timing(&last_frame, &past_end).failed, 1);
        let longer = [("phone", [902.0, 912.5])];
        assert_eq!(timing(&last_frame, &longer).failed, 1);
        // A stutter before the last frame: the frame before it (911.91) is three periods from
        // the last (912.01, the file ending a period later), so 912.0 shows the wrong one.
        let stutter = row(61, 912.0, 911.909899, 3.0 * period);
        let spans = [("phone", [902.0, 912.043367])];
        assert_eq!(timing(&stutter, &spans).failed, 1);
    }
}
