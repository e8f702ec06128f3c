//! The checks: first the tables (lists, box files), then the frames they name, in parallel.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Cursor;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use image::ImageDecoder as _;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::tables::{self, BoxFile, BoxKind, BoxRow, FrameList};
use super::{CheckId, CheckResult, Depth, QUICK_DECODE_EVERY, ValidateRequest};
use crate::annotations::parse_label_map;
use crate::frame_index::FrameIndex;
use crate::fsutil::{self, FileKind};
use crate::progress::{Reporter, Unit};
use crate::records::{Mmaction2View, shown_instant};

type Results = BTreeMap<CheckId, CheckResult>;

fn result(results: &mut Results, id: CheckId) -> &mut CheckResult {
    results.get_mut(&id).expect("every check has a result")
}

/// One split as PySlowFast loads it: its lists and the box files its loader reads.
pub struct Split {
    pub name: &'static str,
    pub lists: Vec<FrameList>,
    /// Box files whose videos must equal the lists' (the loader's boxes, and the ground truth
    /// the evaluator scores the split against).
    pub box_files: Vec<BoxFile>,
}

impl Split {
    /// Each video's rows in file order: row `p` is the video's `p`-th line, `None` where that
    /// line is malformed (failed in list-format; the rows after it keep their places).
    fn video_rows(&self) -> BTreeMap<&str, Vec<Option<&tables::ListRow>>> {
        let mut videos: BTreeMap<&str, Vec<Option<&tables::ListRow>>> = BTreeMap::new();
        for list in &self.lists {
            for (_, video, row) in list.entries() {
                videos.entry(video).or_default().push(row);
            }
        }
        videos
    }

    /// The keyframes PySlowFast takes: every ground-truth box's, and every detector box's that
    /// scores at least `threshold` (it skips the rest).
    fn keyframes(&self, threshold: f64) -> BTreeMap<&str, BTreeSet<i64>> {
        self.keyframes_of(|_, row| row.score.is_none_or(|score| score >= threshold))
    }

    /// The keyframes of the ground truth alone: mmaction2's `AVADataset` reads no other.
    fn ground_truth_keyframes(&self) -> BTreeMap<&str, BTreeSet<i64>> {
        self.keyframes_of(|file, _| file.ground_truth)
    }

    /// The keyframes of the rows `read` takes.
    fn keyframes_of(
        &self,
        read: impl Fn(&BoxFile, &BoxRow) -> bool,
    ) -> BTreeMap<&str, BTreeSet<i64>> {
        let mut keyframes: BTreeMap<&str, BTreeSet<i64>> = BTreeMap::new();
        for file in &self.box_files {
            for row in file.rows.iter().filter(|row| read(file, row)) {
                keyframes.entry(&*row.video).or_default().insert(row.second);
            }
        }
        keyframes
    }
}

/// The tables of a dataset, read leniently: bad rows are already counted in their checks.
pub struct Dataset {
    pub splits: Vec<Split>,
    pub labels: Option<HashSet<i64>>,
    pub exclusions: Option<HashSet<(String, i64)>>,
    pub indexes: HashMap<String, FrameIndex>,
}

