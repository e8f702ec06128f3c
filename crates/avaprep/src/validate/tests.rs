//! Validation of a small hand-made dataset in PySlowFast's layout with real JPEGs: clean, it
//! passes every check; with each defect users report planted, the check for it fails and names
//! it, and no unrelated check does.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

static NOT_CANCELLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

use sha2::{Digest, Sha256};

use super::*;
use crate::progress::Silent;
use crate::stages::lists::FRAME_LIST_HEADER;

const TRAIN: [&str; 2] = ["trainvideo1", "trainvideo2"];
const VAL: &str = "valvideo001";
const FPS: f64 = 5.0;
const SEGMENT: [f64; 2] = [900.0, 910.0];
const SOURCE_FRAME: f64 = 1.0 / 30.0;
const LABEL_MAP: &str =
    include_str!("../../../../tests/data/ava/ava_action_list_v2.2_for_activitynet_2019.pbtxt");
const EXCLUDED_SECOND: u32 = 905;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Fixture {
    fn frames(&self) -> PathBuf {
        self.root.join("frames")
    }
    fn lists(&self) -> PathBuf {
        self.root.join("frame_lists")
    }
    fn annotations(&self) -> PathBuf {
        self.root.join("annotations")
    }
    fn index(&self, video: &str) -> PathBuf {
        self.root.join("frame_index").join(format!("{video}.csv"))
    }
    fn frame(&self, video: &str, k: u32) -> PathBuf {
        self.frames()
            .join(video)
            .join(crate::layout::frame_file_name(video, k))
    }

    fn request(&self, depth: Depth) -> ValidateRequest {
        ValidateRequest {
            frame_dir: self.frames(),
            frame_list_dir: self.lists(),
            annotation_dir: self.annotations(),
            frame_index_dir: Some(self.root.join("frame_index")),
            names: DatasetNames::default(),
            timing: ListTiming {
                list_fps: 30.0,
                segment_start: SEGMENT[0],
                segment_end: SEGMENT[1],
                num_frames: 8,
                sampling_rate: 2,
                keyframes: [902, 907],
            },
            height: Some(18),
            known_sha256: BTreeMap::new(),
            depth,
            mmaction2_view: None,
            detection_score_thresh: 0.8,
            video_spans: BTreeMap::new(),
            other_splits: BTreeMap::new(),
        }
    }

    fn validate(&self, depth: Depth) -> ValidationReport {
        validate(&self.request(depth), &Silent, &NOT_CANCELLED).unwrap()
    }

    /// Rewrites an annotation file line by line (its SHA256SUMS entry stays: an edit).
    fn edit_annotation(&self, name: &str, edit: impl FnOnce(&mut Vec<String>)) {
        edit_lines(&self.annotations().join(name), edit);
    }
}

fn edit_lines(path: &Path, edit: impl FnOnce(&mut Vec<String>)) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    edit(&mut lines);
    fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn jpeg(width: u32, height: u32, shade: u8) -> Vec<u8> {
    let image = image::RgbImage::from_pixel(width, height, image::Rgb([shade, 64, 128]));
    let mut bytes = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, 90)
        .encode_image(&image)
        .unwrap();
    bytes
}

/// Three videos of 10 s at 5 fps (50 frames of 32x18), lists at 30 rows a second, boxes at
/// keyframes 902..=907 (val without the excluded 905), a detector's boxes for val, checksums.
fn dataset() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let fixture = Fixture { _dir: dir, root };
    let videos: Vec<&str> = TRAIN.iter().copied().chain([VAL]).collect();
    let mut lists: BTreeMap<&str, String> = BTreeMap::new();
    for (number, video) in videos.iter().enumerate() {
        let list_name = if *video == VAL {
            "val.csv"
        } else {
            "train.csv"
        };
        let list = lists
            .entry(list_name)
            .or_insert_with(|| format!("{FRAME_LIST_HEADER}\n"));
        list.push_str(&fixture.write_video(video, number));
    }
    fs::create_dir_all(fixture.lists()).unwrap();
    for (name, text) in lists {
        fs::write(fixture.lists().join(name), text).unwrap();
    }
    let annotations = fixture.annotations();
    fs::create_dir_all(&annotations).unwrap();
    let files = [
        (
            "ava_train_v2.2.csv",
            box_rows(TRAIN[0], None, false) + &box_rows(TRAIN[1], None, false),
        ),
        (
            "ava_val_v2.2.csv",
            box_rows(VAL, Some(EXCLUDED_SECOND), false),
        ),
        ("ava_val_predicted_boxes.csv", box_rows(VAL, None, true)),
        (
            "ava_val_excluded_timestamps_v2.2.csv",
            format!("{VAL},{EXCLUDED_SECOND}\n"),
        ),
        (
            "ava_action_list_v2.2_for_activitynet_2019.pbtxt",
            LABEL_MAP.to_string(),
        ),
    ];
    let mut sums = String::new();
    for (name, text) in files {
        fs::write(annotations.join(name), &text).unwrap();
        writeln!(
            sums,
            "{}  {name}",
            hex::encode(Sha256::digest(text.as_bytes()))
        )
        .unwrap();
    }
    fs::write(annotations.join("SHA256SUMS"), sums).unwrap();
    fixture
}

