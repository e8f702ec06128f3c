//! The dataset an import writes: AVA's files under AVA's names (so every consumer's defaults
//! find them), on AVA's clock, and a manifest of videos on disk.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{FIRST_KEYFRAME, ImportError, ImportOptions, ImportSummary, ImportedVideo};
use crate::annotations::{
    BoxLabel, FrameKey, KeyframeRange, LabelKind, PredictedBox, VideoId, read_excluded_timestamps,
    read_label_map,
};
use crate::layout::FolderName;
use crate::manifest::{DatasetInfo, DatasetManifest, Labels, LocalFiles, Split};

/// AVA's file names, which PySlowFast's and mmaction2's configs and avaprep's trainer expect.
pub const LABELS: &str = "ava_action_list_v2.2.pbtxt";
pub const LABELS_SCORED: &str = "ava_action_list_v2.2_for_activitynet_2019.pbtxt";
pub const INCLUDED: &str = "ava_included_timestamps_v2.2.txt";
pub const VIDEO_SPANS: &str = "video_spans.csv";
const DETECTOR_DIR: &str = "person_box_67091280_iou90";
pub const MANIFEST: &str = crate::layout::IMPORTED_MANIFEST;
pub const SUMMARY: &str = crate::layout::IMPORT_RECORD;
/// The pipeline written beside an imported dataset, once: every stage after the import.
pub const PIPELINE: &str = "pipeline.toml";

/// The repository's pipeline over an imported dataset, whose body `PIPELINE` takes.
const OWN_DATASET_PIPELINE: &str = include_str!("../../../../pipelines/own-dataset.toml");

/// The pipeline beside an imported dataset: where it is, and a note when one was there already
/// (kept: it is the user's) whose splits are not the dataset's.
pub struct DatasetPipeline {
    pub path: PathBuf,
    pub written: bool,
    pub note: Option<String>,
}