impl Dataset {
    pub fn load(request: &ValidateRequest, results: &mut Results) -> Dataset {
        let names = &request.names;
        let read_lists = |names: &[String], results: &mut Results| -> Vec<FrameList> {
            names
                .iter()
                .filter_map(|name| read_list(&request.frame_list_dir, name, results))
                .collect()
        };
        let read_boxes = |names: &[String], kind: BoxKind, results: &mut Results| -> Vec<BoxFile> {
            names
                .iter()
                .filter_map(|name| {
                    let text = read_text(&request.annotation_dir, name, FileKind::Table, results)?;
                    let format = result(results, CheckId::AnnotationFormat);
                    Some(tables::read_box_file(name, &text, kind, format))
                })
                .collect()
        };
        let mut train_boxes = read_boxes(&names.train_gt_box_lists, BoxKind::GroundTruth, results);
        train_boxes.extend(read_boxes(
            &names.train_predict_box_lists,
            BoxKind::Predicted,
            results,
        ));
        // PySlowFast reads the test tables only for its test lists: a config without any (a
        // train-only dataset) needs none of them.
        let test_phase = !names.test_lists.is_empty();
        let test_tables = |names: &[String]| {
            if test_phase {
                names.to_vec()
            } else {
                Vec::new()
            }
        };
        let mut test_boxes = read_boxes(
            &test_tables(&names.test_predict_box_lists),
            BoxKind::Predicted,
            results,
        );
        test_boxes.extend(read_boxes(
            &test_tables(names.groundtruth_file.as_slice()),
            BoxKind::GroundTruth,
            results,
        ));
        let splits = vec![
            Split {
                name: "train",
                lists: read_lists(&names.train_lists, results),
                box_files: train_boxes,
            },
            Split {
                name: "test",
                lists: read_lists(&names.test_lists, results),
                box_files: test_boxes,
            },
        ];
        let labels = read_text(
            &request.annotation_dir,
            &names.label_map_file,
            FileKind::Table,
            results,
        )
        .and_then(|text| label_ids(&text, &names.label_map_file, results))
        .map(|mut ids| {
            ids.extend(all_classes(&request.annotation_dir, results));
            ids
        });
        let exclusions = names
            .exclusion_file
            .as_ref()
            .filter(|_| test_phase)
            .and_then(|name| {
                let text = read_text(&request.annotation_dir, name, FileKind::Table, results)?;
                let format = result(results, CheckId::AnnotationFormat);
                Some(tables::read_exclusions(name, &text, format))
            });
        let indexes = read_indexes(request, &splits, results);
        Dataset {
            splits,
            labels,
            exclusions,
            indexes,
        }
    }
}

fn label_ids(text: &str, name: &str, results: &mut Results) -> Option<HashSet<i64>> {
    match parse_label_map(text.as_bytes(), name) {
        Ok(map) => Some(map.ids().map(|id| i64::from(id.0)).collect()),
        Err(error) => {
            result(results, CheckId::FilesPresent).fail(error.to_string());
            None
        }
    }
}

/// PySlowFast trains on every class (MODEL.NUM_CLASSES = 80) and scores the config's label map:
/// the classes are those of the full label map beside it, or AVA's ids 1..=80 without one.
fn all_classes(annotation_dir: &Path, results: &mut Results) -> HashSet<i64> {
    if !annotation_dir.join(FULL_LABEL_MAP).exists() {
        return (1..=80).collect();
    }
    read_text(annotation_dir, FULL_LABEL_MAP, FileKind::Table, results)
        .and_then(|text| label_ids(&text, FULL_LABEL_MAP, results))
        .unwrap_or_default()
}

/// AVA's map of all 80 classes (the config's LABEL_MAP_FILE holds the 60 scored ones).
const FULL_LABEL_MAP: &str = "ava_action_list_v2.2.pbtxt";

/// A frame list, read line by line (AVA's are hundreds of MB).
fn read_list(dir: &Path, name: &str, results: &mut Results) -> Option<FrameList> {
    let path = dir.join(name);
    let read = fsutil::open_regular(&path, FileKind::FrameList).and_then(|file| {
        let reader = std::io::BufReader::with_capacity(1 << 20, file);
        tables::read_frame_list_from(name, reader, result(results, CheckId::ListFormat))
    });
    match read {
        Ok(list) => {
            result(results, CheckId::FilesPresent).pass(1);
            Some(list)
        }
        Err(error) => {
            let error = match error.kind() {
                std::io::ErrorKind::InvalidData => "not UTF-8 text".to_string(),
                _ => error.to_string(),
            };
            result(results, CheckId::FilesPresent).fail(format!("{}: {error}", path.display()));
            None
        }
    }
}

fn read_text(dir: &Path, name: &str, kind: FileKind, results: &mut Results) -> Option<String> {
    let path = dir.join(name);
    match fsutil::read_regular_text(&path, kind) {
        Ok(text) => {
            result(results, CheckId::FilesPresent).pass(1);
            Some(text)
        }
        Err(error) => {
            result(results, CheckId::FilesPresent).fail(format!("{}: {error}", path.display()));
            None
        }
    }
}

