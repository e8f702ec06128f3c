//! Where everything lives under the data directory. Stages hand work to each other through these
//! files, so this is the one place that names them. The first three folders are the roots
//! PySlowFast reads (`AVA.FRAME_DIR`, `AVA.FRAME_LIST_DIR`, `AVA.ANNOTATION_DIR`).
//!
//! ```text
//! data/
//!   frames/<video_id>/<video_id>_000001.jpg   extracted frames
//!   frame_index/<video_id>.csv                which instant each frame shows
//!   frame_lists/train.csv, val.csv            PySlowFast frame lists
//!   annotations/                              annotation CSVs, label maps, person boxes
//!   slowfast/annotations/, slowfast/ava.yaml  the same filtered to the videos with frames, and
//!                                             PySlowFast's dataset config
//!   pytorchvideo/frames/<id>/, frame_lists/   the 30 fps view of links pytorchvideo reads
//!                                             (`lists --pytorchvideo`)
//!   mmaction2/rawframes/<id>/, annotations/,  the view of links, proposals and config
//!     ava.py                                  mmaction2's AVADataset reads (`lists --mmaction2`)
//!   videos/<folder>/<file>                    downloaded videos (trainval/, test/)
//!   downloads/                                downloaded archives
//!   work/videos.json                          the videos this run uses, with their keyframes
//!   work/missing/<video_id>                   videos the server (or the folder) does not have
//!   work/train.json, work/eval.json           what the train and eval stages made
//!   runs/pipeline-<fingerprint>/              the pipeline's training run
//!   report/index.html, report/images/         `avaprep report`'s page
//!   .avaprep/state/, .avaprep/downloads/      stage state and download records
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::annotations::VideoId;

#[derive(Debug, Clone)]
pub struct DataLayout {
    root: PathBuf,
}