/// A video's boxes at keyframes 902..=907 but `skip`: two ground-truth labels per box, or one
/// detector's box scoring 0.95.
fn box_rows(video: &str, skip: Option<u32>, predicted: bool) -> String {
    let mut text = String::new();
    for second in 902..=907u32 {
        if Some(second) == skip {
            continue;
        }
        let tail = if predicted { ",,0.95" } else { ",12,0" };
        writeln!(text, "{video},{second},0.100,0.200,0.500,0.900{tail}").unwrap();
        if !predicted {
            writeln!(text, "{video},{second},0.100,0.200,0.500,0.900,17,0").unwrap();
        }
    }
    text
}

impl Fixture {
    /// A video's frames and frame index (10 s at 5 fps of 32x18); returns its list rows, 30 a
    /// second, numbered `number`.
    fn write_video(&self, video: &str, number: usize) -> String {
        let frame_count = ((SEGMENT[1] - SEGMENT[0]) * FPS) as u32;
        fs::create_dir_all(self.frames().join(video)).unwrap();
        fs::create_dir_all(self.index(video).parent().unwrap()).unwrap();
        let mut index = format!("{}\n", crate::frame_index::HEADER);
        for k in 1..=frame_count {
            fs::write(self.frame(video, k), jpeg(32, 18, k as u8)).unwrap();
            let target = SEGMENT[0] + f64::from(k - 1) / FPS;
            // The source frame nearest the target on a 30 fps grid starting 0.01 s late.
            let source = 0.01 + ((target - 0.01) / SOURCE_FRAME).round() * SOURCE_FRAME;
            writeln!(
                index,
                "{k},{target:.6},{source:.6},32,18,{SOURCE_FRAME:.6},{source:.6}"
            )
            .unwrap();
        }
        fs::write(self.index(video), index).unwrap();
        let mut rows = String::new();
        for row in 0..((SEGMENT[1] - SEGMENT[0]) * 30.0) as u32 {
            let at = SEGMENT[0] + f64::from(row) / 30.0;
            let k = (((at - SEGMENT[0]) * FPS).round() as u32 + 1).min(frame_count);
            writeln!(
                rows,
                "{video} {number} {row} {video}/{} \"\"",
                crate::layout::frame_file_name(video, k)
            )
            .unwrap();
        }
        rows
    }

    /// A split the config does not name, as `avaprep lists` writes one to predict on:
    /// `test.csv` of [`TEST`] and a detector's boxes of it, recorded in the request.
    fn add_test_split(&self, request: &mut ValidateRequest) {
        let rows = self.write_video(TEST, 3);
        fs::write(
            self.lists().join("test.csv"),
            format!("{FRAME_LIST_HEADER}\n{rows}"),
        )
        .unwrap();
        fs::write(
            self.annotations().join(TEST_DETECTIONS),
            box_rows(TEST, None, true),
        )
        .unwrap();
        let files = SplitFiles {
            detected_boxes: Some(TEST_DETECTIONS.into()),
            ..SplitFiles::default()
        };
        request.other_splits = BTreeMap::from([("test".to_string(), files)]);
    }
}

const TEST: &str = "testvideo01";
const TEST_DETECTIONS: &str = "ava_detection_test_boxes_and_labels.csv";

fn failed(report: &ValidationReport) -> BTreeSet<CheckId> {
    report.failed_checks().map(|check| check.id).collect()
}