/// Writes `out/pipeline.toml` unless there is one (it is the user's to edit): the stages after
/// the import over `out/dataset.toml`, its splits those the import made.
pub fn write_pipeline(out: &Path, splits: &[&str]) -> Result<DatasetPipeline, ImportError> {
    let path = out.join(PIPELINE);
    if path.exists() {
        let note = kept_pipeline_note(&path, splits);
        return Ok(DatasetPipeline {
            path,
            written: false,
            note,
        });
    }
    let mut splits = splits.to_vec();
    splits.sort_by_key(|split| ["train", "val", TEST_SPLIT].iter().position(|s| s == split));
    let splits = &splits[..];
    let has_val = splits.contains(&"val");
    let quoted = |splits: &[&str]| -> String {
        let quoted: Vec<String> = splits.iter().map(|split| format!("\"{split}\"")).collect();
        quoted.join(", ")
    };
    // Eval scores val and predicts on test (whose detections are the point of it).
    let evaluated: Vec<&str> = ["val", TEST_SPLIT]
        .into_iter()
        .filter(|split| splits.contains(split))
        .collect();
    let mut table = "";
    let mut text = String::from(
        "# Written by `avaprep import` beside the dataset it wrote: every stage after the import\n\
         # (extract, lists, validate, train, eval, report), run with `avaprep --data-dir DIR run`\n\
         # and this file's path. It is yours to edit: importing again leaves it as it is.\n",
    );
    for line in OWN_DATASET_PIPELINE
        .lines()
        .skip_while(|line| line.starts_with('#') || line.is_empty())
    {
        if line.starts_with('[') {
            table = line;
        }
        let key = line.split_once(" = ").map(|(key, _)| key);
        match (table, key) {
            ("", Some("dataset")) => writeln!(text, "dataset = \"{MANIFEST}\""),
            ("", Some("splits")) => writeln!(text, "splits = [{}]", quoted(splits)),
            // Without a val split, training runs its whole schedule and nothing is scored.
            ("[train]", _) if !has_val && line == "[train]" => writeln!(
                text,
                "{line}\n# No val split: no early stopping, the last weights kept.\nsettings.val_split = \"\""
            ),
            ("[eval]", Some("splits")) => {
                let why = match (has_val, evaluated.is_empty()) {
                    (true, _) => "",
                    (false, true) => "# No val split: nothing to score.\n",
                    (false, false) => "# No val split: test is predicted on, nothing scored.\n",
                };
                writeln!(text, "{why}splits = [{}]", quoted(&evaluated))
            }
            _ => writeln!(text, "{line}"),
        }
        .expect("a string");
    }
    crate::fsutil::write_atomic(&path, text.as_bytes()).map_err(|source| ImportError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(DatasetPipeline {
        path,
        written: true,
        note: None,
    })
}

/// When the kept pipeline's `splits` are not the dataset's, or it leaves the videos to predict
/// on out of `[eval] splits` (extracted and listed, never predicted on): which keys to change.
fn kept_pipeline_note(path: &Path, splits: &[&str]) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let table: toml::Table = text.parse().ok()?;
    let names = |value: Option<&toml::Value>| -> Option<Vec<String>> {
        let names = value?.as_array()?.iter().filter_map(toml::Value::as_str);
        Some(names.map(String::from).collect())
    };
    let named = names(table.get("splits"))?;
    let mut wanted = splits.to_vec();
    wanted.sort_unstable();
    let mut sorted: Vec<&str> = named.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let only_test_missing = wanted.contains(&TEST_SPLIT)
        && !sorted.contains(&TEST_SPLIT)
        && wanted
            .iter()
            .filter(|split| **split != TEST_SPLIT)
            .eq(sorted.iter());
    if only_test_missing {
        return Some(format!(
            "{} (kept as it is: it is yours) leaves out the split {TEST_SPLIT}, the videos to predict on: add \"{TEST_SPLIT}\" to its `splits` and to [eval] `splits`",
            path.display()
        ));
    }
    if sorted != wanted {
        return Some(format!(
            "{} (kept as it is: it is yours) names the splits {}, the dataset has {}: change its `splits`, [train] `settings.val_split` and [eval] `splits`, or remove the file and import again to have it written for this dataset",
            path.display(),
            named.join(", "),
            splits.join(", ")
        ));
    }
    // `[eval]` without `splits` scores val alone, as the stage's default.
    let evaluated = names(table.get("eval").and_then(|eval| eval.get("splits")))
        .unwrap_or_else(|| vec!["val".to_string()]);
    (splits.contains(&TEST_SPLIT) && !evaluated.iter().any(|split| split == TEST_SPLIT)).then(|| {
        format!(
            "{} (kept as it is: it is yours) leaves {TEST_SPLIT} out of [eval] `splits`: its videos are extracted but never predicted on; add \"{TEST_SPLIT}\" there",
            path.display()
        )
    })
}

fn ground_truth(split: &str) -> String {
    format!("ava_{split}_v2.2.csv")
}

/// The split of the videos to predict on: detector boxes, no ground truth (AVA's test).
pub const TEST_SPLIT: &str = "test";

/// AVA's list of the test split's videos, which has no ground truth to list them.
fn video_ids(split: &str) -> String {
    format!("ava_{split}_v2.2.txt")
}

fn excluded_file(split: &str) -> String {
    format!("ava_{split}_excluded_timestamps_v2.2.csv")
}

/// PySlowFast's names for its person-detector files.
fn detections_file(split: &str) -> String {
    match split {
        "train" => {
            format!("{DETECTOR_DIR}/ava_detection_train_boxes_and_labels_include_negative_v2.2.csv")
        }
        other => format!("{DETECTOR_DIR}/ava_detection_{other}_boxes_and_labels.csv"),
    }
}