/// avaprep's frame index of every listed video, for the timing checks.
fn read_indexes(
    request: &ValidateRequest,
    splits: &[Split],
    results: &mut Results,
) -> HashMap<String, FrameIndex> {
    let Some(dir) = &request.frame_index_dir else {
        return HashMap::new();
    };
    let videos: BTreeSet<&str> = splits
        .iter()
        .flat_map(|split| split.lists.iter())
        .flat_map(|list| list.rows.iter().map(|row| &*row.video))
        .collect();
    let mut indexes = HashMap::new();
    for video in videos {
        let path = dir.join(format!("{video}.csv"));
        match FrameIndex::read(&path) {
            Ok(index) => {
                indexes.insert(video.to_string(), index);
            }
            Err(error) => result(results, CheckId::FrameTiming).fail(error.to_string()),
        }
    }
    indexes
}

pub fn check_tables(request: &ValidateRequest, dataset: &Dataset, results: &mut Results) {
    check_list_order(dataset, result(results, CheckId::ListOrder));
    let [first, last] = request.timing.keyframes;
    for split in &dataset.splits {
        for file in &split.box_files {
            for &line in &file.duplicates {
                result(results, CheckId::DuplicateRows)
                    .fail(format!("{}:{line}: repeats an earlier line", file.name));
            }
            let unique = file.rows.len() as u64 - file.duplicates.len().min(file.rows.len()) as u64;
            result(results, CheckId::DuplicateRows).pass(unique);
            for row in &file.rows {
                let at = || format!("{}:{}", file.name, row.line);
                let [x1, y1, x2, y2] = row.bbox;
                let inside = |a: f64, b: f64| (0.0..=1.0).contains(&a) && (0.0..=1.0).contains(&b);
                if inside(x1, x2) && inside(y1, y2) && x1 < x2 && y1 < y2 {
                    result(results, CheckId::BoxesInRange).pass(1);
                } else {
                    result(results, CheckId::BoxesInRange).fail(format!(
                        "{}: box ({x1}, {y1}, {x2}, {y2}) is not inside [0, 1] with x1 < x2 and y1 < y2",
                        at()
                    ));
                }
                if (i64::from(first)..=i64::from(last)).contains(&row.second) {
                    result(results, CheckId::SecondsInRange).pass(1);
                } else {
                    result(results, CheckId::SecondsInRange).fail(format!(
                        "{}: second {} is outside the keyframes {first}..{last}",
                        at(),
                        row.second
                    ));
                }
                if let (Some(labels), Some(action)) = (&dataset.labels, row.action) {
                    if labels.contains(&action) {
                        result(results, CheckId::LabelsKnown).pass(1);
                    } else {
                        result(results, CheckId::LabelsKnown).fail(format!(
                            "{}: action {action} is not in {}",
                            at(),
                            request.names.label_map_file
                        ));
                    }
                }
            }
        }
        check_video_sets(split, result(results, CheckId::VideoSets));
    }
    if dataset.labels.is_none() {
        result(results, CheckId::LabelsKnown).skip("the label map could not be read");
    }
    check_exclusions(request, dataset, result(results, CheckId::Exclusions));
}

/// PySlowFast's `ava_helper` hard-codes AVA's clock (`FPS = 30`, row 0 of a video is second
/// 900, keyframes `range(902, 1799)`), and so does pytorchvideo's `Ava`: lists on another clock
/// are read with every clip shifted, and a keyframe outside 902..1798 is dropped or raises
/// `KeyError` when PySlowFast loads the boxes.
pub fn check_consumer_clock(request: &ValidateRequest, dataset: &Dataset, results: &mut Results) {
    const AVA_START: f64 = 900.0;
    const AVA_KEYFRAMES: std::ops::RangeInclusive<i64> = 902..=1798;
    let timing = request.timing;
    let check = result(results, CheckId::ConsumerClock);
    // Lists at another rate than 30 a second are asked for by name (`--list-fps`) for a
    // PySlowFast patched to read them; where they start is the dataset's clock.
    if timing.segment_start == AVA_START {
        check.pass(1);
    } else {
        check.fail(format!(
            "the lists start at second {}; PySlowFast and pytorchvideo take row 0 as second 900, so every clip would be centred {:+.2} s off its keyframe; import your videos with `avaprep import`, which puts them on AVA's clock",
            timing.segment_start,
            timing.segment_start - AVA_START
        ));
    }
    for split in &dataset.splits {
        let keyframes = split.keyframes(request.detection_score_thresh);
        for (video, seconds) in keyframes {
            for second in seconds {
                if AVA_KEYFRAMES.contains(&second) {
                    check.pass(1);
                } else {
                    check.fail(format!(
                        "{video} keyframe {second} ({} split): PySlowFast keeps keyframes 902..1798 and raises KeyError: {second} on this one; import your videos with `avaprep import`, which puts them on AVA's clock",
                        split.name
                    ));
                }
            }
        }
    }
}

