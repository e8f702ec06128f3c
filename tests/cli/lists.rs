//! `avaprep lists` on frames extracted from the synthetic mirror: PySlowFast's exact format, rows
//! timed by time (row `p` shows the extracted frame nearest `start + p / list_fps`), annotation
//! files whose video sets equal the lists', and a refusal when a clip would read frames that were
//! never extracted.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use crate::extract::{fetched_data, planned_videos};
use crate::support::{avaprep, stderr};

/// Segment start of the synthetic mirror's quick profile (on AVA's clock).
const START: f64 = 900.0;

fn extract(data: &Path, extra: &[&str]) {
    let output = avaprep(data)
        .args(["extract", "--fps", "5", "--height", "240"])
        .args(extra)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

/// Runs a reference loader's check (`tests/support/SCRIPT DATA ARGS...`) with the repository's
/// venv and returns its JSON report, once it has exited 0 (the report says what mismatched).
pub(crate) fn reference_report(script: &str, data: &Path, args: &[&str]) -> serde_json::Value {
    let root = crate::support::repo_root();
    let output = std::process::Command::new(root.join(".venv/bin/python"))
        .arg(root.join("tests/support").join(script))
        .arg(data)
        .args(args)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{script} {args:?}: {}", stderr(&output)));
    assert!(output.status.success(), "{script} {args:?}: {report}");
    report
}

fn lists(data: &Path, extra: &[&str]) -> std::process::Output {
    avaprep(data).arg("lists").args(extra).output().unwrap()
}

/// frame number -> target seconds, from the extraction's index.
fn index_times(data: &Path, video: &str) -> BTreeMap<u32, f64> {
    let text = fs::read_to_string(data.join("frame_index").join(format!("{video}.csv"))).unwrap();
    text.lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            (fields[0].parse().unwrap(), fields[1].parse().unwrap())
        })
        .collect()
}

/// One row of a frame list: (video number, row, path).
type Row = (usize, u64, String);

/// Per list file: its videos in order, and each video's rows.
fn read_list(path: &Path) -> Vec<(String, Vec<Row>)> {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("original_vido_id video_id frame_id path labels")
    );
    let mut videos: Vec<(String, Vec<Row>)> = Vec::new();
    for line in lines {
        let tokens: Vec<&str> = line.split(' ').collect();
        assert_eq!(tokens.len(), 5, "{line}");
        assert_eq!(tokens[4], "\"\"", "{line}");
        let row = (
            tokens[1].parse().unwrap(),
            tokens[2].parse().unwrap(),
            tokens[3].to_string(),
        );
        match videos.last_mut() {
            Some((name, rows)) if name == tokens[0] => rows.push(row),
            _ => {
                assert!(
                    videos.iter().all(|(name, _)| name != tokens[0]),
                    "{}: rows not contiguous",
                    tokens[0]
                );
                videos.push((tokens[0].to_string(), vec![row]));
            }
        }
    }
    videos
}

