//! The dataset as its tables hold it: each split's frame lists and box files, the label map
//! and avaprep's frame index, read leniently (a bad row is counted in its check, not fatal).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use super::{Results, result};
use crate::annotations::parse_label_map;
use crate::frame_index::FrameIndex;
use crate::fsutil::{self, FileKind};
use crate::validate::tables::{self, BoxFile, BoxKind, BoxRow, FrameList};
use crate::validate::{CheckId, ValidateRequest};

/// One split as PySlowFast loads it (its phases, train and test), or as `avaprep predict` reads
/// a split the config does not name: its lists and the box files read with them.
pub struct SplitTables {
    pub name: String,
    /// A phase of PySlowFast's config: its loader raises `KeyError` on a listed video without
    /// boxes. `avaprep predict` skips such a video of another split.
    pub configured: bool,
    pub lists: Vec<FrameList>,
    /// Box files whose videos must equal the lists' (the loader's boxes, and the ground truth
    /// the evaluator scores the split against).
    pub box_files: Vec<BoxFile>,
    pub exclusions: Option<ExclusionTable>,
}

/// An exclusion file: the keyframes the evaluator leaves out.
pub struct ExclusionTable {
    pub name: String,
    pub keyframes: HashSet<(String, i64)>,
}

impl SplitTables {
    /// Each video's rows in file order: row `p` is the video's `p`-th line, `None` where that
    /// line is malformed (failed in list-format; the rows after it keep their places).
    pub(super) fn video_rows(&self) -> BTreeMap<&str, Vec<Option<&tables::ListRow>>> {
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
    pub(super) fn keyframes(&self, threshold: f64) -> BTreeMap<&str, BTreeSet<i64>> {
        self.keyframes_of(|_, row| row.score.is_none_or(|score| score >= threshold))
    }

    /// The keyframes of the ground truth alone: mmaction2's `AVADatasetTables` reads no other.
    pub(super) fn ground_truth_keyframes(&self) -> BTreeMap<&str, BTreeSet<i64>> {
        self.keyframes_of(|file, _| file.ground_truth)
    }

    /// The keyframes of the rows `read` takes.
    pub(super) fn keyframes_of(
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
pub struct DatasetTables {
    pub splits: Vec<SplitTables>,
    pub labels: Option<HashSet<i64>>,
    pub indexes: HashMap<String, FrameIndex>,
}

impl DatasetTables {
    pub fn load(request: &ValidateRequest, results: &mut Results) -> DatasetTables {
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
        let read_exclusions = |name: Option<&String>, results: &mut Results| {
            let name = name?;
            let text = read_text(&request.annotation_dir, name, FileKind::Table, results)?;
            let format = result(results, CheckId::AnnotationFormat);
            Some(ExclusionTable {
                name: name.clone(),
                keyframes: tables::read_exclusions(name, &text, format),
            })
        };
        let mut splits = vec![
            SplitTables {
                name: "train".into(),
                configured: true,
                lists: read_lists(&names.train_lists, results),
                box_files: train_boxes,
                exclusions: None,
            },
            SplitTables {
                name: "test".into(),
                configured: true,
                lists: read_lists(&names.test_lists, results),
                box_files: test_boxes,
                exclusions: read_exclusions(
                    names.exclusion_file.as_ref().filter(|_| test_phase),
                    results,
                ),
            },
        ];
        for (split, files) in &request.other_splits {
            let mut box_files =
                read_boxes(files.detected_boxes.as_slice(), BoxKind::Predicted, results);
            box_files.extend(read_boxes(
                files.ground_truth.as_slice(),
                BoxKind::GroundTruth,
                results,
            ));
            splits.push(SplitTables {
                name: split.clone(),
                configured: false,
                lists: read_lists(&[crate::validate::other_split_list(split)], results),
                box_files,
                exclusions: read_exclusions(files.excluded_timestamps.as_ref(), results),
            });
        }
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
        let indexes = read_indexes(request, &splits, results);
        DatasetTables {
            splits,
            labels,
            indexes,
        }
    }
}

pub(super) fn label_ids(text: &str, name: &str, results: &mut Results) -> Option<HashSet<i64>> {
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
pub(super) fn all_classes(annotation_dir: &Path, results: &mut Results) -> HashSet<i64> {
    if !annotation_dir.join(FULL_LABEL_MAP).exists() {
        return (1..=80).collect();
    }
    read_text(annotation_dir, FULL_LABEL_MAP, FileKind::Table, results)
        .and_then(|text| label_ids(&text, FULL_LABEL_MAP, results))
        .unwrap_or_default()
}

/// AVA's map of all 80 classes (the config's LABEL_MAP_FILE holds the 60 scored ones).
pub(super) const FULL_LABEL_MAP: &str = "ava_action_list_v2.2.pbtxt";

/// A frame list, read line by line (AVA's are hundreds of MB).
pub(super) fn read_list(dir: &Path, name: &str, results: &mut Results) -> Option<FrameList> {
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

pub(super) fn read_text(
    dir: &Path,
    name: &str,
    kind: FileKind,
    results: &mut Results,
) -> Option<String> {
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
pub(super) fn read_indexes(
    request: &ValidateRequest,
    splits: &[SplitTables],
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
