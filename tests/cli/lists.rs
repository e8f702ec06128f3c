//! `avaprep lists` on frames extracted from the synthetic mirror: PySlowFast's exact format, rows
//! timed by time (row `p` shows the extracted frame nearest `start + p / list_fps`), annotation
//! files whose video sets equal the lists', and a refusal when a clip would read frames that were
//! never extracted.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use crate::extract::{fetched_data, planned_videos};
use crate::support::{avaprep, stderr};

/// Segment start of the synthetic mirror's quick profile.
const START: f64 = 5.0;

fn extract(data: &Path, extra: &[&str]) {
    let output = avaprep(data)
        .args(["extract", "--fps", "5", "--height", "240"])
        .args(extra)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
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
    let python = crate::support::repo_root().join(".venv/bin/python");
    let script = crate::support::repo_root().join("tests/support/pytorchvideo_ava.py");
    for split in ["train", "val"] {
        let output = std::process::Command::new(&python)
            .arg(&script)
            .arg(data.path())
            .args([split, "32"])
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{split}: {}", stderr(&output)));
        assert!(output.status.success(), "{split}: {report}");
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
    let python = crate::support::repo_root().join(".venv/bin/python");
    let script = crate::support::repo_root().join("tests/support/pyslowfast_ava.py");
    let mut train_clips = 0;
    for split in ["train", "val"] {
        let output = std::process::Command::new(&python)
            .arg(&script)
            .arg(data.path())
            .arg(split)
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{split}: {}", stderr(&output)));
        assert!(output.status.success(), "{split}: {report}");
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
