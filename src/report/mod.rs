//! `avaprep report`: one HTML page, with its images in a folder beside it, that shows a prepared
//! dataset (and a training run, when there is one) to a person: counts per split, boxes per
//! class, frames and disk against 30 fps, validation, dropped videos, and a gallery of keyframes
//! with their boxes drawn on the extracted frames, so a timing or box error shows at a glance.
//! Nothing here needs a server or scripts: the page opens from disk.

mod dataset;
mod draw;
mod gallery;
mod page;
mod run;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::annotations::{AnnotationError, FrameKey};
use crate::frame_index::{DEFAULT_CLIP_FRAMES, DEFAULT_CLIP_STRIDE};
use crate::layout::DataLayout;
use crate::records::RecordError;

pub use dataset::{ClassCount, DatasetStats, Dropped, SplitStats};
pub use gallery::{GalleryEntry, choose_keyframes};
pub use run::RunStats;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Annotation(#[from] AnnotationError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Image {
        path: PathBuf,
        source: image::ImageError,
    },
    #[error("keyframe {key}: {message}")]
    Keyframe { key: FrameKey, message: String },
}

impl ReportError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ReportError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// What to show.
#[derive(Debug, Clone)]
pub struct ReportRequest {
    pub data_dir: PathBuf,
    /// A training run's folder; `None`: the dataset only.
    pub run: Option<PathBuf>,
    /// The page is `out/index.html`, its images `out/images/`.
    pub out: PathBuf,
    /// Keyframes to show; when empty, `sample` of them are chosen evenly.
    pub keyframes: Vec<FrameKey>,
    pub sample: usize,
    /// Detections scoring below this are not drawn.
    pub min_score: f32,
}

/// What was written.
#[derive(Debug, Clone, Serialize)]
pub struct ReportSummary {
    pub page: PathBuf,
    pub images: usize,
    pub keyframes: usize,
    pub with_run: bool,
}

/// Gathers the numbers, draws the gallery and writes the page (atomically: a reader sees the
/// previous page or this one).
pub fn write_report(request: &ReportRequest) -> Result<ReportSummary, ReportError> {
    let layout = DataLayout::new(&request.data_dir);
    let stats = DatasetStats::gather(&layout)?;
    let run = request
        .run
        .as_deref()
        .map(|dir| RunStats::read(dir, request.min_score, stats.keyframes))
        .transpose()?;
    let images = request.out.join(page::IMAGES);
    std::fs::create_dir_all(&images).map_err(|e| ReportError::io(&images, e))?;
    let keys = match request.keyframes.is_empty() {
        true => choose_keyframes(&stats, run.as_ref(), request.sample),
        false => request.keyframes.clone(),
    };
    let clip = run
        .as_ref()
        .map_or((DEFAULT_CLIP_FRAMES, DEFAULT_CLIP_STRIDE), |run| run.clip);
    let gallery = keys
        .iter()
        .map(|key| gallery::draw_entry(&layout, &stats, run.as_ref(), *key, clip, &images))
        .collect::<Result<Vec<_>, _>>()?;
    let mut image_count = gallery.iter().map(GalleryEntry::image_count).sum::<usize>();
    if let Some(run) = &run {
        image_count += run.copy_curves(&images)?;
    }
    let html = page::render(&stats, run.as_ref(), &gallery);
    let page = request.out.join("index.html");
    crate::fsutil::write_atomic(&page, html.as_bytes()).map_err(|e| ReportError::io(&page, e))?;
    remove_unused_images(&images, &html)?;
    Ok(ReportSummary {
        page,
        images: image_count,
        keyframes: gallery.len(),
        with_run: run.is_some(),
    })
}

/// Pictures of an earlier report that this page does not show: gone once the page is replaced.
fn remove_unused_images(images: &Path, html: &str) -> Result<(), ReportError> {
    let entries = std::fs::read_dir(images).map_err(|e| ReportError::io(images, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ReportError::io(images, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !html.contains(&format!("\"{}/{name}\"", page::IMAGES)) {
            std::fs::remove_file(entry.path()).map_err(|e| ReportError::io(&entry.path(), e))?;
        }
    }
    Ok(())
}

/// A JSON file a stage may not have written yet: `None` when it is absent.
fn read_json_if_present<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Option<T>, ReportError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(ReportError::io(path, error)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| ReportError::Invalid {
            path: path.to_path_buf(),
            message: error.to_string(),
        })
}