#[test]
fn the_clean_dataset_passes_every_check() {
    let fixture = dataset();
    let report = fixture.validate(Depth::Full);
    // The fixture has no loader view; tests/cli/lists.rs checks one.
    for check in &report.checks {
        let expected = if check.id == CheckId::LoaderViews {
            CheckStatus::Skipped
        } else {
            CheckStatus::Passed
        };
        assert_eq!(
            check.status(),
            expected,
            "{}: {:?} {:?}",
            check.id.name(),
            check.examples,
            check.skipped
        );
        if expected == CheckStatus::Passed {
            assert!(check.checked > 0, "{} checked nothing", check.id.name());
        }
    }
    assert!(report.passed);
    assert_eq!(report.frames_listed, 150);
    assert_eq!(report.frames_decoded, 150);
    // 5 train + 1 val keyframes per video... every keyframe's clip was looked at.
    assert_eq!(report.check(CheckId::ClipFrames).checked, 6 + 6 + 6);
}

/// A keyframe that only the detector's boxes name, all below the config's threshold, is no
/// keyframe for PySlowFast (it skips such boxes), so its clip is not checked; at or above the
/// threshold it is. Before, every detector box made a keyframe, so AVA-timed data failed
/// clip-frames on keyframes no loader reads.
#[test]
fn only_detector_boxes_that_pass_the_threshold_make_keyframes() {
    let fixture = dataset();
    let predicted = fixture.annotations().join("ava_val_predicted_boxes.csv");
    edit_lines(&predicted, |lines| {
        for line in lines.iter_mut() {
            if line.contains(&format!(",{EXCLUDED_SECOND},")) {
                *line = line.replace(",0.95", ",0.5");
            }
        }
    });
    let clips = |thresh: f64| {
        let mut request = fixture.request(Depth::Quick);
        request.detection_score_thresh = thresh;
        validate(&request, &Silent, &NOT_CANCELLED)
            .unwrap()
            .check(CheckId::ClipFrames)
            .checked
    };
    // 6 keyframes in each of the three videos; the val one named by the detector alone now
    // scores 0.5.
    assert_eq!(clips(0.8), 17);
    assert_eq!(clips(0.4), 18);
}

/// Each list numbers its own videos (AVA's val list starts again at 0): PySlowFast reads only
/// the names and paths, so list-order accepts it. Before, only one numbering across all lists
/// passed.
#[test]
fn a_list_that_numbers_its_videos_from_zero_passes() {
    let fixture = dataset();
    edit_lines(&fixture.lists().join("val.csv"), |lines| {
        for line in lines.iter_mut().skip(1) {
            let mut fields: Vec<&str> = line.split(' ').collect();
            fields[1] = "0";
            *line = fields.join(" ");
        }
    });
    let report = fixture.validate(Depth::Quick);
    assert_eq!(
        report.check(CheckId::ListOrder).status(),
        CheckStatus::Passed,
        "{:?}",
        report.check(CheckId::ListOrder).examples
    );
}

/// A planted defect: what it does, the checks that must fail (and the text their examples must
/// hold), and checks it may also fail as a consequence.
struct Defect {
    name: &'static str,
    plant: fn(&Fixture),
    must: &'static [(CheckId, &'static str)],
    may: &'static [CheckId],
}

