//! `avaprep report`: one HTML page, with its images in a folder beside it, that shows a prepared
//! dataset (and a training run, when there is one) to a person: counts per split, boxes per
//! class, frames and disk against 30 fps, validation, dropped videos, and a gallery of keyframes
//! with their boxes drawn on the extracted frames, so a timing or box error shows at a glance.
//! Nothing here needs a server or scripts: the page opens from disk. Also the per-class AP table
//! for a terminal ([`ap_table`]).

mod ap_table;
mod dataset;
mod draw;
mod gallery;
mod page;
mod run;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::annotations::{AnnotationError, FrameKey};
use crate::frame_index::{DEFAULT_CLIP_FRAMES, DEFAULT_CLIP_STRIDE};
use crate::layout::DataLayout;
use crate::records::RecordError;

pub use ap_table::ap_table;
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
    /// The folder named for the report cannot take it (the user's to choose another).
    #[error("{path}: {message}")]
    OutFolder { path: PathBuf, message: String },
    #[error("interrupted: the page was not written (the one before is as it was); run it again")]
    Interrupted,
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
/// previous page or this one). The folder may hold other files: the page goes beside them, and
/// only files an earlier report recorded as its own are ever removed.
/// `cancel`: the first Ctrl-C; drawing stops at the next keyframe and nothing of the page is
/// written.
pub fn write_report(
    request: &ReportRequest,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<ReportSummary, ReportError> {
    let earlier = OwnFiles::check_folder(&request.out)?;
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
    let mut names: Vec<String> = keys
        .iter()
        .flat_map(|key| gallery::image_names(*key))
        .collect();
    names.push(run::CURVES.to_string());
    earlier.check_pictures(&request.out, &names)?;
    let clip = run
        .as_ref()
        .map_or((DEFAULT_CLIP_FRAMES, DEFAULT_CLIP_STRIDE), |run| run.clip);
    // A report that stops halfway (a keyframe the data lacks, Ctrl-C) takes its new pictures
    // away: no record names them, and the next report would refuse them as another's.
    let new_pictures: Vec<PathBuf> = names
        .iter()
        .map(|name| images.join(name))
        .filter(|path| !path.exists())
        .collect();
    let drawn = || -> Result<(Vec<GalleryEntry>, usize), ReportError> {
        let gallery = keys
            .iter()
            .map(
                |key| match cancel.load(std::sync::atomic::Ordering::Relaxed) {
                    true => Err(ReportError::Interrupted),
                    false => {
                        gallery::draw_entry(&layout, &stats, run.as_ref(), *key, clip, &images)
                    }
                },
            )
            .collect::<Result<Vec<_>, _>>()?;
        let mut image_count = gallery.iter().map(GalleryEntry::image_count).sum::<usize>();
        if let Some(run) = &run {
            image_count += run.copy_curves(&images)?;
        }
        Ok((gallery, image_count))
    };
    let (gallery, image_count) = drawn().inspect_err(|_| {
        for picture in &new_pictures {
            let _ = std::fs::remove_file(picture);
        }
    })?;
    let avaprep = crate::progress::avaprep_in(&request.data_dir);
    let html = page::render(&stats, run.as_ref(), &gallery, &avaprep);
    let page = request.out.join(PAGE);
    crate::fsutil::write_atomic(&page, html.as_bytes()).map_err(|e| ReportError::io(&page, e))?;
    let written = OwnFiles::of_page(&html);
    written.save(&request.out)?;
    earlier.remove_unless_in(&written, &request.out);
    Ok(ReportSummary {
        page,
        images: image_count,
        keyframes: gallery.len(),
        with_run: run.is_some(),
    })
}

const PAGE: &str = "index.html";

/// The files a report wrote in its folder (the page and the pictures it shows, by their names
/// relative to the folder), recorded beside the page so the next report removes its own
/// pictures that it no longer shows, and never a file it did not write.
#[derive(Debug, Default, Serialize, Deserialize)]
struct OwnFiles {
    files: std::collections::BTreeSet<String>,
}

impl OwnFiles {
    const RECORD: &str = ".avaprep-report.json";

    /// What an earlier report in `out` wrote; refuses a folder that is a file, or that holds an
    /// `index.html` no report wrote (it would be overwritten).
    fn check_folder(out: &Path) -> Result<Self, ReportError> {
        let refuse = |message: &str| ReportError::OutFolder {
            path: out.to_path_buf(),
            message: message.to_string(),
        };
        match std::fs::metadata(out) {
            Ok(meta) if !meta.is_dir() => return Err(refuse("not a folder: name a folder")),
            Ok(_) => {}
            Err(_) => return Ok(OwnFiles::default()),
        }
        let recorded: Option<OwnFiles> = read_json_if_present(&out.join(Self::RECORD))?;
        let page = out.join(PAGE);
        let earlier = match recorded {
            Some(recorded) => recorded,
            // A report of an earlier version, which kept no record (or a record deleted): its own
            // are the page and the pictures the page shows, never whatever else is beside them.
            None => report_page(&page).map_or_else(OwnFiles::default, |html| Self::of_page(&html)),
        };
        if page.exists() && !earlier.files.contains(PAGE) {
            return Err(refuse(
                "holds an index.html that avaprep report did not write, which the page would replace: choose another folder with --out, or move that file away",
            ));
        }
        let images = out.join(page::IMAGES);
        if std::fs::symlink_metadata(&images).is_ok_and(|meta| !meta.is_dir()) {
            return Err(refuse(
                "holds `images`, which is not a folder: choose another folder with --out",
            ));
        }
        Ok(earlier)
    }

    /// Refuses, before anything is drawn, a picture name the report would write over a file in
    /// the images folder that no report made.
    fn check_pictures(&self, out: &Path, names: &[String]) -> Result<(), ReportError> {
        let images = out.join(page::IMAGES);
        let foreign = names.iter().find(|name| {
            images.join(name.as_str()).exists()
                && !self.files.contains(&format!("{}/{name}", page::IMAGES))
        });
        match foreign {
            Some(name) => Err(ReportError::OutFolder {
                path: out.to_path_buf(),
                message: format!(
                    "holds {}/{name}, which avaprep report did not write and would replace: choose another folder with --out, or move that file away",
                    page::IMAGES
                ),
            }),
            None => Ok(()),
        }
    }

    /// The page and every picture it shows.
    fn of_page(html: &str) -> Self {
        let marker = format!("\"{}/", page::IMAGES);
        let pictures = html.match_indices(&marker).filter_map(|(at, _)| {
            let rest = &html[at + 1..];
            rest.find('"').map(|end| rest[..end].to_string())
        });
        OwnFiles {
            files: std::iter::once(PAGE.to_string()).chain(pictures).collect(),
        }
    }

    fn save(&self, out: &Path) -> Result<(), ReportError> {
        let path = out.join(Self::RECORD);
        let bytes = serde_json::to_vec_pretty(self).expect("a record serialises");
        crate::fsutil::write_atomic(&path, &bytes).map_err(|e| ReportError::io(&path, e))
    }

    /// Removes the files of this record that `now` does not hold: only plain files directly in
    /// the folder's `images/` (the record is read from disk, so its names are checked first).
    fn remove_unless_in(&self, now: &OwnFiles, out: &Path) {
        for name in self.files.difference(&now.files) {
            let Some(picture) = name.strip_prefix(&format!("{}/", page::IMAGES)) else {
                continue;
            };
            if crate::layout::FolderName::try_from(picture).is_err() {
                continue;
            }
            let path = out.join(page::IMAGES).join(picture);
            if std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_file()) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// The text of a page an avaprep report wrote, found without its record.
fn report_page(path: &Path) -> Option<String> {
    crate::fsutil::read_regular_text(path, crate::fsutil::FileKind::Config)
        .ok()
        .filter(|html| html.contains("<title>avaprep report</title>"))
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
