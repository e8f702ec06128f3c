//! Lists and views: row order, the consumers' clock, each keyframe's clip as PySlowFast takes
//! it and the rows' timing, and the mmaction2 view's links.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::dataset::{DatasetTables, SplitTables};
use super::frames::FrameState;
use super::{Results, result};
use crate::frame_index::FrameIndex;
use crate::fsutil::{self, FileKind};
use crate::records::{Mmaction2View, shown_instant};
use crate::validate::tables::{self};
use crate::validate::{CheckId, CheckResult, ValidateRequest};

/// PySlowFast's `ava_helper` hard-codes AVA's clock (`FPS = 30`, row 0 of a video is second
/// 900, keyframes `range(902, 1799)`), and so does pytorchvideo's `Ava`: lists on another clock
/// are read with every clip shifted, and a keyframe outside 902..1798 is dropped or raises
/// `KeyError` when PySlowFast loads the boxes.
pub fn check_consumer_clock(
    request: &ValidateRequest,
    dataset: &DatasetTables,
    results: &mut Results,
) {
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
    // An import puts every keyframe on AVA's clock: one outside it was written since.
    let put_right = match request.video_spans.is_empty() {
        true => "import your videos with `avaprep import`, which puts them on AVA's clock",
        false => {
            "an import puts every keyframe inside it: where `avaprep import` made the dataset, its annotation files were edited since, and importing again from the exports puts them right"
        }
    };
    for split in &dataset.splits {
        let keyframes = split.keyframes(request.detection_score_thresh);
        for (video, seconds) in keyframes {
            for second in seconds {
                if AVA_KEYFRAMES.contains(&second) {
                    check.pass(1);
                } else {
                    let when = match split.configured {
                        true => "",
                        false => " where its config names this split",
                    };
                    check.fail(format!(
                        "{video} keyframe {second} ({} split): PySlowFast keeps keyframes 902..1798 and raises KeyError: {second} on this one{when}; {put_right}",
                        split.name
                    ));
                }
            }
        }
    }
}

/// Rows of a video contiguous and numbered 0, 1, 2, ... (PySlowFast takes a video's frames in
/// row order); each video one number throughout its list. How lists number their videos is
/// theirs (PySlowFast and pytorchvideo read only the name and the path; AVA's own val list
/// starts again at 0).
pub(super) fn check_list_order(dataset: &DatasetTables, check: &mut CheckResult) {
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

/// Each annotated keyframe's clip as PySlowFast takes it (rows `c - T*r/2 .. c + T*r/2` step `r`
/// around `c = (second - start) * fps`, clamped to the video's rows); with a frame index, each
/// row's frame must lie within half a frame period of the row's instant.
pub(super) fn check_clips(
    request: &ValidateRequest,
    dataset: &DatasetTables,
    split: &SplitTables,
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
        let shown_span = request.shown_span(video);
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
                    clip_row_problem(listed, row, index, timing, shown_span, state_of)
                });
            match problem {
                Some(problem) => result(results, CheckId::ClipFrames)
                    .fail(format!("{video} keyframe {second}: {problem}")),
                None => result(results, CheckId::ClipFrames).pass(1),
            }
        }
    }
}

pub(super) fn clip_row_problem(
    row: &tables::ListRow,
    position: usize,
    index: Option<&FrameIndex>,
    timing: crate::validate::ListTiming,
    span: [f64; 2],
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

pub(super) fn check_row_timing(
    video: &str,
    rows: &[Option<&tables::ListRow>],
    index: &FrameIndex,
    timing: crate::validate::ListTiming,
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

/// The mmaction2 view: every index of each keyframe's clip (as `SampleAVAFrames` takes it in
/// test mode) is a link into `frames/<video>/` whose frame shows the instant the loader assumes.
pub fn check_mmaction2_view(
    request: &ValidateRequest,
    dataset: &DatasetTables,
    results: &mut Results,
) {
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
                let span = request.shown_span(video);
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

pub(super) fn view_link_problem(
    frames: &Path,
    video: &str,
    k: i64,
    view: &Mmaction2View,
    index: Option<&FrameIndex>,
    span: [f64; 2],
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