fn defects() -> Vec<Defect> {
    vec![
        Defect {
            // Every video dropped, or none extracted: once "passed" with 0 frames.
            name: "lists of no frame",
            plant: |f| {
                for entry in fs::read_dir(f.lists()).unwrap() {
                    let list = entry.unwrap().path();
                    fs::write(list, format!("{FRAME_LIST_HEADER}\n")).unwrap();
                }
            },
            must: &[(CheckId::FramesExist, "the frame lists name no frame")],
            may: &CheckId::ALL,
        },
        Defect {
            name: "missing frame",
            plant: |f| fs::remove_file(f.frame(TRAIN[0], 11)).unwrap(),
            must: &[
                (CheckId::FramesExist, "trainvideo1_000011.jpg: missing"),
                (CheckId::ClipFrames, "trainvideo1 keyframe 902"),
            ],
            may: &[],
        },
        Defect {
            name: "corrupt JPEG",
            plant: |f| fs::write(f.frame(VAL, 20), b"\xff\xd8\xff\xe0 not a jpeg").unwrap(),
            must: &[(
                CheckId::FramesDecode,
                "valvideo001_000020.jpg: does not decode",
            )],
            may: &[],
        },
        Defect {
            name: "wrong size",
            plant: |f| fs::write(f.frame(TRAIN[1], 30), jpeg(16, 10, 7)).unwrap(),
            must: &[
                (CheckId::FramesDecode, "trainvideo2_000030.jpg: 16x10"),
                (CheckId::FrameSizes, "trainvideo2: frames of 2 sizes"),
            ],
            may: &[],
        },
        Defect {
            name: "box out of range",
            plant: |f| {
                f.edit_annotation("ava_train_v2.2.csv", |lines| {
                    lines[3] = lines[3].replace("0.500", "1.200")
                })
            },
            must: &[
                (CheckId::BoxesInRange, "ava_train_v2.2.csv:4: box"),
                (CheckId::Checksums, "ava_train_v2.2.csv"),
            ],
            may: &[],
        },
        Defect {
            name: "unknown label",
            plant: |f| {
                f.edit_annotation("ava_val_v2.2.csv", |lines| {
                    lines[0] = lines[0].replace(",12,0", ",99,0")
                })
            },
            must: &[
                (CheckId::LabelsKnown, "ava_val_v2.2.csv:1: action 99"),
                (CheckId::Checksums, "ava_val_v2.2.csv"),
            ],
            may: &[],
        },
        Defect {
            name: "header row",
            plant: |f| {
                f.edit_annotation("ava_train_v2.2.csv", |lines| {
                    lines.insert(
                        0,
                        "video_id,timestamp,x1,y1,x2,y2,action_id,person_id".into(),
                    )
                })
            },
            must: &[
                (CheckId::AnnotationFormat, "ava_train_v2.2.csv:1:"),
                (CheckId::Checksums, "ava_train_v2.2.csv"),
            ],
            may: &[],
        },
        Defect {
            name: "quoted id",
            plant: |f| {
                f.edit_annotation("ava_train_v2.2.csv", |lines| {
                    lines[2] = lines[2].replace(TRAIN[0], &format!("\"{}\"", TRAIN[0]))
                })
            },
            must: &[
                (
                    CheckId::AnnotationFormat,
                    "ava_train_v2.2.csv:3: video id `\"trainvideo1\"`",
                ),
                (CheckId::Checksums, "ava_train_v2.2.csv"),
            ],
            may: &[],
        },
        Defect {
            name: "mismatched video sets",
            plant: |f| {
                f.edit_annotation("ava_train_v2.2.csv", |lines| {
                    lines.retain(|line| !line.starts_with(TRAIN[1]))
                })
            },
            must: &[
                (
                    CheckId::VideoSets,
                    "1 video of the train lists (train.csv) has no rows in it: trainvideo2",
                ),
                (CheckId::Checksums, "ava_train_v2.2.csv"),
            ],
            may: &[],
        },
        Defect {
            name: "a video renumbered within its list",
            plant: |f| {
                edit_lines(&f.lists().join("train.csv"), |lines| {
                    lines[50] = lines[50].replacen(" 0 ", " 7 ", 1);
                });
            },
            must: &[(
                CheckId::ListOrder,
                "train.csv:51: video_id 7 for trainvideo1, which its earlier rows number 0",
            )],
            may: &[],
        },
        Defect {
            name: "list row out of order",
            plant: |f| {
                edit_lines(&f.lists().join("train.csv"), |lines| lines.swap(40, 70));
            },
            must: &[(
                CheckId::ListOrder,
                "train.csv:41: frame_id 69 of trainvideo1",
            )],
            may: &[CheckId::ListTiming, CheckId::ClipFrames],
        },
        Defect {
            name: "a video's rows cut short",
            plant: |f| {
                edit_lines(&f.lists().join("val.csv"), |lines| {
                    lines.truncate(lines.len() - 10)
                });
            },
            must: &[(
                CheckId::RowCounts,
                "valvideo001: 290 rows in the test lists",
            )],
            may: &[],
        },
        Defect {
            name: "list row at the wrong time",
            plant: |f| {
                edit_lines(&f.lists().join("val.csv"), |lines| {
                    let mut tokens: Vec<&str> = lines[100].split(' ').collect();
                    tokens[3] = "valvideo001/valvideo001_000001.jpg";
                    lines[100] = tokens.join(" ");
                });
            },
            must: &[(CheckId::ListTiming, "valvideo001 row 99")],
            may: &[CheckId::ClipFrames],
        },
        Defect {
            name: "frame timing off",
            plant: |f| {
                edit_lines(&f.index(TRAIN[0]), |lines| {
                    let fields: Vec<&str> = lines[7].split(',').collect();
                    let source: f64 = fields[2].parse::<f64>().unwrap() + 0.1;
                    lines[7] = format!(
                        "{},{},{source:.6},{},{},{},{source:.6}",
                        fields[0], fields[1], fields[3], fields[4], fields[5]
                    );
                });
            },
            must: &[(
                CheckId::FrameTiming,
                "trainvideo1 frame 7: shows the source frame",
            )],
            may: &[],
        },
        Defect {
            name: "a malformed list row among a video's rows",
            plant: |f| {
                edit_lines(&f.lists().join("val.csv"), |lines| {
                    lines[50] = "valvideo001 2 49".into();
                    lines[120] = "?? ?? 119".into();
                });
            },
            // The rows after each keep their places: no timing or clip check fails for them.
            must: &[
                (CheckId::ListFormat, "val.csv:51: 3 space-separated tokens"),
                (CheckId::ListFormat, "val.csv:121: 3 space-separated tokens"),
            ],
            may: &[],
        },
        Defect {
            name: "frames before the file begins (a video start after the range)",
            plant: |f| {
                edit_lines(&f.index(TRAIN[0]), |lines| {
                    let first: Vec<String> = lines[11].split(',').map(str::to_string).collect();
                    for line in &mut lines[1..=10] {
                        let mut fields: Vec<String> = line.split(',').map(str::to_string).collect();
                        fields[2] = first[2].clone();
                        fields[5] = String::new();
                        fields[6] = first[6].clone();
                        *line = fields.join(",");
                    }
                });
            },
            must: &[(
                CheckId::FrameTiming,
                "trainvideo1 frame 1: its target 900.000000 s is 2.010000 s before the file's first frame",
            )],
            may: &[],
        },
        Defect {
            name: "edited annotation file",
            plant: |f| {
                f.edit_annotation("ava_val_predicted_boxes.csv", |lines| {
                    lines[0] = lines[0].replace("0.95", "0.15")
                })
            },
            must: &[(CheckId::Checksums, "ava_val_predicted_boxes.csv: sha256")],
            may: &[],
        },
        Defect {
            name: "second outside the keyframes",
            plant: |f| {
                f.edit_annotation("ava_train_v2.2.csv", |lines| {
                    lines[0] = lines[0].replace(",902,", ",950,")
                })
            },
            must: &[
                (CheckId::SecondsInRange, "ava_train_v2.2.csv:1: second 950"),
                (CheckId::Checksums, "ava_train_v2.2.csv"),
            ],
            // Its clip, clamped to the list's end, reaches past the extracted frames.
            may: &[CheckId::ClipFrames],
        },
        Defect {
            name: "an exclusion of a dropped video",
            plant: |f| {
                f.edit_annotation("ava_val_excluded_timestamps_v2.2.csv", |lines| {
                    lines.push("droppedvid1,903".into())
                })
            },
            must: &[
                (
                    CheckId::Exclusions,
                    "droppedvid1,903: droppedvid1 is in no frame list",
                ),
                (CheckId::Checksums, "ava_val_excluded_timestamps_v2.2.csv"),
            ],
            may: &[],
        },
        Defect {
            name: "duplicate row",
            plant: |f| {
                f.edit_annotation("ava_val_v2.2.csv", |lines| {
                    let first = lines[0].clone();
                    lines.push(first)
                })
            },
            must: &[
                (CheckId::DuplicateRows, "ava_val_v2.2.csv:11: repeats"),
                (CheckId::Checksums, "ava_val_v2.2.csv"),
            ],
            may: &[],
        },
    ]
}