pub(super) fn write_dataset(
    options: &ImportOptions,
    videos: &[ImportedVideo],
    splits: &BTreeMap<String, Vec<VideoId>>,
    detections: &[PredictedBox],
    summary: &mut ImportSummary,
) -> Result<(), ImportError> {
    let annotations = options.out.join("annotations");
    let actions = action_ids(
        &annotations.join(LABELS),
        &annotations.join(LABELS_SCORED),
        videos,
    )?;
    summary.slipped_actions = slipped_actions(&actions);
    let by_id: BTreeMap<VideoId, &ImportedVideo> =
        videos.iter().map(|video| (video.id, video)).collect();
    let last_keyframe = videos
        .iter()
        .filter_map(|video| Some(video.dataset_second(*video.keyframes.last()?)))
        .max()
        .unwrap_or(0) as u32;
    let keyframes = FIRST_KEYFRAME..=last_keyframe;
    let known: BTreeSet<u16> = actions.iter().map(|action| action.id).collect();
    let test: BTreeSet<VideoId> = splits
        .get(TEST_SPLIT)
        .map_or_else(BTreeSet::new, |ids| ids.iter().copied().collect());
    let proposals = proposals(
        options, videos, detections, &test, &keyframes, &known, summary,
    )?;
    let excluded = excluded(options, videos, &keyframes, summary)?;
    let mut files: Vec<(String, String)> = vec![
        (LABELS.into(), label_map(&actions)),
        (LABELS_SCORED.into(), scored_label_map(&actions)),
    ];
    files.push((
        INCLUDED.into(),
        (FIRST_KEYFRAME..=last_keyframe)
            .map(|second| format!("{second:04}\n"))
            .collect(),
    ));
    let mut spans = String::new();
    for video in videos {
        let start = video.file_start as f64;
        let file = match video.file == video.id {
            true => String::new(),
            false => format!(",{}", video.file),
        };
        writeln!(
            spans,
            "{},{start},{:.6}{file}",
            video.id,
            start + video.duration
        )
        .expect("a string");
    }
    files.push((VIDEO_SPANS.into(), spans));
    for (split, ids) in splits {
        let members: Vec<&ImportedVideo> = ids.iter().map(|id| by_id[id]).collect();
        match split.as_str() {
            TEST_SPLIT => files.push((
                video_ids(split),
                ids.iter().map(|id| format!("{id}\n")).collect(),
            )),
            _ => files.push((ground_truth(split), ground_truth_rows(&members, &actions))),
        }
        let rows: String = excluded
            .iter()
            .filter(|key| ids.contains(&key.video))
            .map(|key| format!("{},{:04}\n", key.video, key.second))
            .collect();
        files.push((excluded_file(split), rows));
        let rows = proposals
            .iter()
            .filter(|(video, _)| ids.contains(video))
            .flat_map(|(_, rows)| rows.iter().map(String::as_str))
            .collect::<String>();
        if rows.is_empty() {
            return Err(no_proposals(options, split, ids));
        }
        files.push((detections_file(split), rows));
        summary
            .splits
            .insert(split.clone(), ids.iter().map(ToString::to_string).collect());
    }
    for (name, text) in &files {
        write(&annotations.join(name), text.as_bytes())?;
    }
    let manifest = manifest(options, splits, last_keyframe);
    let manifest_path = options.out.join(MANIFEST);
    let text = toml::to_string(&manifest).expect("a manifest serialises");
    write(
        &manifest_path,
        format!("{MANIFEST_HEADER}{text}").as_bytes(),
    )?;

    summary.manifest = manifest_path;
    summary.file_starts = videos
        .iter()
        .map(|video| (video.id.to_string(), video.file_start))
        .collect();
    for video in videos.iter().filter(|video| video.file != video.id) {
        summary
            .parts
            .entry(video.file.to_string())
            .or_default()
            .push(video.id.to_string());
    }
    summary.person_label_boxes = videos
        .iter()
        .flat_map(|video| &video.boxes)
        .filter(|keyframe_box| keyframe_box.actions.iter().any(|action| action == "person"))
        .count() as u64;
    summary.actions = actions
        .iter()
        .map(|action| (action.name.clone(), action.id))
        .collect();
    summary.actions_without_boxes = actions_without_boxes(&actions, videos);
    summary.keyframes = videos
        .iter()
        .map(|video| {
            video
                .boxes
                .iter()
                .map(|b| b.second)
                .collect::<BTreeSet<_>>()
                .len() as u64
        })
        .sum();
    summary.boxes = videos.iter().map(|video| video.boxes.len() as u64).sum();
    summary.actions_not_in_val = actions_not_in_val(videos, splits);
    if options.detections.is_some() {
        summary.whole_frame_boxes = videos
            .iter()
            .flat_map(|video| &video.boxes)
            .filter(|b| is_whole_frame(b.corners))
            .count() as u64;
    }
    summary.test_keyframes = splits.get(TEST_SPLIT).map_or(0, |ids| {
        ids.iter().map(|id| by_id[id].keyframes.len() as u64).sum()
    });
    summary.proposals = match &options.detections {
        Some(path) => path.display().to_string(),
        None => "ground truth (score 1.0)".into(),
    };
    let json = serde_json::to_vec_pretty(summary).expect("a summary serialises");
    write(&options.out.join(SUMMARY), &json)
}