/// The evaluator drops excluded keyframes from ground truth and detections alike, so boxes may
/// sit there; an exclusion must name a listed video and a keyframe second, or it excludes
/// nothing (a dropped video left behind, or a wrong clock).
fn check_exclusions(request: &ValidateRequest, dataset: &Dataset, check: &mut CheckResult) {
    let Some(excluded) = &dataset.exclusions else {
        check.skip("no exclusion file");
        return;
    };
    let name = request.names.exclusion_file.as_deref().unwrap_or_default();
    let listed: HashSet<&str> = dataset
        .splits
        .iter()
        .flat_map(|split| &split.lists)
        .flat_map(|list| list.rows.iter().map(|row| &*row.video))
        .collect();
    let [first, last] = request.timing.keyframes;
    let mut sorted: Vec<&(String, i64)> = excluded.iter().collect();
    sorted.sort();
    for (video, second) in sorted {
        if !listed.contains(video.as_str()) {
            check.fail(format!(
                "{name}: {video},{second}: {video} is in no frame list"
            ));
        } else if !(i64::from(first)..=i64::from(last)).contains(second) {
            check.fail(format!(
                "{name}: {video},{second}: second {second} is outside the keyframes {first}..{last}"
            ));
        } else {
            check.pass(1);
        }
    }
}

/// Rows of a video contiguous and numbered 0, 1, 2, ... (PySlowFast takes a video's frames in
/// row order); each video one number throughout its list. How lists number their videos is
/// theirs (PySlowFast and pytorchvideo read only the name and the path; AVA's own val list
/// starts again at 0).
fn check_list_order(dataset: &Dataset, check: &mut CheckResult) {
    for list in dataset.splits.iter().flat_map(|split| &split.lists) {
        let mut numbers: HashMap<&str, i32> = HashMap::new();
        let mut finished: HashSet<&str> = HashSet::new();
        let mut current: Option<&str> = None;
        let mut next_frame = 0;
        for (_, video, row) in list.entries() {
            let Some(row) = row else {
                // A malformed line (failed in list-format) still takes its video's next frame_id.
                if current == Some(video) {
                    next_frame += 1;
                }
                continue;
            };
            let at = format!("{}:{}", list.name, row.line);
            if current != Some(&*row.video) {
                if let Some(previous) = current {
                    finished.insert(previous);
                }
                if finished.contains(&*row.video) {
                    check.fail(format!(
                        "{at}: rows of {} resume after another video's (a video's rows must be contiguous)",
                        row.video
                    ));
                }
                current = Some(&*row.video);
                next_frame = 0;
            }
            let number = *numbers.entry(&*row.video).or_insert(row.number);
            if row.number != number {
                check.fail(format!(
                    "{at}: video_id {} for {}, which its earlier rows number {number} (a video keeps one number in a list)",
                    row.number, row.video
                ));
            } else if row.frame_id != next_frame {
                check.fail(format!(
                    "{at}: frame_id {} of {}, expected {next_frame} (rows in time order, none missing or repeated)",
                    row.frame_id, row.video
                ));
            } else {
                check.pass(1);
            }
            next_frame = row.frame_id + 1;
        }
    }
}

