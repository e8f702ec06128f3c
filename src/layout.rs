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
//!   videos/<folder>/<file>                    downloaded videos (trainval/, test/)
//!   downloads/                                downloaded archives
//!   work/videos.json                          the videos this run uses, with their keyframes
//!   work/missing/<video_id>                   videos the server does not have, with the reason
//!   .avaprep/state/, .avaprep/downloads/      stage state and download records
//! ```

use std::path::{Path, PathBuf};

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

    pub fn annotations(&self) -> PathBuf {
        self.root.join("annotations")
    }

    pub fn downloads(&self) -> PathBuf {
        self.root.join("downloads")
    }

    pub fn videos(&self, folder: &str) -> PathBuf {
        self.root.join("videos").join(folder)
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

    /// The per-video frame index (`frame,target_seconds,source_seconds,width,height`); its
    /// presence marks the video's extraction complete. Kept outside `frames/` because
    /// pytorchvideo takes every file in a video's frame folder for a frame.
    pub fn frame_index(&self, video: &VideoId) -> PathBuf {
        self.root
            .join("frame_index")
            .join(format!("{}.csv", video.as_str()))
    }

    /// Where a video's frames are written before the complete set is renamed into `frames/`.
    pub fn extracting(&self, video: &VideoId) -> PathBuf {
        self.root
            .join("work")
            .join("extracting")
            .join(video.as_str())
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

/// `<video_id>_%06d.jpg`, the one spelling of a frame's file name.
pub fn frame_file_name(video: &str, k: u32) -> String {
    format!("{video}_{k:06}.jpg")
}
