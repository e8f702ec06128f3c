//! `avaprep extract` on videos fetched from the synthetic mirror: the layout, the index, and a
//! kill -9 in the middle of extraction followed by a re-run.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use avaprep_testbed::serve::{self, ServeConfig};

use crate::support::{avaprep, mirror, stderr, stdout};

/// A data directory with the mirror's train and val videos fetched.
pub(crate) fn fetched_data() -> tempfile::TempDir {
    let root = mirror();
    let server = serve::start(ServeConfig::new(root)).unwrap();
    let data = tempfile::tempdir().unwrap();
    let output = avaprep(data.path())
        .arg("fetch")
        .arg("--dataset")
        .arg(root.join("manifest.toml"))
        .args(["--base-url", &server.url()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    data
}

pub(crate) fn planned_videos(data: &Path) -> Vec<String> {
    let plan: serde_json::Value =
        serde_json::from_slice(&fs::read(data.join("work/videos.json")).unwrap()).unwrap();
    plan["videos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|video| video["id"].as_str().unwrap().to_string())
        .collect()
}

/// Every indexed frame exists, nothing else does, and the index's times follow the rule.
pub(crate) fn assert_complete(data: &Path, video: &str, fps: f64) {
    let index = fs::read_to_string(data.join("frame_index").join(format!("{video}.csv"))).unwrap();
    let mut lines = index.lines();
    assert_eq!(
        lines.next(),
        Some(
            "frame,target_seconds,source_seconds,width,height,source_gap_seconds,source_file_seconds"
        )
    );
    let mut indexed = BTreeSet::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        let frame: u32 = fields[0].parse().unwrap();
        let target: f64 = fields[1].parse().unwrap();
        let source: f64 = fields[2].parse().unwrap();
        // Segment [900, 930) of the quick profile: frame k is at 900 + (k - 1) / fps.
        assert!(
            (target - (900.0 + f64::from(frame - 1) / fps)).abs() < 1e-6,
            "{video}: {line}"
        );
        assert!(
            (source - target).abs() <= 0.05,
            "{video}: source frame too far: {line}"
        );
        indexed.insert(format!("{video}_{frame:06}.jpg"));
    }
    let on_disk: BTreeSet<String> = fs::read_dir(data.join("frames").join(video))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        on_disk, indexed,
        "{video}: frames on disk differ from the index"
    );
}

#[test]
fn extracts_every_video_with_an_index_and_a_summary() {
    let data = fetched_data();
    let output = avaprep(data.path())
        .args(["extract", "--fps", "5", "--height", "240"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("source frames kept"),
        "{}",
        stdout(&output)
    );
    for video in planned_videos(data.path()) {
        assert_complete(data.path(), &video, 5.0);
        let first = fs::read_dir(data.path().join("frames").join(&video))
            .unwrap()
            .next()
            .unwrap();
        let (_, height) = image::image_dimensions(first.unwrap().path()).unwrap();
        assert_eq!(height, 240);
    }
    let again = avaprep(data.path())
        .args(["extract", "--fps", "5", "--height", "240"])
        .output()
        .unwrap();
    assert!(stdout(&again).contains("up to date"), "{}", stdout(&again));
}

#[test]
fn a_killed_extraction_resumes_and_never_leaves_a_partial_set() {
    let data = fetched_data();
    let videos = planned_videos(data.path());
    let mut child = avaprep(data.path())
        .args(["extract", "--jobs", "1", "--height", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let index_dir = data.path().join("frame_index");
    let state = data.path().join(".avaprep/state/extract.json");
    let deadline = Instant::now() + Duration::from_secs(120);
    while recorded(&state).is_empty() {
        assert!(Instant::now() < deadline, "no video finished");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let finished = recorded(&state);
    // A video may have been complete on disk but not yet recorded: it is redone, never trusted.
    for video in &videos {
        let indexed = index_dir.join(format!("{video}.csv")).exists();
        assert!(
            indexed || !finished.contains(video),
            "{video} recorded without its index"
        );
    }
    assert!(
        finished.len() < videos.len(),
        "killed too late to test resuming"
    );
    for video in &videos {
        if finished.contains(video) {
            assert_complete(data.path(), video, 5.0);
        }
    }
    let output = avaprep(data.path())
        .args(["extract", "--jobs", "1", "--height", "0"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains(&format!("{} already done", finished.len())),
        "{}",
        stdout(&output)
    );
    for video in &videos {
        assert_complete(data.path(), video, 5.0);
    }
}

#[test]
fn a_broken_video_is_named_and_the_others_go_on() {
    let data = fetched_data();
    let videos = planned_videos(data.path());
    let broken = data
        .path()
        .join("videos/trainval")
        .read_dir()
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|extension| extension == "mp4"))
        .unwrap();
    let bytes = fs::read(&broken).unwrap();
    fs::write(&broken, &bytes[..bytes.len() / 3]).unwrap();
    let broken_id = broken.file_stem().unwrap().to_string_lossy().into_owned();
    let output = avaprep(data.path()).arg("extract").output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains(&format!("video {broken_id}")), "{message}");
    // Recorded with its kind: the video is what to fix, not a setting or the network.
    let state = data.path().join(".avaprep/state/extract.json");
    let envelope: serde_json::Value = serde_json::from_slice(&fs::read(state).unwrap()).unwrap();
    let failures = envelope["state"]["failures"].as_array().unwrap();
    let failure = failures
        .iter()
        .find(|failure| failure["item"] == broken_id.as_str())
        .unwrap();
    assert_eq!(failure["kind"], "input", "{failure}");
    for video in videos.iter().filter(|video| **video != broken_id) {
        assert_complete(data.path(), video, 5.0);
    }
    assert!(
        !data
            .path()
            .join("frame_index")
            .join(format!("{broken_id}.csv"))
            .exists()
    );
}

/// The videos the extract stage's state file records as done.
fn recorded(state: &Path) -> Vec<String> {
    let Ok(bytes) = fs::read(state) else {
        return Vec::new();
    };
    let envelope: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    envelope["state"]["items"]
        .as_object()
        .map(|items| items.keys().cloned().collect())
        .unwrap_or_default()
}

/// `--delete-videos-after-extract` asked of frames an earlier extraction made deletes their
/// videos (it once deleted nothing, as no video was extracted), and neither fetch nor extract
/// wants them back on the next run.
#[test]
fn deleted_videos_stay_deleted_and_their_frames_stay_complete() {
    let root = mirror();
    let server = serve::start(ServeConfig::new(root)).unwrap();
    let data = tempfile::tempdir().unwrap();
    let fetch = || {
        avaprep(data.path())
            .arg("fetch")
            .arg("--dataset")
            .arg(root.join("manifest.toml"))
            .args(["--base-url", &server.url()])
            .output()
            .unwrap()
    };
    let extract_keeping = |flags: &[&str]| {
        avaprep(data.path())
            .args(["extract", "--fps", "5", "--height", "240"])
            .args(flags)
            .output()
            .unwrap()
    };
    let extract = || extract_keeping(&["--delete-videos-after-extract"]);
    assert!(fetch().status.success());
    let kept = extract_keeping(&[]);
    assert!(kept.status.success(), "{}", stderr(&kept));
    assert!(!walk_files(&data.path().join("videos")).is_empty());
    let output = extract();
    assert!(output.status.success(), "{}", stderr(&output));
    let videos = planned_videos(data.path());
    assert!(
        stdout(&output).contains(&format!(
            "deleted {} downloaded videos whose frames an earlier run made",
            videos.len()
        )),
        "{}",
        stdout(&output)
    );
    assert!(!videos.is_empty());
    for video in &videos {
        assert_complete(data.path(), video, 5.0);
    }
    let left: Vec<_> = walk_files(&data.path().join("videos"));
    assert!(left.is_empty(), "videos left: {left:?}");

    server.reset_stats();
    let again = fetch();
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(
        crate::fetch::video_requests(&server),
        0,
        "a deleted video was downloaded again"
    );
    let again = extract();
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(stdout(&again).contains("up to date"), "{}", stdout(&again));
    assert!(!stdout(&again).contains("deleted"), "{}", stdout(&again));
}

pub(crate) fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk_files(&path));
        } else {
            files.push(path);
        }
    }
    files
}
