//! Test fixture: a data directory laid out as the pipeline leaves it, built from the synthetic
//! dataset. Frames come from the ffmpeg CLI's fps filter (up to half a period late compared
//! with the extractor's nearest-frame rule: fine for training tests) and get the extractor's
//! names and index.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use avaprep_testbed::synth::{Profile, SynthConfig, SynthReport, generate};

/// The repository, whose `scripts`, `tests/support` and `.venv` the tests run (the trainer's
/// crate sits two folders down).
pub fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

pub const FPS: u32 = 5;
/// Frames are stored at this height (the real extractor stores 480 p); tests crop 112.
pub const FRAME_HEIGHT: u32 = 144;

/// A data directory shared by the tests of this process, built once per (videos, seed) and
/// kept in the system temp folder across runs (it is deterministic).
pub fn synthetic_data(videos: usize, seed: u64) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<(usize, u64, PathBuf)>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(Vec::new()));
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, path)) = built.iter().find(|b| b.0 == videos && b.1 == seed) {
        return path.clone();
    }
    let dir = std::env::temp_dir().join(format!(
        "avaprep-train-synth-v6-n{videos}-s{seed}-h{FRAME_HEIGHT}"
    ));
    if !dir.join("complete").exists() {
        let staging = dir.with_extension(format!("tmp{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        build(&staging, videos, seed);
        std::fs::write(staging.join("complete"), b"").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&staging, &dir).unwrap();
    }
    built.push((videos, seed, dir.clone()));
    dir
}

fn build(data: &Path, videos: usize, seed: u64) {
    let mirror = data.join("mirror");
    let report = generate(&SynthConfig {
        out: mirror.clone(),
        videos,
        seed,
        profile: Profile::Quick,
        exports: false,
    })
    .expect("synthetic dataset");
    let annotations = data.join("annotations");
    unpack_annotations(&mirror, &annotations);
    write_plan(data, &report);
    for video in report.videos.iter().filter(|v| v.split != "test") {
        extract_frames(&mirror.join(&video.path), data, &video.id, &report);
    }
    std::fs::remove_dir_all(&mirror).unwrap();
}

fn unpack_annotations(mirror: &Path, out: &Path) {
    std::fs::create_dir_all(out.join("person_box_67091280_iou90")).unwrap();
    let zip_file =
        std::fs::File::open(mirror.join("ava-dataset/annotations/ava_v2.2.zip")).unwrap();
    let mut zip = zip::ZipArchive::new(zip_file).unwrap();
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).unwrap();
        let name = entry.name().unwrap().to_string();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        std::fs::write(out.join(name), bytes).unwrap();
    }
    let tar_file =
        std::fs::File::open(mirror.join("pyslowfast/annotation/ava/ava_annotations.tar")).unwrap();
    for entry in tar::Archive::new(tar_file).entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().into_owned();
        let Ok(relative) = path.strip_prefix("ava_annotations") else {
            continue;
        };
        if entry.header().entry_type().is_file() {
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            std::fs::write(out.join(relative), bytes).unwrap();
        }
    }
}

fn write_plan(data: &Path, report: &SynthReport) {
    let t = &report.times;
    let videos: Vec<serde_json::Value> = report
        .videos
        .iter()
        .filter(|v| v.split != "test")
        .map(|v| {
            let first = v.first_keyframe.unwrap();
            let last = v.last_keyframe.unwrap();
            serde_json::json!({
                "id": v.id, "file_name": v.file_name, "folder": "trainval", "split": v.split,
                "keyframes": (first..=last).collect::<Vec<u32>>(),
            })
        })
        .collect();
    // The annotation files by AVA's names, as parse records them from the manifest.
    let split_files = |split: &str, detections: &str| {
        serde_json::json!({
            "ground_truth": format!("ava_{split}_v2.2.csv"),
            "excluded_timestamps": format!("ava_{split}_excluded_timestamps_v2.2.csv"),
            "detected_boxes": format!("person_box_67091280_iou90/{detections}"),
        })
    };
    let plan = serde_json::json!({
        "segment": [f64::from(t.segment_start), f64::from(t.segment_end)],
        "keyframes": [t.first_keyframe, t.last_keyframe],
        "video_start": report.video_start,
        "videos": videos,
        "files": {
            "label_map": "ava_action_list_v2.2.pbtxt",
            "scored_label_map": "ava_action_list_v2.2_for_activitynet_2019.pbtxt",
            "splits": {
                "train": split_files(
                    "train",
                    "ava_detection_train_boxes_and_labels_include_negative_v2.2.csv",
                ),
                "val": split_files("val", "ava_detection_val_boxes_and_labels.csv"),
            },
        },
    });
    let path = data.join("work/videos.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
}

/// Decodes the video at 5 fps from its start and keeps the segment's frames: output frame n
/// shows the file's second (n - 1) / 5, so segment frame k is output frame
/// k + 5 * (segment_start - video_start).
fn extract_frames(video: &Path, data: &Path, id: &str, report: &SynthReport) {
    let scratch = data.join("scratch").join(id);
    std::fs::create_dir_all(&scratch).unwrap();
    let status = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-i"])
        .arg(video)
        .args([
            "-vf",
            &format!("fps={FPS},scale=-2:{FRAME_HEIGHT}"),
            "-q:v",
            "3",
        ])
        .arg(scratch.join("%06d.jpg"))
        .status()
        .expect("the ffmpeg CLI");
    assert!(status.success(), "ffmpeg failed on {}", video.display());
    let frames_dir = data.join("frames").join(id);
    std::fs::create_dir_all(&frames_dir).unwrap();
    let start = report.times.segment_start;
    let count = (report.times.segment_end - start) * FPS;
    let mut index = String::from("frame,target_seconds,source_seconds,width,height\n");
    for k in 1..=count {
        let source = scratch.join(format!("{:06}.jpg", k + (start - report.video_start) * FPS));
        let Ok(size) = image::image_dimensions(&source) else {
            break;
        };
        std::fs::rename(&source, frames_dir.join(format!("{id}_{k:06}.jpg"))).unwrap();
        let t = f64::from(start) + f64::from(k - 1) / f64::from(FPS);
        let _ = writeln!(index, "{k},{t:.6},{t:.6},{},{}", size.0, size.1);
    }
    std::fs::remove_dir_all(&scratch).unwrap();
    let index_dir = data.join("frame_index");
    std::fs::create_dir_all(&index_dir).unwrap();
    std::fs::write(index_dir.join(format!("{id}.csv")), index).unwrap();
}