#[test]
fn each_planted_defect_fails_its_check_and_names_it() {
    for defect in defects() {
        let fixture = dataset();
        (defect.plant)(&fixture);
        let report = fixture.validate(Depth::Full);
        assert!(!report.passed, "{}: passed", defect.name);
        let failed = failed(&report);
        for (id, text) in defect.must {
            let check = report.check(*id);
            assert_eq!(
                check.status(),
                CheckStatus::Failed,
                "{}: {} did not fail",
                defect.name,
                id.name()
            );
            assert!(
                check.examples.iter().any(|example| example.contains(text)),
                "{}: {} examples {:?} lack {text:?}",
                defect.name,
                id.name(),
                check.examples
            );
        }
        let allowed: BTreeSet<CheckId> = defect
            .must
            .iter()
            .map(|(id, _)| *id)
            .chain(defect.may.iter().copied())
            .collect();
        assert!(
            failed.is_subset(&allowed),
            "{}: unrelated checks failed: {:?}",
            defect.name,
            failed.difference(&allowed).collect::<Vec<_>>()
        );
        let junit = junit::to_junit(&report);
        let xml = roxmltree::Document::parse(&junit)
            .unwrap_or_else(|error| panic!("{}: JUnit is not XML: {error}", defect.name));
        let failing: BTreeSet<String> = xml
            .descendants()
            .filter(|node| node.has_tag_name("testcase"))
            .filter(|case| case.children().any(|child| child.has_tag_name("failure")))
            .map(|case| case.attribute("name").unwrap().to_string())
            .collect();
        let expected: BTreeSet<String> = failed.iter().map(|id| id.name().to_string()).collect();
        assert_eq!(failing, expected, "{}: JUnit failures", defect.name);
        let cases = xml
            .descendants()
            .filter(|node| node.has_tag_name("testcase"))
            .count();
        assert_eq!(cases, CheckId::ALL.len());
    }
}