fn check_video_sets(split: &Split, check: &mut CheckResult) {
    let listed: BTreeSet<&str> = split
        .lists
        .iter()
        .flat_map(|list| list.rows.iter().map(|row| &*row.video))
        .collect();
    let list_names: Vec<&str> = split.lists.iter().map(|list| list.name.as_str()).collect();
    let list_names = list_names.join(", ");
    for file in &split.box_files {
        let boxed: BTreeSet<&str> = file.rows.iter().map(|row| &*row.video).collect();
        let unlisted: Vec<&str> = boxed.difference(&listed).copied().collect();
        let unboxed: Vec<&str> = listed.difference(&boxed).copied().collect();
        check.pass((boxed.len() + listed.len() - unlisted.len() - unboxed.len()) as u64);
        if !unlisted.is_empty() {
            check.fail(format!(
                "{}: {} videos with boxes are not in the {} lists ({list_names}): {}",
                file.name,
                unlisted.len(),
                split.name,
                preview(&unlisted)
            ));
        }
        if !unboxed.is_empty() {
            check.fail(format!(
                "{}: {} videos of the {} lists ({list_names}) have no rows in it: {}",
                file.name,
                unboxed.len(),
                split.name,
                preview(&unboxed)
            ));
        }
    }
}

fn preview(videos: &[&str]) -> String {
    let mut text = videos
        .iter()
        .take(5)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if videos.len() > 5 {
        text.push_str(&format!(" and {} more", videos.len() - 5));
    }
    text
}

/// One video's frame sizes: how many frames have each, and one of them.
type SizeCounts<'a> = BTreeMap<(u32, u32), (u64, &'a str)>;

/// What the frame checks read.
pub struct FrameTotals {
    pub listed: u64,
    pub decoded: u64,
}

/// One frame file as found on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameState {
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
    dataset: &Dataset,
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
    check_frame_timing(dataset, result(results, CheckId::FrameTiming));
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
fn listed_frames(dataset: &Dataset) -> Vec<(&str, &str)> {
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
fn decode_choice(frames: &[(&str, &str)], depth: Depth) -> Vec<bool> {
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

fn inspect(path: &Path, decode: bool) -> (FrameState, Option<String>) {
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
        Ok((width, height)) => (FrameState::Decoded { width, height }, None),
        Err(error) => (
            FrameState::Undecodable,
            Some(format!("does not decode as a JPEG ({error})")),
        ),
    }
}

fn check_sizes(sizes: &BTreeMap<&str, SizeCounts>, height: Option<u32>, check: &mut CheckResult) {
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
            check.fail(format!(
                "{video}: frames are {}, not {wanted} high",
                described.join(", ")
            ));
        } else {
            check.pass(1);
        }
    }
}

/// Each annotated keyframe's clip as PySlowFast takes it (rows `c - T*r/2 .. c + T*r/2` step `r`
/// around `c = (second - start) * fps`, clamped to the video's rows); with a frame index, each
/// row's frame must lie within half a frame period of the row's instant.
fn check_clips(
    request: &ValidateRequest,
    dataset: &Dataset,
    split: &Split,
    state_of: &HashMap<&str, FrameState>,
    results: &mut Results,
) {
    let timing = request.timing;
    let span = i64::from(timing.num_frames * timing.sampling_rate);
    let keyframes = split.keyframes(request.detection_score_thresh);
    let rows_of = split.video_rows();
    for (video, rows) in &rows_of {
        let file_span = request.video_spans.get(*video).copied();
        let wanted = timing.rows_per_video(file_span);
        if rows.len() == wanted {
            result(results, CheckId::RowCounts).pass(1);
        } else {
            result(results, CheckId::RowCounts).fail(format!(
                "{video}: {} rows in the {} lists, the segment {}..{} s at {} a second has {wanted}",
                rows.len(),
                split.name,
                timing.segment_start,
                timing.segment_end,
                timing.list_fps
            ));
        }
        let index = dataset.indexes.get(*video);
        if let Some(index) = index {
            check_row_timing(
                video,
                rows,
                index,
                timing,
                result(results, CheckId::ListTiming),
            );
        }
        let Some(seconds) = keyframes.get(video) else {
            continue;
        };
        let last_row = rows.len() as i64 - 1;
        for &second in seconds {
            let centre = timing.centre_row(second);
            let problem = ((centre - span / 2)..(centre + span / 2))
                .step_by(timing.sampling_rate.max(1) as usize)
                .map(|row| row.clamp(0, last_row) as usize)
                .find_map(|row| {
                    let listed = rows[row]?;
                    clip_row_problem(listed, row, index, timing, file_span, state_of)
                });
            match problem {
                Some(problem) => result(results, CheckId::ClipFrames)
                    .fail(format!("{video} keyframe {second}: {problem}")),
                None => result(results, CheckId::ClipFrames).pass(1),
            }
        }
    }
}

