//! `slowfast/ava.yaml`: PySlowFast's dataset keys for the lists and annotations, with absolute
//! paths, rewritten in place when the data directory moves.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{ListsParams, base_name, read, split_order, write_file};
use crate::layout::DataLayout;
use crate::pipeline::ItemError;
use crate::records::VideoPlan;

/// PySlowFast's configs, which name the data directory's absolute path (PySlowFast reads them
/// from the working directory): rewritten for its new place when the directory moves
/// ([`relocate_configs`]), so printed by name only, never part of what the stages after read.
pub(super) const LOCATED_CONFIGS: [&str; 2] = ["slowfast/ava.yaml", "slowfast/train.yaml"];

/// A data directory moved or copied (`cp -a`, `rsync`) still holds configs naming the old one,
/// so PySlowFast would read the old frames: they are rewritten to name this one, as they are,
/// their other keys kept. Returns the old place when they were rewritten. Every command that
/// writes to the data directory calls it first.
pub fn relocate_configs(data_dir: &Path) -> Result<Option<PathBuf>, ItemError> {
    let layout = DataLayout::new(data_dir);
    let config = layout.slowfast().join("ava.yaml");
    let Ok(named) = crate::validate::PySlowFastYaml::load(&config) else {
        return Ok(None);
    };
    let here = std::path::absolute(data_dir).map_err(ItemError::input)?;
    let Some(old) = named
        .frame_dir
        .as_deref()
        .filter(|frames| frames.file_name() == Some("frames".as_ref()))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .filter(|old| !crate::fsutil::same_place(old, &here))
    else {
        return Ok(None);
    };
    // Paths are written as JSON strings: the old place's quoted form, up to its last character,
    // followed by a `/`, starts each path that lies in it.
    let quoted = |root: &Path| {
        let text = yaml_string(&format!("{}/", root.to_string_lossy()));
        text[..text.len() - 1].to_string()
    };
    let (from, to) = (quoted(&old), quoted(&here));
    for name in LOCATED_CONFIGS {
        let path = data_dir.join(name);
        let Ok(text) = crate::fsutil::read_regular_text(&path, crate::fsutil::FileKind::Config)
        else {
            continue;
        };
        write_file(&path, text.replace(&from, &to).as_bytes())?;
    }
    Ok(Some(old))
}

/// The splits the config names: train (`TRAIN_LISTS`) and val (`TEST_LISTS`, the phase
/// PySlowFast tests and validates on).
pub(super) const CONFIGURED_SPLITS: [&str; 2] = ["train", "val"];