/// The first Ctrl-C ends a validation within moments, as interrupted (AVA's full validation
/// takes a quarter of an hour; before, the first Ctrl-C was ignored until the end).
#[test]
fn a_cancelled_validation_stops_reading_frames_and_says_so() {
    let fixture = dataset();
    let cancelled = std::sync::atomic::AtomicBool::new(true);
    let error = validate(&fixture.request(Depth::Full), &Silent, &cancelled).unwrap_err();
    assert!(
        matches!(error, crate::validate::ValidateError::Interrupted),
        "{error}"
    );
}

#[test]
fn a_quick_check_decodes_a_sample_but_still_finds_every_missing_frame() {
    let fixture = dataset();
    fs::remove_file(fixture.frame(VAL, 33)).unwrap();
    let quick = fixture.validate(Depth::Quick);
    assert!(quick.frames_decoded < quick.frames_listed / 4, "{quick:?}");
    assert!(quick.frames_decoded >= 6, "each video's first and last");
    assert_eq!(failed(&quick), BTreeSet::from([CheckId::FramesExist]));
}

#[test]
fn a_foreign_dataset_without_index_or_checksums_skips_those_checks_only() {
    let fixture = dataset();
    fs::remove_file(fixture.annotations().join("SHA256SUMS")).unwrap();
    let mut request = fixture.request(Depth::Full);
    request.frame_index_dir = None;
    let report = validate(&request, &Silent, &NOT_CANCELLED).unwrap();
    let skipped: BTreeSet<CheckId> = report
        .checks
        .iter()
        .filter(|check| check.status() == CheckStatus::Skipped)
        .map(|check| check.id)
        .collect();
    assert_eq!(
        skipped,
        BTreeSet::from([
            CheckId::ListTiming,
            CheckId::FrameTiming,
            CheckId::Checksums,
            CheckId::LoaderViews
        ])
    );
    assert!(report.passed);
}

/// A split the config names no list of (a test split `avaprep predict` reads) is checked as
/// `avaprep lists` recorded it: its list, frames, clips and detector's boxes. Before, only the
/// config's lists were read, so a test video's missing frames passed.
#[test]
fn a_split_the_config_does_not_name_is_checked_as_lists_recorded_it() {
    let fixture = dataset();
    let mut request = fixture.request(Depth::Full);
    fixture.add_test_split(&mut request);
    assert_eq!(request.list_names(), ["train.csv", "val.csv", "test.csv"]);
    let report = validate(&request, &Silent, &NOT_CANCELLED).unwrap();
    assert!(
        report.passed,
        "{:?}",
        report.failed_checks().collect::<Vec<_>>()
    );
    assert_eq!(report.frames_listed, 200);
    assert_eq!(report.check(CheckId::ClipFrames).checked, 6 + 6 + 6 + 6);

    fs::remove_file(fixture.frame(TEST, 11)).unwrap();
    fixture.edit_annotation(TEST_DETECTIONS, |lines| {
        lines.push("testvideo99,903,0.100,0.200,0.500,0.900,,0.95".into())
    });
    let report = validate(&request, &Silent, &NOT_CANCELLED).unwrap();
    assert_eq!(
        failed(&report),
        BTreeSet::from([
            CheckId::VideoSets,
            CheckId::FramesExist,
            CheckId::ClipFrames
        ])
    );
    for (check, expected) in [
        (CheckId::FramesExist, "testvideo01_000011.jpg: missing"),
        (CheckId::ClipFrames, "testvideo01 keyframe 902"),
        (
            CheckId::VideoSets,
            "not in the test lists (test.csv): testvideo99",
        ),
    ] {
        let examples = &report.check(check).examples;
        assert!(
            examples.iter().any(|example| example.contains(expected)),
            "{}: {examples:?}",
            check.name()
        );
    }
}