impl DataLayout {
    pub fn new(root: &Path) -> Self {
        DataLayout {
            root: root.to_path_buf(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A path under the data directory as state files name it: relative to the directory.
    pub fn relative(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    }

    pub fn annotations(&self) -> PathBuf {
        self.root.join("annotations")
    }

    /// Training runs, one folder each: `train`'s `runs/<preset>`, `run`'s `runs/pipeline-<fp>`.
    pub fn runs(&self) -> PathBuf {
        self.root.join("runs")
    }

    pub fn downloads(&self) -> PathBuf {
        self.root.join("downloads")
    }

    pub fn videos(&self, folder: &FolderName) -> PathBuf {
        self.root.join("videos").join(folder.as_str())
    }

    pub fn frames(&self) -> PathBuf {
        self.root.join("frames")
    }

    /// A video id is 11 URL-safe characters, so it can never leave the frames folder.
    pub fn video_frames(&self, video: &VideoId) -> PathBuf {
        self.frames().join(video.as_str())
    }

    /// Frame `k` (1-based) of a video: the name PySlowFast's frame lists point at.
    pub fn frame(&self, video: &VideoId, k: u32) -> PathBuf {
        self.video_frames(video)
            .join(frame_file_name(video.as_str(), k))
    }

    /// The per-video frame index (`frame,target_seconds,source_seconds,width,height,source_gap_seconds`); its
    /// presence marks the video's extraction complete. Kept outside `frames/` because
    /// pytorchvideo takes every file in a video's frame folder for a frame.
    pub fn frame_index(&self, video: &VideoId) -> PathBuf {
        self.root
            .join("frame_index")
            .join(format!("{}.csv", video.as_str()))
    }

    /// What PySlowFast reads besides frames and lists: the filtered annotations and the config.
    pub fn slowfast(&self) -> PathBuf {
        self.root.join("slowfast")
    }

    /// The 30 fps view pytorchvideo's `Ava` reads: `frames/<id>/` of links and lists into it.
    pub fn pytorchvideo(&self) -> PathBuf {
        self.root.join("pytorchvideo")
    }

    /// The view mmaction2's `AVADataset` reads: `rawframes/<id>/` of links, its annotations and
    /// proposals, and a config.
    pub fn mmaction2(&self) -> PathBuf {
        self.root.join("mmaction2")
    }

    pub fn frame_lists(&self) -> PathBuf {
        self.root.join("frame_lists")
    }

    pub fn video_plan(&self) -> PathBuf {
        self.root.join("work").join("videos.json")
    }

    pub fn missing_videos(&self) -> PathBuf {
        self.root.join("work").join("missing")
    }

    /// Why `stage` last failed each video it has not made since (a marker each, its error), for
    /// the lists and the report to say why a video has no frames.
    pub fn failed_videos(&self, stage: &str) -> PathBuf {
        self.root.join("work").join("failed").join(stage)
    }

    /// Videos `delete_videos_after_extract` deleted once their frames were made (a marker each).
    pub fn deleted_videos(&self) -> PathBuf {
        self.root.join("work").join("deleted")
    }

    /// How many times extraction needed a downloaded video whose file was gone (a count each).
    pub fn videos_asked_again(&self) -> PathBuf {
        self.root.join("work").join("asked_again")
    }

    /// Records of completed downloads, kept outside the folders other tools read.
    pub fn download_records(&self) -> PathBuf {
        self.root.join(".avaprep").join("downloads")
    }

    /// The record of the download at `file` (a path under the data directory).
    pub fn download_record(&self, file: &Path) -> PathBuf {
        let relative = file.strip_prefix(&self.root).unwrap_or(file);
        let mut name = relative.as_os_str().to_os_string();
        name.push(".json");
        self.download_records().join(name)
    }
}

/// The manifest an import writes beside its annotations (`avaprep import --out DIR`).
pub const IMPORTED_MANIFEST: &str = "dataset.toml";

/// The folder of the data directory a pipeline's `[import]` writes its dataset to.
pub const IMPORT_DIR: &str = "import";

/// The record an import writes beside its manifest (`import.json`).
pub const IMPORT_RECORD: &str = "import.json";

/// Where an edit of an imported dataset's annotation files belongs, for `annotations`, the
/// folder they are read from: none for a dataset no import wrote. A pipeline's `[import]`
/// (into `data_dir`'s `import/`) and `avaprep import` both write them again from the exports.
pub fn imported_edits_belong(annotations: &Path, data_dir: &Path) -> Option<String> {
    let dataset = annotations.parent()?;
    let record = dataset.join(IMPORT_RECORD);
    // The import writes its record last: tables no newer than it are the import's own (the
    // user imported again, as they should), not edits.
    let imported_at = record.metadata().and_then(|meta| meta.modified()).ok()?;
    if !written_after(annotations, imported_at) {
        return None;
    }
    Some(
        match crate::fsutil::same_place(dataset, &data_dir.join(IMPORT_DIR)) {
            true => format!(
                "the data directory's {IMPORT_DIR}/ is made again from the exports that [import] names; label in your annotation tool and export again (or edit the exports), not the tables in {IMPORT_DIR}/"
            ),
            false => format!(
                "{} is written by `avaprep import`: edit the exports and import again, not its tables",
                dataset.display()
            ),
        },
    )
}

/// Whether `annotations` is the folder of a dataset an import wrote (its record beside it).
pub fn is_imported(annotations: &Path) -> bool {
    annotations
        .parent()
        .is_some_and(|dataset| dataset.join(IMPORT_RECORD).is_file())
}

/// Whether a file under `folder` was modified after `time`.
fn written_after(folder: &Path, time: std::time::SystemTime) -> bool {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return false;
    };
    entries.flatten().any(|entry| match entry.file_type() {
        Ok(kind) if kind.is_dir() => written_after(&entry.path(), time),
        _ => entry
            .metadata()
            .and_then(|meta| meta.modified())
            .is_ok_and(|modified| modified > time),
    })
}

/// The dataset manifest a pipeline's import wrote into `data_dir`.
pub fn imported_manifest(data_dir: &Path) -> PathBuf {
    data_dir.join(IMPORT_DIR).join(IMPORTED_MANIFEST)
}

/// `<video_id>_%06d.jpg`, the one spelling of a frame's file name.
pub fn frame_file_name(video: &str, k: u32) -> String {
    format!("{video}_{k:06}.jpg")
}

/// A path read from a manifest or plan that names a file inside a folder: plain components only
/// (each a [`FolderName`]), so the joined path stays inside the folder.
pub fn check_relative_name(name: &str) -> Result<(), String> {
    for component in name.split('/') {
        FolderName::try_from(component).map_err(|_| {
            format!("{name:?} is not a plain relative file name (no `..`, no leading `/`)")
        })?;
    }
    Ok(())
}

/// A folder name read from a manifest, plan or state file: one plain path component, so a path
/// joined from it stays inside its parent folder whatever the file says.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FolderName(String);

impl FolderName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for FolderName {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        let plain = !name.is_empty()
            && name.len() <= 64
            && name != "."
            && name != ".."
            && name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b"._-".contains(&byte));
        if plain {
            Ok(FolderName(name))
        } else {
            Err(format!(
                "{name:?} is not a folder name (1-64 letters, digits, `.`, `_` or `-`; no `/`, no `..`)"
            ))
        }
    }
}

impl TryFrom<&str> for FolderName {
    type Error = String;

    fn try_from(name: &str) -> Result<Self, String> {
        FolderName::try_from(name.to_string())
    }
}

impl From<FolderName> for String {
    fn from(name: FolderName) -> String {
        name.0
    }
}

impl std::borrow::Borrow<str> for FolderName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for FolderName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_never_leave_their_parent() {
        for good in ["trainval", "test", "v2.2", "a_b-c"] {
            assert!(FolderName::try_from(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../evil",
            "a/b",
            "/abs",
            "a\\b",
            "a\0b",
            "ä",
            "a b",
            &"x".repeat(65),
        ] {
            let error = FolderName::try_from(bad).unwrap_err();
            assert!(error.contains("not a folder name"), "{bad:?}: {error}");
        }
        let parsed: Result<FolderName, _> = serde_json::from_str("\"../../evil-out\"");
        assert!(
            parsed
                .unwrap_err()
                .to_string()
                .contains("not a folder name")
        );
    }
}