fn is_whole_frame([x1, y1, x2, y2]: [f64; 4]) -> bool {
    const EDGE: f64 = 0.001;
    x1 <= EDGE && y1 <= EDGE && x2 >= 1.0 - EDGE && y2 >= 1.0 - EDGE
}

/// The actions of the label map no box has: an earlier import's (renamed since, or read from
/// another attribute) or the map's own, kept so that ids never change.
fn actions_without_boxes(actions: &[Action], videos: &[ImportedVideo]) -> Vec<String> {
    let boxed: BTreeSet<&str> = videos
        .iter()
        .flat_map(|video| &video.boxes)
        .flat_map(|b| b.actions.iter().map(String::as_str))
        .collect();
    actions
        .iter()
        .filter(|action| !boxed.contains(action.name.as_str()))
        .map(|action| action.name.clone())
        .collect()
}

/// The actions some labelled box has and no val box has (none without a val split).
fn actions_not_in_val(
    videos: &[ImportedVideo],
    splits: &BTreeMap<String, Vec<VideoId>>,
) -> Vec<String> {
    let Some(val) = splits.get("val") else {
        return Vec::new();
    };
    let actions_of = |in_val: bool| -> BTreeSet<&str> {
        videos
            .iter()
            .filter(|video| val.contains(&video.id) == in_val)
            .flat_map(|video| &video.boxes)
            .flat_map(|b| b.actions.iter().map(String::as_str))
            .collect()
    };
    let scored = actions_of(true);
    actions_of(false)
        .difference(&scored)
        .map(|name| name.to_string())
        .collect()
}

/// A split the detections box nobody in: its detection file would be empty, which no consumer
/// takes (an empty AVA file is a broken download), and nobody there would be scored.
fn no_proposals(options: &ImportOptions, split: &str, ids: &[VideoId]) -> ImportError {
    let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
    let detections = match &options.detections {
        Some(path) => format!("{}: the detections", path.display()),
        None => "the detections".to_string(),
    };
    ImportError::Usage(format!(
        "{detections} box nobody at a keyframe of the {split} videos ({}): add the detector's boxes of those videos (on their own seconds), or import without detections to use the ground truth's boxes",
        ids.join(", ")
    ))
}

const MANIFEST_HEADER: &str = "\
# Written by `avaprep import`. The dataset is on AVA's clock, so PySlowFast, pytorchvideo and
# mmaction2 read it unchanged: the earliest annotated keyframe lands on 902, AVA's first (a video
# that would pass 1798 has a clock of its own, a long one is cut into parts). A file's second s
# is the dataset's s + start, start from annotations/video_spans.csv (video_id,start,end[,file]).
";