fn clip_row_problem(
    row: &tables::ListRow,
    position: usize,
    index: Option<&FrameIndex>,
    timing: super::ListTiming,
    span: Option<[f64; 2]>,
    state_of: &HashMap<&str, FrameState>,
) -> Option<String> {
    match state_of.get(&*row.path) {
        Some(FrameState::Missing) => {
            return Some(format!(
                "row {position} needs {}, which is missing",
                row.path
            ));
        }
        Some(FrameState::Unusable) => {
            return Some(format!(
                "row {position} needs {}, which is not a readable frame (see frames-exist)",
                row.path
            ));
        }
        _ => {}
    }
    let index = index?;
    let at = shown_instant(timing.row_seconds(position), span, index.period);
    let shown = tables::frame_number(&row.path)
        .and_then(|k| index.frames.binary_search(&k).ok())
        .map(|i| index.times[i]);
    match shown {
        Some(time) if (time - at).abs() <= index.period / 2.0 + 1e-6 => None,
        Some(time) => Some(format!(
            "row {position} is taken to show {at:.3} s but {} shows {time:.3} s (not extracted there: extract with a larger --margin)",
            row.path
        )),
        None => Some(format!(
            "row {position} names {}, which the frame index does not hold",
            row.path
        )),
    }
}

fn check_row_timing(
    video: &str,
    rows: &[Option<&tables::ListRow>],
    index: &FrameIndex,
    timing: super::ListTiming,
    check: &mut CheckResult,
) {
    let time_of = |k: u32| index.frames.binary_search(&k).ok().map(|i| index.times[i]);
    // A malformed line has failed list-format; the rows after it keep their places.
    let listed = rows
        .iter()
        .enumerate()
        .filter_map(|(position, row)| Some((position, (*row)?)));
    for (position, row) in listed {
        let at = timing.row_seconds(position);
        let nearest = index.nearest(at);
        let nearest_time = time_of(nearest).expect("nearest returns an indexed frame");
        let pointed = tables::frame_number(&row.path).and_then(|k| Some((k, time_of(k)?)));
        match pointed {
            Some((_, time)) if (time - at).abs() <= (nearest_time - at).abs() + 1e-6 => {
                check.pass(1)
            }
            Some((k, time)) => check.fail(format!(
                "{video} row {position} ({at:.3} s, line {}): points at frame {k} ({time:.3} s); the nearest extracted frame is {nearest} ({nearest_time:.3} s)",
                row.line
            )),
            None => check.fail(format!(
                "{video} row {position} (line {}): {} is not in the frame index",
                row.line, row.path
            )),
        }
    }
}