/// PySlowFast's dataset keys for these files. Paths are absolute so the file works from any
/// working directory.
pub(super) fn config_yaml(layout: &DataLayout, plan: &VideoPlan, params: &ListsParams) -> String {
    let root = std::path::absolute(layout.root()).unwrap_or_else(|_| layout.root().to_path_buf());
    let dir = |path: &Path| yaml_string(&root.join(path).to_string_lossy());
    let list = |names: Vec<String>| {
        let quoted: Vec<String> = names.iter().map(|name| yaml_string(name)).collect();
        format!("[{}]", quoted.join(", "))
    };
    // Only the splits that have videos: a train-only dataset names no val tables.
    let listed = split_order(plan);
    let split_file = |split: &str, pick: fn(&crate::records::SplitFiles) -> &Option<String>| {
        plan.files
            .splits
            .get(split)
            .filter(|_| listed.iter().any(|name| name == split))
            .and_then(|files| pick(files).as_deref())
            .map(|name| base_name(name).to_string())
    };
    let train_gt: Vec<String> = split_file("train", |f| &f.ground_truth)
        .into_iter()
        .collect();
    let train_boxes: Vec<String> = split_file("train", |f| &f.detected_boxes)
        .into_iter()
        .collect();
    let val_boxes: Vec<String> = split_file("val", |f| &f.detected_boxes)
        .into_iter()
        .collect();
    let mut text = String::new();
    writeln!(
        text,
        "# Written by `avaprep lists`: PySlowFast's AVA dataset keys for this data directory.\n\
         # Combine with a model config: put `_BASE_: <this file>` in it, or pass these keys as\n\
         # command-line overrides. Rows are {} a second; a clip is DATA.NUM_FRAMES rows\n\
         # DATA.SAMPLING_RATE apart: {:.2} s.",
        params.list_fps,
        params.clip_seconds()
    )
    .expect("a string");
    if val_boxes.is_empty() {
        text.push_str(
            "# The dataset has no person-detector boxes: TEST_PREDICT_BOX_LISTS is empty, so\n\
             # PySlowFast's test and val loaders have no boxes to score; add a detector's box\n\
             # list (8 columns, the 8th a score) to AVA.ANNOTATION_DIR and name it there.\n",
        );
    }
    let lists: Vec<String> = split_order(plan)
        .into_iter()
        .map(|split| format!("{split}.csv"))
        .collect();
    let test_list: Vec<String> = lists
        .iter()
        .filter(|name| *name == "val.csv")
        .cloned()
        .collect();
    let train_list: Vec<String> = lists
        .iter()
        .filter(|name| *name == "train.csv")
        .cloned()
        .collect();
    writeln!(text, "AVA:").expect("a string");
    writeln!(text, "  FRAME_DIR: {}", dir(Path::new("frames"))).expect("a string");
    writeln!(text, "  FRAME_LIST_DIR: {}", dir(Path::new("frame_lists"))).expect("a string");
    writeln!(
        text,
        "  ANNOTATION_DIR: {}",
        dir(&Path::new("slowfast").join("annotations"))
    )
    .expect("a string");
    writeln!(text, "  TRAIN_LISTS: {}", list(train_list)).expect("a string");
    writeln!(text, "  TEST_LISTS: {}", list(test_list)).expect("a string");
    writeln!(text, "  TRAIN_GT_BOX_LISTS: {}", list(train_gt)).expect("a string");
    writeln!(text, "  TRAIN_PREDICT_BOX_LISTS: {}", list(train_boxes)).expect("a string");
    writeln!(text, "  TEST_PREDICT_BOX_LISTS: {}", list(val_boxes)).expect("a string");
    if let Some(name) = split_file("val", |f| &f.excluded_timestamps) {
        writeln!(text, "  EXCLUSION_FILE: {}", yaml_string(&name)).expect("a string");
    }
    writeln!(
        text,
        "  LABEL_MAP_FILE: {}",
        yaml_string(base_name(&plan.files.scored_label_map))
    )
    .expect("a string");
    if let Some(name) = split_file("val", |f| &f.ground_truth) {
        writeln!(text, "  GROUNDTRUTH_FILE: {}", yaml_string(&name)).expect("a string");
    }
    writeln!(
        text,
        "  DETECTION_SCORE_THRESH: {}",
        crate::annotations::DETECTION_SCORE_THRESHOLD
    )
    .expect("a string");
    writeln!(text, "DATA:").expect("a string");
    writeln!(text, "  NUM_FRAMES: {}", params.num_frames).expect("a string");
    writeln!(text, "  SAMPLING_RATE: {}", params.sampling_rate).expect("a string");
    text
}

/// A YAML double-quoted string (JSON's escaping is valid YAML).
pub(super) fn yaml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// The largest action id of the full label map: PySlowFast's `MODEL.NUM_CLASSES` (it takes
/// class `a` to index `a - 1`).
pub(super) fn largest_action_id(layout: &DataLayout, plan: &VideoPlan) -> Result<u32, ItemError> {
    let path = layout
        .slowfast()
        .join("annotations")
        .join(base_name(&plan.files.label_map));
    let map = crate::annotations::parse_label_map(&read(&path)?, &path.display().to_string())
        .map_err(ItemError::input)?;
    let largest = map.labels().iter().map(|label| label.id.0).max();
    Ok(u32::from(largest.unwrap_or(0)))
}