fn write(path: &Path, bytes: &[u8]) -> Result<(), ImportError> {
    crate::fsutil::write_atomic(path, bytes).map_err(|source| ImportError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// An action of the label map: its name, its id, its AVA kind (an earlier map's, else a person's
/// movement: the kind is AVA's grouping, which no consumer reads), and whether it is scored.
struct Action {
    name: String,
    id: u16,
    kind: LabelKind,
    scored: bool,
    /// Named first by this import, not by an earlier one's label map.
    new: bool,
}

/// The actions: those of the label maps an earlier import wrote (or the user edited), kept as
/// they are, scored as they were, then each new name in the order the boxes first use it,
/// numbered on and scored.
fn action_ids(
    existing: &Path,
    existing_scored: &Path,
    videos: &[ImportedVideo],
) -> Result<Vec<Action>, ImportError> {
    let read = |path: &Path| {
        read_label_map(path).map_err(|error| ImportError::Input {
            path: path.to_path_buf(),
            message: format!("the label map of an earlier import cannot be read: {error}"),
        })
    };
    let scored: Option<BTreeSet<u16>> = match existing_scored.exists() {
        true => Some(
            read(existing_scored)?
                .labels()
                .iter()
                .map(|label| label.id.0)
                .collect(),
        ),
        false => None,
    };
    let mut actions: Vec<Action> = match existing.exists() {
        true => read(existing)?
            .labels()
            .iter()
            .map(|label| Action {
                name: label.name.clone(),
                id: label.id.0,
                kind: label.kind.unwrap_or(LabelKind::PersonMovement),
                scored: scored.as_ref().is_none_or(|ids| ids.contains(&label.id.0)),
                new: false,
            })
            .collect(),
        false => Vec::new(),
    };
    let mut next = actions.iter().map(|action| action.id).max().unwrap_or(0);
    for name in videos
        .iter()
        .flat_map(|video| &video.boxes)
        .flat_map(|b| &b.actions)
    {
        if !actions.iter().any(|action| action.name == *name) {
            next += 1;
            actions.push(Action {
                name: name.clone(),
                id: next,
                kind: LabelKind::PersonMovement,
                scored: true,
                new: true,
            });
        }
    }
    Ok(actions)
}

/// Each new action one slip of the keyboard from an action before it in the map: `stnad` and
/// `stand` (as two CVAT tasks' checkboxes spelt it), which would otherwise be two classes.
fn slipped_actions(actions: &[Action]) -> Vec<[String; 2]> {
    actions
        .iter()
        .enumerate()
        .filter(|(_, action)| action.new)
        .filter_map(|(i, action)| {
            let like = actions[..i]
                .iter()
                .find(|other| one_slip_apart(&action.name, &other.name))?;
            Some([action.name.clone(), like.name.clone()])
        })
        .collect()
}

/// The same but for case, spaces and punctuation (`Stand up`, `stand-up`), or, in names of five
/// letters or more, but for one letter added, dropped, changed, or two swapped. Shorter names
/// one letter apart are most often other words (`sit`, `hit`; `walk`, `talk`).
fn one_slip_apart(a: &str, b: &str) -> bool {
    let plain = |name: &str| -> String {
        name.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let (a, b) = (plain(a), plain(b));
    let shorter = a.chars().count().min(b.chars().count());
    a == b || (shorter >= 5 && strsim::osa_distance(&a, &b) == 1)
}

fn label_map(actions: &[Action]) -> String {
    let mut text = String::new();
    for action in actions {
        writeln!(
            text,
            "label {{\n  name: \"{}\"\n  label_id: {}\n  label_type: {}\n}}",
            pbtxt_string(&action.name),
            action.id,
            action.kind.as_pbtxt()
        )
        .expect("a string");
    }
    text
}

fn scored_label_map(actions: &[Action]) -> String {
    let mut text = String::new();
    for action in actions.iter().filter(|action| action.scored) {
        let name = pbtxt_string(&action.name);
        writeln!(text, "item {{\n  name: \"{name}\"\n  id: {}\n}}", action.id).expect("a string");
    }
    text
}

/// A name inside pbtxt's double quotes.
fn pbtxt_string(name: &str) -> String {
    name.replace('\\', "\\\\").replace('"', "\\\"")
}

/// AVA's ground-truth rows, on AVA's clock, sorted as the official files are.
fn ground_truth_rows(videos: &[&ImportedVideo], actions: &[Action]) -> String {
    let id_of = |name: &str| {
        actions
            .iter()
            .find(|action| action.name == name)
            .map(|action| action.id)
            .expect("every action has an id")
    };
    let mut rows = Vec::new();
    for video in videos {
        for b in &video.boxes {
            let mut ids: Vec<u16> = b.actions.iter().map(|name| id_of(name)).collect();
            ids.sort_unstable();
            ids.dedup();
            for action in ids {
                rows.push((
                    video.id,
                    video.dataset_second(b.second),
                    b.person,
                    action,
                    b.corners,
                ));
            }
        }
    }
    rows.sort_by_key(|row| (row.0, row.1, row.2, row.3));
    let mut text = String::new();
    for (video, second, person, action, [x1, y1, x2, y2]) in rows {
        writeln!(
            text,
            "{video},{second:04},{x1:.3},{y1:.3},{x2:.3},{y2:.3},{action},{person}"
        )
        .expect("a string");
    }
    text
}

/// Person boxes for the consumers that detect before they classify (PySlowFast's and
/// mmaction2's test boxes, avaprep's eval), by video: a detector's, shifted onto AVA's clock
/// (their label column kept: empty, -1 or an action id), or each ground-truth box once with
/// score 1.0.
/// Detector rows at seconds outside the dataset's keyframes (a detector boxes every second) are
/// left out and counted; an action id the label map lacks is an error naming it.
fn proposals(
    options: &ImportOptions,
    videos: &[ImportedVideo],
    rows: &[PredictedBox],
    test: &BTreeSet<VideoId>,
    keyframes: &std::ops::RangeInclusive<u32>,
    actions: &BTreeSet<u16>,
    summary: &mut ImportSummary,
) -> Result<BTreeMap<VideoId, Vec<String>>, ImportError> {
    let mut by_video: BTreeMap<VideoId, Vec<String>> = BTreeMap::new();
    match &options.detections {
        Some(path) => {
            let known: BTreeSet<VideoId> = videos.iter().map(|video| video.file).collect();
            let mut others = BTreeSet::new();
            // A file joined twice, or boxes the same to the written digits, repeat a row.
            let mut written_rows = std::collections::HashSet::new();
            for row in rows {
                if !known.contains(&row.key.video) {
                    // A test video left out is named with why, not as another video.
                    if !options.test.contains(row.key.video.as_str()) {
                        others.insert(row.key.video.to_string());
                    }
                    continue;
                }
                // A test video's keyframes are the detector's own, on the keyframe interval.
                let placed = super::place(videos, row.key.video, row.key.second).filter(
                    |(video, second)| {
                        keyframes.contains(second)
                            && (!test.contains(&video.id)
                                || video.keyframes.contains(&row.key.second))
                    },
                );
                let Some((video, second)) = placed else {
                    summary.detections_off_keyframes += 1;
                    continue;
                };
                let b = row.bbox;
                let label = match row.label {
                    BoxLabel::Unlabelled => String::new(),
                    BoxLabel::Negative => "-1".into(),
                    BoxLabel::Action(id) if actions.contains(&id.0) => id.to_string(),
                    BoxLabel::Action(id) => {
                        return Err(ImportError::Input {
                            path: path.clone(),
                            message: format!(
                                "{}, second {}: action id {id} is not in the label map the import writes (its ids: {}); leave the label column empty, or -1",
                                row.key.video,
                                row.key.second,
                                actions
                                    .iter()
                                    .map(u16::to_string)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        });
                    }
                };
                let written = format!(
                    "{},{second:04},{:.3},{:.3},{:.3},{:.3},{label},{:.6}\n",
                    video.id,
                    b.x1(),
                    b.y1(),
                    b.x2(),
                    b.y2(),
                    row.score
                );
                if written_rows.insert(written.clone()) {
                    by_video.entry(video.id).or_default().push(written);
                } else {
                    summary.detections_repeated += 1;
                }
            }
            summary.detections_of_other_videos = others.into_iter().collect();
            summary.videos_without_detections = videos
                .iter()
                .filter(|video| !by_video.contains_key(&video.id))
                .map(|video| video.id.to_string())
                .collect();
        }
        None => {
            for video in videos {
                let rows = by_video.entry(video.id).or_default();
                let mut seen = BTreeSet::new();
                for b in &video.boxes {
                    let [x1, y1, x2, y2] = b.corners;
                    let row = format!(
                        "{},{:04},{x1:.3},{y1:.3},{x2:.3},{y2:.3},,1.0\n",
                        video.id,
                        video.dataset_second(b.second)
                    );
                    if seen.insert(row.clone()) {
                        rows.push(row);
                    }
                }
            }
        }
    }
    Ok(by_video)
}

/// The keyframes the user excludes, shifted onto AVA's clock; those outside the dataset's
/// keyframes exclude nothing and are left out, counted.
fn excluded(
    options: &ImportOptions,
    videos: &[ImportedVideo],
    keyframes: &std::ops::RangeInclusive<u32>,
    summary: &mut ImportSummary,
) -> Result<Vec<FrameKey>, ImportError> {
    let Some(path) = &options.excluded else {
        return Ok(Vec::new());
    };
    let range = KeyframeRange::new(0, u32::MAX).expect("a range");
    let keys = read_excluded_timestamps(path, range).map_err(|source| ImportError::Table {
        source,
        format: "excluded keyframes are AVA's CSV, video,second, on the videos' own seconds",
    })?;
    let mut inside = Vec::new();
    for key in keys {
        match super::place(videos, key.video, key.second) {
            Some((video, second)) if keyframes.contains(&second) => inside.push(FrameKey {
                video: video.id,
                second,
            }),
            _ => summary.exclusions_off_keyframes += 1,
        }
    }
    Ok(inside)
}

fn manifest(
    options: &ImportOptions,
    splits: &BTreeMap<String, Vec<VideoId>>,
    last_keyframe: u32,
) -> DatasetManifest {
    let folder = FolderName::try_from("videos").expect("a plain folder name");
    let videos = std::path::absolute(&options.videos).unwrap_or_else(|_| options.videos.clone());
    // AVA's segment: 2 s before its first keyframe to 3 s after its last. A shorter file's
    // lists end with it (its span); the views run on to the segment's end.
    let start = f64::from(FIRST_KEYFRAME - 2);
    let end = f64::from(last_keyframe + 3);
    DatasetManifest {
        dataset: DatasetInfo {
            name: options
                .out
                .file_name()
                .map_or("own".into(), |name| name.to_string_lossy().into_owned()),
            version: "imported".into(),
            segment: [start, end],
            keyframes: [FIRST_KEYFRAME, last_keyframe],
            video_spans: Some(VIDEO_SPANS.into()),
            video_start: 0.0,
            own_clock: true,
            ground_truth_proposals: options.detections.is_none(),
        },
        sources: BTreeMap::new(),
        annotations: None,
        name_lists: BTreeMap::new(),
        boxes: None,
        videos: BTreeMap::new(),
        local: Some(LocalFiles {
            videos,
            annotations: PathBuf::from("annotations"),
        }),
        labels: Labels {
            full: LABELS.into(),
            scored: LABELS_SCORED.into(),
            included_timestamps: INCLUDED.into(),
        },
        splits: splits
            .keys()
            .map(|split| {
                (
                    split.clone(),
                    Split {
                        videos: folder.clone(),
                        ground_truth: (split != TEST_SPLIT).then(|| ground_truth(split)),
                        video_ids: (split == TEST_SPLIT).then(|| video_ids(split)),
                        excluded_timestamps: Some(excluded_file(split)),
                        detected_boxes: Some(detections_file(split)),
                    },
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_actions(names: &[&str]) -> Vec<Action> {
        (1..)
            .zip(names)
            .map(|(id, name)| Action {
                name: name.to_string(),
                id,
                kind: LabelKind::PersonMovement,
                scored: true,
                new: true,
            })
            .collect()
    }

    /// A misspelt checkbox is named beside the action it most likely is; AVA's own 80 actions,
    /// and short words one letter apart, are not.
    #[test]
    fn a_new_action_one_slip_from_another_is_named_with_it() {
        let actions = new_actions(&["stand", "walk", "stnad", "talk", "Stand-up", "stand up"]);
        assert_eq!(
            slipped_actions(&actions),
            [
                ["stnad".to_string(), "stand".to_string()],
                ["stand up".to_string(), "Stand-up".to_string()]
            ]
        );
        let mut earlier = new_actions(&["stand", "stnad"]);
        earlier.iter_mut().for_each(|action| action.new = false);
        assert_eq!(slipped_actions(&earlier), Vec::<[String; 2]>::new());
        let ava = crate::testing::repo_root().join("tests/data/ava/ava_action_list_v2.2.pbtxt");
        let map = read_label_map(&ava).unwrap();
        let names: Vec<&str> = map
            .labels()
            .iter()
            .map(|label| label.name.as_str())
            .collect();
        assert_eq!(names.len(), 80);
        assert_eq!(
            slipped_actions(&new_actions(&names)),
            Vec::<[String; 2]>::new()
        );
    }

    /// The pipeline written beside a dataset, with a val split and without: the template's
    /// keys, the dataset beside it, and no val named where the dataset has none.
    #[test]
    fn the_pipeline_beside_a_dataset_names_its_splits() {
        let folder = tempfile::tempdir().unwrap();
        let read = |splits: &[&str]| -> toml::Table {
            let out = folder.path().join(splits.join("-"));
            let written = write_pipeline(&out, splits).unwrap();
            assert!(written.written && written.note.is_none());
            std::fs::read_to_string(&written.path)
                .unwrap()
                .parse()
                .unwrap()
        };
        let strings = |value: &toml::Value| -> Vec<String> {
            let items = value.as_array().unwrap().iter();
            items
                .map(|item| item.as_str().unwrap().to_string())
                .collect()
        };
        let kept = |text: &str, splits: &[&str]| {
            let out = folder.path().join("kept");
            std::fs::create_dir_all(&out).unwrap();
            std::fs::write(out.join(PIPELINE), text).unwrap();
            let kept = write_pipeline(&out, splits).unwrap();
            assert!(!kept.written);
            assert_eq!(std::fs::read_to_string(&kept.path).unwrap(), text);
            kept.note.unwrap_or_default()
        };
        let everything =
            "splits = [\"train\", \"val\", \"test\"]\n[eval]\nsplits = [\"val\", \"test\"]\n";
        assert_eq!(kept(everything, &["train", "val", "test"]), "");
        let without_test = "splits = [\"train\", \"val\"]\n[eval]\nsplits = [\"val\"]\n";
        let note = kept(without_test, &["train", "val", "test"]);
        assert!(
            note.contains("leaves out the split test") && !note.contains("val_split"),
            "{note}"
        );
        let note = kept(everything, &["train", "val"]);
        assert!(
            note.contains("names the splits train, val, test, the dataset has train, val"),
            "{note}"
        );
        for text in [
            "splits = [\"val\", \"train\", \"test\"]\n[eval]\nsplits = [\"val\"]\n",
            "splits = [\"train\", \"val\", \"test\"]\n",
        ] {
            let note = kept(text, &["train", "val", "test"]);
            assert!(
                note.contains("leaves test out of [eval] `splits`"),
                "{text}: {note}"
            );
        }
        let with_val = read(&["train", "val"]);
        assert_eq!(with_val["dataset"].as_str(), Some(MANIFEST));
        assert_eq!(strings(&with_val["splits"]), ["train", "val"]);
        assert_eq!(strings(&with_val["eval"]["splits"]), ["val"]);
        assert!(with_val["train"].get("settings").is_none());
        assert_eq!(with_val["train"]["preset"].as_str(), Some("ava-r50"));
        for table in ["extract", "lists", "report"] {
            assert!(with_val[table].is_table(), "{table}");
        }
        let train_only = read(&["train"]);
        assert_eq!(strings(&train_only["splits"]), ["train"]);
        assert!(strings(&train_only["eval"]["splits"]).is_empty());
        assert_eq!(
            train_only["train"]["settings"]["val_split"].as_str(),
            Some("")
        );
        // Test videos are predicted on by eval, with val or without it.
        let with_test = read(&["test", "train", "val"]);
        assert_eq!(strings(&with_test["splits"]), ["train", "val", "test"]);
        assert_eq!(strings(&with_test["eval"]["splits"]), ["val", "test"]);
        let test_no_val = read(&["test", "train"]);
        assert_eq!(strings(&test_no_val["eval"]["splits"]), ["test"]);
        assert_eq!(
            test_no_val["train"]["settings"]["val_split"].as_str(),
            Some("")
        );
        // Kept as the user left it; a note when its splits are not the dataset's.
        let out = folder.path().join("train");
        let again = write_pipeline(&out, &["train", "val"]).unwrap();
        assert!(!again.written);
        assert!(
            again
                .note
                .unwrap()
                .contains("names the splits train, the dataset has train, val")
        );
        assert!(write_pipeline(&out, &["train"]).unwrap().note.is_none());
    }
}