/// PySlowFast raises `KeyError` on a listed video without boxes, so a val video without them
/// fails; a test video the detector found nobody in is only one `predict` scores nobody in (import
/// warned of it), and passes.
#[test]
fn a_video_without_boxes_fails_only_in_a_split_pyslowfast_loads() {
    let fixture = dataset();
    let mut request = fixture.request(Depth::Quick);
    fixture.add_test_split(&mut request);
    fs::write(fixture.annotations().join(TEST_DETECTIONS), "").unwrap();
    let report = validate(&request, &Silent, &NOT_CANCELLED).unwrap();
    assert!(
        report.passed,
        "{:?}",
        report.failed_checks().collect::<Vec<_>>()
    );

    fixture.edit_annotation("ava_val_predicted_boxes.csv", Vec::clear);
    let report = validate(&request, &Silent, &NOT_CANCELLED).unwrap();
    assert!(failed(&report).contains(&CheckId::VideoSets));
    let examples = &report.check(CheckId::VideoSets).examples;
    assert_eq!(examples.len(), 1, "{examples:?}");
    assert!(
        examples[0].contains("ava_val_predicted_boxes.csv: 1 video of the test lists (val.csv) has no rows in it: valvideo001"),
        "{examples:?}"
    );
}

/// The splits in `lists.json` are read as untrusted: a name that leaves its folder is refused,
/// naming the file; a split whose list the config names is left to the config's checks.
#[test]
fn recorded_splits_stay_inside_their_folders() {
    let fixture = dataset();
    let record = fixture.root.join("slowfast/lists.json");
    let escaping = [
        ("../../etc/cron", SplitFiles::default()),
        (
            "test",
            SplitFiles {
                excluded_timestamps: Some("../../secret.csv".into()),
                ..SplitFiles::default()
            },
        ),
    ];
    for (split, files) in escaping {
        let recorded = BTreeMap::from([(split.to_string(), files)]);
        let error = fixture
            .request(Depth::Quick)
            .with_other_splits(recorded, &record)
            .unwrap_err();
        assert!(error.to_string().contains("lists.json"), "{error}");
    }
    let val = BTreeMap::from([("val".to_string(), SplitFiles::default())]);
    let request = fixture
        .request(Depth::Quick)
        .with_other_splits(val, &record)
        .unwrap();
    assert!(request.other_splits.is_empty());
}

#[test]
fn a_name_that_leaves_the_folder_is_refused_before_reading() {
    let fixture = dataset();
    let mut request = fixture.request(Depth::Full);
    request.names.train_lists = vec!["../../etc/passwd".into()];
    let error = validate(&request, &Silent, &NOT_CANCELLED).unwrap_err();
    assert!(error.is_usage(), "{error}");
}

#[test]
fn missing_files_are_a_failed_check_not_an_error() {
    let fixture = dataset();
    fs::remove_file(fixture.lists().join("val.csv")).unwrap();
    let report = fixture.validate(Depth::Full);
    let check = report.check(CheckId::FilesPresent);
    assert_eq!(check.status(), CheckStatus::Failed);
    assert!(
        check.examples[0].contains("val.csv"),
        "{:?}",
        check.examples
    );
}

/// Runs validation on another thread: a read that blocks fails the test instead of hanging it.
fn validate_within_seconds(request: ValidateRequest) -> ValidationReport {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(validate(&request, &Silent, &NOT_CANCELLED).unwrap());
    });
    receive
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("validation returns without waiting on a special file")
}