/// Each frame's source frame within half the gap between the source frames around its target,
/// and every target on the index's own grid. A frame whose target precedes every source frame
/// (the file begins after it) is the video's first frame; it passes only when that frame lies
/// within half of the video's typical source frame gap, as a frame at the target would.
fn check_frame_timing(dataset: &Dataset, check: &mut CheckResult) {
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
            if off <= gap / 2.0 + 2e-6 {
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

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// `SHA256SUMS` in the annotation folder (written by `avaprep lists`, `sha256sum -c` format),
/// and checksums known from a manifest.
pub fn check_checksums(request: &ValidateRequest, results: &mut Results) {
    let check = result(results, CheckId::Checksums);
    let sums_path = request.annotation_dir.join("SHA256SUMS");
    let mut expected: Vec<(std::path::PathBuf, String, String)> = Vec::new();
    let sums = match fsutil::read_regular_text(&sums_path, FileKind::Table) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => {
            check.fail(format!("{}: {error}", sums_path.display()));
            String::new()
        }
    };
    for (n, line) in sums
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let parsed = line
            .split_once(char::is_whitespace)
            .and_then(|(sum, name)| {
                let name = name.trim_start().trim_start_matches('*');
                crate::layout::check_relative_name(name).ok()?;
                Some((sum.to_string(), name.to_string()))
            });
        match parsed {
            Some((sum, name)) => {
                expected.push((request.annotation_dir.join(&name), sum, name));
            }
            None => check.fail(format!(
                "{}:{}: not `<sha256>  <file name>`",
                sums_path.display(),
                n + 1
            )),
        }
    }
    for (path, sum) in &request.known_sha256 {
        expected.push((path.clone(), sum.clone(), path.display().to_string()));
    }
    if expected.is_empty() && check.failed == 0 {
        check.skip("no SHA256SUMS in the annotation folder and no manifest given");
        return;
    }
    for (path, sum, name) in expected {
        match fsutil::read_regular(&path, FileKind::Table) {
            Ok(bytes) => {
                let actual = hex::encode(Sha256::digest(&bytes));
                if actual.eq_ignore_ascii_case(&sum) {
                    check.pass(1);
                } else {
                    check.fail(format!(
                        "{name}: sha256 {actual}, recorded {sum} (the file changed after it was written)"
                    ));
                }
            }
            Err(error) => check.fail(format!("{name}: {error}")),
        }
    }
}

/// The mmaction2 view: every index of each keyframe's clip (as `SampleAVAFrames` takes it in
/// test mode) is a link into `frames/<video>/` whose frame shows the instant the loader assumes.
pub fn check_mmaction2_view(request: &ValidateRequest, dataset: &Dataset, results: &mut Results) {
    let check = result(results, CheckId::LoaderViews);
    let Some(folder) = &request.mmaction2_view else {
        check
            .skip("the data directory has no loader view (`avaprep lists --mmaction2` writes one)");
        return;
    };
    let record = folder.join(Mmaction2View::RECORD);
    let view: Mmaction2View = match fsutil::read_regular(&record, FileKind::Config)
        .map_err(|error| error.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|error| error.to_string()))
    {
        Ok(view) => view,
        Err(error) => {
            check.fail(format!("{}: {error}", record.display()));
            return;
        }
    };
    for split in &dataset.splits {
        for (video, seconds) in split.ground_truth_keyframes() {
            let frames = folder.join("rawframes").join(video);
            let index = dataset.indexes.get(video);
            for &second in &seconds {
                let span = request.video_spans.get(video).copied();
                let problem = view
                    .clip_indices(second)
                    .into_iter()
                    .find_map(|k| view_link_problem(&frames, video, k, &view, index, span));
                match problem {
                    Some(problem) => check.fail(format!(
                        "mmaction2 view, {video} keyframe {second}: {problem}"
                    )),
                    None => check.pass(1),
                }
            }
        }
    }
}

fn view_link_problem(
    frames: &Path,
    video: &str,
    k: i64,
    view: &Mmaction2View,
    index: Option<&FrameIndex>,
    span: Option<[f64; 2]>,
) -> Option<String> {
    let name = Mmaction2View::file_name(k);
    let link = frames.join(&name);
    let Ok(target) = std::fs::read_link(&link) else {
        return Some(format!("{name} is missing or not a link"));
    };
    if target.parent() != Some(&Path::new("../../../frames").join(video)) {
        return Some(format!(
            "{name} points at {}, not into frames/{video}/",
            target.display()
        ));
    }
    if !link.is_file() {
        return Some(format!(
            "{name} points at {}, which is missing",
            target.display()
        ));
    }
    let index = index?;
    let at = shown_instant(view.instant(k), span, index.period);
    let shown = tables::frame_number(&target.to_string_lossy())
        .and_then(|frame| index.frames.binary_search(&frame).ok())
        .map(|i| index.times[i]);
    match shown {
        Some(time) if (time - at).abs() <= index.period / 2.0 + 1e-6 => None,
        Some(time) => Some(format!(
            "{name} is taken to show {at:.3} s but its frame shows {time:.3} s; run `avaprep lists --mmaction2` again"
        )),
        None => Some(format!(
            "{name} points at {}, which the frame index does not hold",
            target.display()
        )),
    }
}