#[test]
fn lists_are_pyslowfast_s_format_and_timed_by_time() {
    let data = fetched_data();
    extract(data.path(), &[]);
    let output = lists(data.path(), &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let planned: BTreeSet<String> = planned_videos(data.path()).into_iter().collect();
    let mut listed = BTreeSet::new();
    let mut number = 0;
    for split in ["train", "val"] {
        for (video, rows) in read_list(&data.path().join(format!("frame_lists/{split}.csv"))) {
            // Numbered by first appearance, val after train; rows 0.. contiguous; 30 a second.
            assert!(rows.iter().all(|(n, _, _)| *n == number), "{video}");
            number += 1;
            assert_eq!(rows.len(), 30 * 30, "{video}: 30 s at 30 rows a second");
            let times = index_times(data.path(), &video);
            for (p, (_, row, path)) in rows.iter().enumerate() {
                assert_eq!(*row, p as u64, "{video}");
                let frame: u32 = path
                    .strip_prefix(&format!("{video}/{video}_"))
                    .and_then(|rest| rest.strip_suffix(".jpg"))
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(data.path().join("frames").join(path).is_file(), "{path}");
                let at = START + p as f64 / 30.0;
                let chosen = (times[&frame] - at).abs();
                let best = times
                    .values()
                    .map(|t| (t - at).abs())
                    .fold(f64::MAX, f64::min);
                assert!(
                    chosen <= best + 1e-9,
                    "{video} row {p}: frame {frame} is {chosen:.3} s from {at:.3}, the nearest is {best:.3} s"
                );
            }
            listed.insert(video);
        }
    }
    assert_eq!(listed, planned);

    // The annotation set: every table names exactly the listed videos; no header, no quotes.
    let annotations = data.path().join("slowfast/annotations");
    for table in ["ava_train_v2.2.csv", "ava_val_v2.2.csv"] {
        let text = fs::read_to_string(annotations.join(table)).unwrap();
        assert!(!text.contains('"'), "{table}");
        let videos: BTreeSet<String> = text
            .lines()
            .map(|line| line.split(',').next().unwrap().to_string())
            .collect();
        assert!(videos.is_subset(&listed), "{table}: {videos:?}");
        assert!(!videos.is_empty(), "{table}");
    }
    let config = fs::read_to_string(data.path().join("slowfast/ava.yaml")).unwrap();
    for key in [
        "FRAME_DIR:",
        "FRAME_LIST_DIR:",
        "ANNOTATION_DIR:",
        "NUM_FRAMES: 32",
        "SAMPLING_RATE: 2",
    ] {
        assert!(config.contains(key), "{key} missing from\n{config}");
    }
}

/// At the extraction's own rate a list has one row per frame of the segment: row `p` is frame
/// `p + 1` wherever that frame was extracted.
#[test]
fn at_the_extraction_rate_a_row_is_a_frame() {
    let data = fetched_data();
    extract(data.path(), &[]);
    let output = lists(
        data.path(),
        &[
            "--list-fps",
            "5",
            "--num-frames",
            "8",
            "--sampling-rate",
            "1",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    for (video, rows) in read_list(&data.path().join("frame_lists/train.csv")) {
        assert_eq!(rows.len(), 150, "{video}");
        let times = index_times(data.path(), &video);
        for (p, (_, _, path)) in rows.iter().enumerate() {
            let frame = p as u32 + 1;
            if times.contains_key(&frame) {
                assert!(
                    path.ends_with(&format!("_{frame:06}.jpg")),
                    "{video} row {p}: {path}"
                );
            }
        }
    }
}

/// A clip longer than the extracted margin would silently read frames from the wrong time: the
/// lists are refused, naming the video, the keyframe and the margin that would do.
#[test]
fn a_clip_reaching_past_the_extracted_frames_is_refused() {
    let data = fetched_data();
    extract(data.path(), &["--margin", "0.4"]);
    let output = lists(data.path(), &[]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("which was not extracted") && message.contains("--margin"),
        "{message}"
    );
    assert!(!data.path().join("frame_lists/train.csv").exists());
}

/// pytorchvideo's `Ava` ignores the rows and reads every file of a video's folder as 30 fps: the
/// view gives it one link per 1/30 s (no copied bytes), and the real loader's clip for each
/// keyframe is centred on the extracted frame nearest the keyframe's time.
#[test]
fn pytorchvideo_s_ava_reads_clips_centred_on_their_keyframes() {
    let data = fetched_data();
    extract(data.path(), &[]);
    let output = lists(data.path(), &["--pytorchvideo"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let view = data.path().join("pytorchvideo/frames");
    for video in planned_videos(data.path()) {
        let entries: Vec<_> = fs::read_dir(view.join(&video))
            .unwrap()
            .map(|entry| entry.unwrap())
            .collect();
        assert_eq!(
            entries.len(),
            30 * 30,
            "{video}: 30 s at 30 frames a second"
        );
        for entry in &entries {
            assert!(
                entry.file_type().unwrap().is_symlink(),
                "{:?}",
                entry.path()
            );
            assert!(entry.path().is_file(), "{:?} dangles", entry.path());
        }
    }
    for split in ["train", "val"] {
        let report = reference_report("pytorchvideo_ava.py", data.path(), &[split, "32"]);
        let table = fs::read_to_string(
            data.path()
                .join(format!("slowfast/annotations/ava_{split}_v2.2.csv")),
        )
        .unwrap();
        let keyframes: BTreeSet<(String, String)> = table
            .lines()
            .map(|line| {
                let fields: Vec<&str> = line.split(',').collect();
                (fields[0].to_string(), fields[1].to_string())
            })
            .collect();
        assert_eq!(
            report["clips"].as_u64().unwrap(),
            keyframes.len() as u64,
            "{split}: a clip per keyframe"
        );
        // pytorchvideo takes frames ceil(30 t) for t in [start, end): float rounding of `end`
        // sometimes adds one frame past the clip's end, never moving its centre.
        for length in report["frames_per_clip"].as_array().unwrap() {
            assert!(
                (32..=33).contains(&length.as_u64().unwrap()),
                "{split}: {report}"
            );
        }
    }
}

/// PySlowFast's own config and `Ava` dataset (`slowfast==1.0`, FAIR's package): `get_cfg()`
/// merged with our `slowfast/ava.yaml`, then the loader's clip for every keyframe, train and
/// val, is centred on the extracted frame nearest the keyframe's time.
#[test]
fn pyslowfast_s_ava_reads_clips_centred_on_their_keyframes() {
    let data = fetched_data();
    extract(data.path(), &[]);
    let output = lists(data.path(), &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let mut train_clips = 0;
    for split in ["train", "val"] {
        let report = reference_report("pyslowfast_ava.py", data.path(), &[split]);
        assert!(report["clips"].as_u64().unwrap() > 0, "{split}: {report}");
        assert_eq!(
            report["frames_per_clip"],
            serde_json::json!([32]),
            "{split}"
        );
        if split == "train" {
            train_clips = report["clips"].as_u64().unwrap();
        }
    }
    // Train clips come from the ground truth: at least one per annotated keyframe.
    let table =
        fs::read_to_string(data.path().join("slowfast/annotations/ava_train_v2.2.csv")).unwrap();
    let keyframes: BTreeSet<&str> = table
        .lines()
        .map(|line| line.rsplitn(7, ',').last().unwrap())
        .collect();
    assert!(train_clips >= keyframes.len() as u64, "{train_clips}");
}

/// mmaction2 1.2.0's own `AVADataset`, built from the config `lists --mmaction2` wrote with that
/// config's `SampleAVAFrames` and `RawFrameDecode`: for every ground-truth keyframe of train and
/// val, the frame at the centre of its clip shows the extracted frame nearest the keyframe (in
/// training, the instant of the index mmaction2's own jitter drew), and its proposals are the
/// detector's boxes. The view holds links only, at the extracted rate, and `validate` checks it:
/// a link repointed one frame on fails, naming it.
#[test]
fn mmaction2_s_ava_dataset_reads_clips_centred_on_their_keyframes() {
    let data = fetched_data();
    extract(data.path(), &[]);
    let output = lists(data.path(), &["--mmaction2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let view = data.path().join("mmaction2/rawframes");
    for video in planned_videos(data.path()) {
        let frames = fs::read_dir(data.path().join("frames").join(&video))
            .unwrap()
            .count();
        let links: Vec<_> = fs::read_dir(view.join(&video))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        // One link per extracted frame (5 a second, no 30 fps copies).
        assert_eq!(links.len(), frames, "{video}");
        for link in &links {
            let target = fs::read_link(link).unwrap();
            assert!(
                target.starts_with(Path::new("../../../frames").join(&video)) && link.is_file(),
                "{link:?} -> {target:?}"
            );
        }
    }
    for split in ["train", "val"] {
        let report = reference_report("mmaction2_ava.py", data.path(), &[split]);
        let annotations = data.path().join("slowfast/annotations");
        let keys = |name: &str| -> BTreeSet<String> {
            fs::read_to_string(annotations.join(name))
                .unwrap()
                .lines()
                .map(|line| line.splitn(3, ',').take(2).collect::<Vec<_>>().join(","))
                .collect()
        };
        let keyframes = keys(&format!("ava_{split}_v2.2.csv"));
        let excluded = keys(&format!("ava_{split}_excluded_timestamps_v2.2.csv"));
        let clips = keyframes.difference(&excluded).count() as u64;
        assert_eq!(report["clips"].as_u64(), Some(clips), "{split}: {report}");
        assert_eq!(
            report["frames_per_clip"],
            serde_json::json!([16]),
            "{split}"
        );
        let exact = report["exact_centres"].as_u64().unwrap();
        // Val is sampled in test mode; training's own jitter leaves about half the clips exact.
        let least = if split == "val" { clips } else { clips / 4 };
        assert!(exact >= least, "{split}: {report}");
        assert!(
            report["proposal_keys"].as_u64().unwrap() > 0,
            "{split}: {report}"
        );
    }
    let validated = avaprep(data.path()).arg("validate").output().unwrap();
    assert!(validated.status.success(), "{}", stderr(&validated));
    let video = planned_videos(data.path()).remove(0);
    let links = view.join(&video);
    let mut names: Vec<_> = fs::read_dir(&links)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    names.sort();
    let (moved, next) = (links.join(&names[10]), links.join(&names[11]));
    fs::remove_file(&moved).unwrap();
    std::os::unix::fs::symlink(fs::read_link(&next).unwrap(), &moved).unwrap();
    let failed = avaprep(data.path())
        .args(["validate", "--json"])
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    let report: serde_json::Value = serde_json::from_slice(&failed.stdout).unwrap();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "loader-views")
        .unwrap();
    assert!(
        check["examples"][0]
            .as_str()
            .unwrap()
            .contains(&*names[10].to_string_lossy()),
        "{check}"
    );
}

/// `slowfast/train.yaml` is PySlowFast's training config for the trainer's ava-r50 recipe:
/// PySlowFast's config takes it whole (an unknown key fails), its `Ava` loads from it with the
/// recipe's clip (16 frames 6 rows apart at 30 rows a second: 3.2 s) centred on every keyframe,
/// and the network it builds takes avaprep's R50 weights strictly and gives the same
/// probabilities. At a rate whose frames are no whole number of rows apart, no file is written
/// and the summary says why.
#[test]
fn pyslowfast_trains_from_the_config_lists_writes() {
    let data = fetched_data();
    extract(data.path(), &[]);
    let output = lists(data.path(), &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    for split in ["train", "val"] {
        let report = reference_report("pyslowfast_ava.py", data.path(), &[split, "train.yaml"]);
        assert!(report["clips"].as_u64().unwrap() > 0, "{split}: {report}");
        assert_eq!(report["frames_per_clip"], serde_json::json!([16]));
    }
    let report = reference_report("pyslowfast_train.py", data.path(), &[]);
    let config = &report["config"];
    assert_eq!(config["SAMPLING_RATE"], 6, "{report}");
    assert_eq!(config["BATCH_SIZE"], 8, "{report}");
    assert_eq!(config["NUM_GPUS"], 1, "{report}");
    assert_eq!(config["HEAD_ACT"], "sigmoid", "{report}");
    // The recipe's 0.1 at 64 clips, linearly scaled to one GPU's 8; steps at 10 and 15 of 20.
    assert!((config["BASE_LR"].as_f64().unwrap() - 0.0125).abs() < 1e-12);
    assert!((config["WARMUP_START_LR"].as_f64().unwrap() - 1.5625e-5).abs() < 1e-15);
    assert_eq!(config["STEPS"], serde_json::json!([0, 10, 15]));
    assert_eq!(config["MAX_EPOCH"], 20);
    assert!(
        report["max_relative_error"].as_f64().unwrap() < 1e-5,
        "{report}"
    );

    let output = avaprep(data.path())
        .args(["extract", "--fps", "4", "--height", "240"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let output = lists(data.path(), &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!data.path().join("slowfast/train.yaml").exists());
    assert!(
        crate::support::stdout(&output).contains("no slowfast/train.yaml"),
        "{}",
        crate::support::stdout(&output)
    );
}

/// Lists before any extraction once wrote lists of no video and exited 0, and `validate` then
/// passed with 0 frames: now the lists refuse, naming the extraction to run, and running it as
/// printed lets them through.
#[test]
fn lists_of_no_extracted_video_are_refused_with_the_command_that_extracts() {
    let data = fetched_data();
    let refused = lists(data.path(), &[]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(
        message.contains("no video of the plan has frames"),
        "{message}"
    );
    assert!(!data.path().join("frame_lists/train.csv").exists());
    let hint = crate::support::first_named(&message);
    assert!(hint.ends_with(" extract"), "{message}");
    let extracted = crate::support::run_named(hint);
    assert!(extracted.status.success(), "{}", stderr(&extracted));
    let listed = lists(data.path(), &[]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(data.path().join("frame_lists/train.csv").is_file());
}
