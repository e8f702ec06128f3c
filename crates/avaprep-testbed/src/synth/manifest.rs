//! The dataset manifest of a synthetic mirror, in the schema of `manifests/`, so the whole pipeline
//! runs against the mirror by changing nothing but the base URL.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::annotations::{self as texts, AnnotationTexts};
use super::mirror;
use super::{MirrorFile, SynthReport};
use avaprep::layout::FolderName;
use avaprep::manifest::{
    DatasetInfo, DatasetManifest, KnownFile, Labels, RemoteFile, Source, Split, VideoFolder,
};

/// Where `avaprep serve DIR` listens by default; a mirror elsewhere is one `--base-url` away.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8000/";

/// File name of the manifest inside the mirror folder.
pub const MANIFEST_FILE: &str = "manifest.toml";

pub fn dataset_manifest(
    report: &SynthReport,
    annotation_texts: &AnnotationTexts,
) -> DatasetManifest {
    let times = report.times;
    let mirror_file = |path: &str| -> RemoteFile {
        let described = report.files.iter().find(|file| file.path == path);
        remote_file(path, described)
    };
    let mut annotations = mirror_file(mirror::ZIP_PATH);
    annotations.contents = annotation_texts
        .files
        .iter()
        .map(|(name, text)| KnownFile {
            name: name.to_string(),
            size: Some(text.len() as u64),
            sha256: Some(hex::encode(Sha256::digest(text.as_bytes()))),
        })
        .collect();
    let mut boxes = mirror_file(mirror::SLOWFAST_TAR);
    boxes.strip_prefix = Some(mirror::TAR_TOP.to_string());
    let box_file = |name: &str| format!("{}{name}", &mirror::TAR_BOX_DIR[mirror::TAR_TOP.len()..]);
    DatasetManifest {
        dataset: DatasetInfo {
            name: "avaprep synthetic AVA".to_string(),
            version: format!("{:?}-seed-{}", report.profile, report.seed).to_lowercase(),
            segment: [f64::from(times.segment_start), f64::from(times.segment_end)],
            keyframes: [times.first_keyframe, times.last_keyframe],
            video_spans: None,
            video_start: f64::from(report.video_start),
            // The quick profile's files begin at their own second 0 (dataset 895); the
            // ava-times profile's are on AVA's clock, as AVA's videos are.
            own_clock: report.video_start != 0,
            ground_truth_proposals: false,
        },
        sources: BTreeMap::from([
            source("ava", "ava-dataset/"),
            source("pyslowfast", "pyslowfast/"),
        ]),
        annotations: Some(annotations),
        name_lists: BTreeMap::from([
            ("trainval".to_string(), mirror_file(mirror::TRAINVAL_NAMES)),
            ("test".to_string(), mirror_file(mirror::TEST_NAMES)),
        ]),
        boxes: Some(boxes),
        videos: BTreeMap::from([video_folder("trainval"), video_folder("test")]),
        local: None,
        labels: Labels {
            full: texts::LABELS.to_string(),
            scored: texts::LABELS_SCORED.to_string(),
            included_timestamps: texts::INCLUDED.to_string(),
        },
        splits: BTreeMap::from([
            (
                "train".to_string(),
                Split {
                    videos: FolderName::try_from("trainval").expect("a plain folder name"),
                    ground_truth: Some(texts::GT_TRAIN.to_string()),
                    video_ids: None,
                    excluded_timestamps: Some(texts::EXCL_TRAIN.to_string()),
                    detected_boxes: Some(box_file(mirror::DET_TRAIN)),
                },
            ),
            (
                "val".to_string(),
                Split {
                    videos: FolderName::try_from("trainval").expect("a plain folder name"),
                    ground_truth: Some(texts::GT_VAL.to_string()),
                    video_ids: None,
                    excluded_timestamps: Some(texts::EXCL_VAL.to_string()),
                    detected_boxes: Some(box_file(mirror::DET_VAL)),
                },
            ),
            (
                "test".to_string(),
                Split {
                    videos: FolderName::try_from("test").expect("a plain folder name"),
                    ground_truth: None,
                    video_ids: Some(texts::TEST_IDS.to_string()),
                    excluded_timestamps: Some(texts::EXCL_TEST.to_string()),
                    detected_boxes: None,
                },
            ),
        ]),
    }
}

/// `ava-dataset/annotations/x` becomes source `ava`, path `annotations/x`.
fn remote_file(mirror_path: &str, described: Option<&MirrorFile>) -> RemoteFile {
    let (source, path) = if let Some(rest) = mirror_path.strip_prefix("ava-dataset/") {
        ("ava", rest)
    } else {
        ("pyslowfast", mirror_path.trim_start_matches("pyslowfast/"))
    };
    RemoteFile {
        source: source.to_string(),
        path: path.to_string(),
        alternate_urls: Vec::new(),
        size: described.map(|file| file.size),
        sha256: described.map(|file| file.sha256.clone()),
        strip_prefix: None,
        contents: Vec::new(),
    }
}

fn source(name: &str, mirror_path: &str) -> (String, Source) {
    (
        name.to_string(),
        Source {
            url: format!("{DEFAULT_BASE_URL}{mirror_path}"),
            mirror_path: mirror_path.to_string(),
        },
    )
}

fn video_folder(name: &str) -> (FolderName, VideoFolder) {
    (
        FolderName::try_from(name).expect("a plain folder name"),
        VideoFolder {
            source: "ava".to_string(),
            path: format!("{name}/"),
            name_list: name.to_string(),
        },
    )
}