/// Plants `special` at `path` in place of a file of the dataset: a FIFO, a link to `/dev/zero`,
/// or a 2 GB sparse file.
fn plant_special(path: &Path, special: &str) {
    fs::remove_file(path).unwrap();
    match special {
        "fifo" => {
            let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
        }
        "zero" => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
        "sparse" => fs::File::create(path).unwrap().set_len(2 << 30).unwrap(),
        _ => unreachable!(),
    }
}

const SPECIALS: [(&str, &str); 3] = [
    ("fifo", "is a FIFO, not a regular file"),
    ("zero", "is a character device, not a regular file"),
    ("sparse", "is 2147483648 bytes"),
];

/// A frame that is a FIFO, a link to `/dev/zero` or a 2 GB sparse file fails frames-exist by
/// name, at either depth, at once: never a hang, never memory filling up.
#[test]
fn a_frame_that_is_not_a_regular_file_fails_by_name_and_never_hangs() {
    for (special, text) in SPECIALS {
        for depth in [Depth::Full, Depth::Quick] {
            let fixture = dataset();
            let frame = fixture.frame(TRAIN[0], 11);
            plant_special(&frame, special);
            let report = validate_within_seconds(fixture.request(depth));
            let check = report.check(CheckId::FramesExist);
            assert_eq!(check.failed, 1, "{special} {depth:?}: {:?}", check.examples);
            assert!(
                check.examples[0].contains("trainvideo1_000011.jpg")
                    && check.examples[0].contains(text),
                "{special} {depth:?}: {:?}",
                check.examples
            );
            let allowed = BTreeSet::from([CheckId::FramesExist, CheckId::ClipFrames]);
            assert!(
                failed(&report).is_subset(&allowed),
                "{special}: {:?}",
                failed(&report)
            );
        }
    }
}

/// The same for a frame list and an annotation file: files-present fails naming it.
#[test]
fn a_list_or_table_that_is_not_a_regular_file_fails_by_name_and_never_hangs() {
    for (special, text) in SPECIALS {
        for name in ["frame_lists/val.csv", "annotations/ava_val_v2.2.csv"] {
            let fixture = dataset();
            plant_special(&fixture.root.join(name), special);
            let report = validate_within_seconds(fixture.request(Depth::Quick));
            let check = report.check(CheckId::FilesPresent);
            assert!(
                check
                    .examples
                    .iter()
                    .any(|example| example.contains(name) && example.contains(text)),
                "{special} {name}: {:?}",
                check.examples
            );
        }
    }
}

/// The kept findings are the bytes the file has always had (training's fingerprint reads them:
/// other bytes for the same findings would train again), and they read back as written.
#[test]
fn kept_findings_keep_their_bytes_and_read_back() {
    let mut frames = CheckResult::new(CheckId::FramesExist);
    frames.pass(3);
    frames.fail("frames/v/v_000004.jpg: missing".to_string());
    let mut views = CheckResult::new(CheckId::LoaderViews);
    views.skip("no mmaction2 view");
    let report = ValidationReport {
        passed: false,
        depth: Depth::Full,
        checks: vec![frames, views],
        frames_listed: 4,
        frames_decoded: 3,
        seconds: 1.5,
    };
    let as_always = serde_json::json!({
        "passed": false,
        "depth": "full",
        "checks": [
            {"name": "frames-exist", "status": "failed", "rule": CheckId::FramesExist.rule(),
             "checked": 4, "failed": 1, "examples": ["frames/v/v_000004.jpg: missing"],
             "skipped": null},
            {"name": "loader-views", "status": "skipped", "rule": CheckId::LoaderViews.rule(),
             "checked": 0, "failed": 0, "examples": [], "skipped": "no mmaction2 view"},
        ],
        "frames_listed": 4,
        "frames_decoded": 3,
    });
    let kept = serde_json::to_vec_pretty(&report.findings()).unwrap();
    assert_eq!(
        String::from_utf8(kept.clone()).unwrap(),
        serde_json::to_string_pretty(&as_always).unwrap()
    );
    let read: Findings = serde_json::from_slice(&kept).unwrap();
    assert_eq!(read, report.findings());
    let failed: Vec<&str> = read.failed_checks().map(|c| c.name.as_str()).collect();
    assert_eq!(failed, ["frames-exist"]);
    assert_eq!(report.to_json()["seconds"], 1.5);
}
