//! Annotation checks: box files (duplicates, boxes in range, seconds among the keyframes,
//! labels in the map), the videos each split's files name, and the exclusions.

use std::collections::{BTreeSet, HashSet};

use super::dataset::{DatasetTables, ExclusionTable, SplitTables};
use super::lists::check_list_order;
use super::{Results, result};
use crate::validate::{CheckId, CheckResult, ValidateRequest};

pub fn check_tables(request: &ValidateRequest, dataset: &DatasetTables, results: &mut Results) {
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

/// The evaluator drops excluded keyframes from ground truth and detections alike, so boxes may
/// sit there; an exclusion must name a listed video and a keyframe second, or it excludes
/// nothing (a dropped video left behind, or a wrong clock).
pub(super) fn check_exclusions(
    request: &ValidateRequest,
    dataset: &DatasetTables,
    check: &mut CheckResult,
) {
    let tables: Vec<&ExclusionTable> = dataset
        .splits
        .iter()
        .filter_map(|split| split.exclusions.as_ref())
        .collect();
    if tables.is_empty() {
        check.skip("no exclusion file");
        return;
    }
    let listed: HashSet<&str> = dataset
        .splits
        .iter()
        .flat_map(|split| &split.lists)
        .flat_map(|list| list.rows.iter().map(|row| &*row.video))
        .collect();
    let [first, last] = request.timing.keyframes;
    let excluded = tables.iter().flat_map(|table| {
        let mut sorted: Vec<&(String, i64)> = table.keyframes.iter().collect();
        sorted.sort();
        sorted
            .into_iter()
            .map(|keyframe| (table.name.as_str(), keyframe))
    });
    for (name, (video, second)) in excluded {
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

pub(super) fn check_video_sets(split: &SplitTables, check: &mut CheckResult) {
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
            let videos = match unlisted.len() {
                1 => "1 video with boxes is".to_string(),
                n => format!("{n} videos with boxes are"),
            };
            check.fail(format!(
                "{}: {videos} not in the {} lists ({list_names}): {}",
                file.name,
                split.name,
                preview(&unlisted)
            ));
        }
        // A video of another split without boxes is one `predict` has no person to score in:
        // import warned of it, and no loader fails on it.
        if !unboxed.is_empty() && split.configured {
            let (videos, have) = match unboxed.len() {
                1 => ("1 video".to_string(), "has"),
                n => (format!("{n} videos"), "have"),
            };
            check.fail(format!(
                "{}: {videos} of the {} lists ({list_names}) {have} no rows in it: {}",
                file.name,
                split.name,
                preview(&unboxed)
            ));
        }
    }
}

pub(super) fn preview(videos: &[&str]) -> String {
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
