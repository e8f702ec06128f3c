//! `avaprep fetch`: the annotation archives, name lists and person boxes (`fetch-annotations`),
//! then the videos of the chosen splits (`fetch-videos`, one item per video, several at once).
//!
//! Every file is downloaded resumably and verified (see [`download`]); a completed file is recorded
//! with its size, sha256 and ETag, so a re-run skips it without touching the network, and
//! `--verify` re-hashes what is on disk.

pub mod archive;
pub mod download;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::annotations::plan::{VideoPlan, file_name};
use crate::fsutil;
use crate::layout::DataLayout;
use crate::manifest::{DatasetManifest, RemoteFile};
use crate::pipeline::{Granularity, ItemError, ItemRecord, Stage, StageContext, WHOLE};
use crate::report::Unit;
use download::{DownloadError, Downloader, Expected, RetryPolicy};

/// The `[fetch]` table of a pipeline file; the `fetch` command's flags of the same names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FetchParams {
    /// Concurrent video downloads.
    pub jobs: usize,
    /// Mirrors: `URL` for every source, or `SOURCE=URL` for one.
    pub base_url: Vec<String>,
    /// Attempts per file before giving up.
    pub attempts: u32,
}

impl Default for FetchParams {
    fn default() -> Self {
        FetchParams {
            jobs: 4,
            base_url: Vec::new(),
            attempts: RetryPolicy::default().attempts,
        }
    }
}

impl FetchParams {
    fn policy(&self) -> RetryPolicy {
        RetryPolicy {
            attempts: self.attempts.max(1),
            ..RetryPolicy::default()
        }
    }
}

/// What is recorded beside a completed download.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DownloadRecord {
    pub url: String,
    pub size: u64,
    pub sha256: String,
    pub etag: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HowFetched {
    Downloaded,
    Resumed,
    /// Already on disk and matching its record.
    Verified,
}

/// Downloads `file` (trying its alternate URLs when the first fails) unless a recorded, matching
/// copy is already at `destination`.
pub fn fetch_file(
    downloader: &Downloader,
    layout: &DataLayout,
    urls: &[String],
    destination: &Path,
    expected: &Expected,
    progress: &dyn download::Progress,
) -> Result<HowFetched, DownloadError> {
    if is_recorded(layout, destination, expected) {
        return Ok(HowFetched::Verified);
    }
    let mut last_error = None;
    for url in urls {
        match downloader.fetch(url, destination, expected, progress) {
            Ok(done) => {
                record(layout, destination, &done)?;
                return Ok(if done.resumed_from > 0 {
                    HowFetched::Resumed
                } else {
                    HowFetched::Downloaded
                });
            }
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.expect("at least one URL"))
}

/// A file counts as done when it is where its record says, with the recorded size, and the record
/// agrees with what the manifest expects. Cheap: no hashing (that is `--verify`).
fn is_recorded(layout: &DataLayout, destination: &Path, expected: &Expected) -> bool {
    let Some(record) = read_record(layout, destination) else {
        return false;
    };
    let size_on_disk = std::fs::metadata(destination).map(|meta| meta.len()).ok();
    size_on_disk == Some(record.size)
        && expected.size.is_none_or(|size| size == record.size)
        && expected
            .sha256
            .as_ref()
            .is_none_or(|sha| sha.eq_ignore_ascii_case(&record.sha256))
}

pub fn read_record(layout: &DataLayout, destination: &Path) -> Option<DownloadRecord> {
    let bytes = std::fs::read(layout.download_record(destination)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn record(
    layout: &DataLayout,
    destination: &Path,
    done: &download::Downloaded,
) -> Result<(), DownloadError> {
    let record = DownloadRecord {
        url: done.url.clone(),
        size: done.size,
        sha256: done.sha256.clone(),
        etag: done.etag.clone(),
    };
    let path = layout.download_record(destination);
    let bytes = serde_json::to_vec_pretty(&record).expect("a record serialises");
    fsutil::write_atomic(&path, &bytes).map_err(|source| DownloadError::Io { path, source })
}

/// Re-hashes every recorded download under the data directory; a file that no longer matches
/// its record loses the record (so the next fetch downloads it again). Returns the mismatches.
pub fn verify_recorded(layout: &DataLayout) -> Result<Vec<(PathBuf, String)>, DownloadError> {
    let records_root = layout.download_records();
    let mut mismatches = Vec::new();
    for record_path in walk_json(&records_root) {
        let relative = record_path
            .strip_prefix(&records_root)
            .expect("inside the records")
            .with_extension("");
        let file = layout.root().join(relative);
        let Some(record) = read_record(layout, &file) else {
            continue;
        };
        let problem = match download::hash_file(&file) {
            Ok((size, sha256)) if size == record.size && sha256 == record.sha256 => continue,
            Ok((size, sha256)) => format!(
                "now {size} bytes with sha256 {sha256}; recorded {} bytes with sha256 {}",
                record.size, record.sha256
            ),
            Err(error) => error.to_string(),
        };
        let _ = std::fs::remove_file(&record_path);
        mismatches.push((file, problem));
    }
    Ok(mismatches)
}

fn walk_json(folder: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(folder) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk_json(&path));
        } else if path
            .extension()
            .is_some_and(|extension| extension == "json")
        {
            found.push(path);
        }
    }
    found
}

fn expected(file: &RemoteFile) -> Expected {
    Expected {
        size: file.size,
        sha256: file.sha256.clone(),
    }
}

/// What identifies a remote file's content, without its URLs: a mirror serves the same files.
fn content_identity(file: &RemoteFile) -> serde_json::Value {
    serde_json::json!({
        "path": file.path,
        "size": file.size,
        "sha256": file.sha256,
        "contents": file.contents,
        "strip_prefix": file.strip_prefix,
    })
}

fn item_error(error: impl std::fmt::Display) -> ItemError {
    ItemError::new(error.to_string())
}

/// `fetch-annotations`: the annotation zip (extracted), the name lists, the person-box tar
/// (extracted), all into the annotation folder PySlowFast reads.
pub struct FetchAnnotationsStage {
    pub manifest: DatasetManifest,
    pub params: FetchParams,
}

impl FetchAnnotationsStage {
    fn fetch_archive_and_extract(
        &self,
        downloader: &Downloader,
        layout: &DataLayout,
        file: &RemoteFile,
    ) -> Result<Vec<PathBuf>, ItemError> {
        let archive = layout.downloads().join(file_name(&file.path));
        fetch_file(
            downloader,
            layout,
            &self.manifest.urls(file),
            &archive,
            &expected(file),
            &|_, _| {},
        )
        .map_err(item_error)?;
        let annotations = layout.annotations();
        let written = if file.path.ends_with(".zip") {
            archive::extract_zip(&archive, &annotations)
        } else {
            archive::extract_tar(&archive, &annotations, file.strip_prefix.as_deref())
        }
        .map_err(item_error)?;
        check_known_contents(&archive, &annotations, file)?;
        Ok(written)
    }
}

/// The manifest's sizes and sha256 of archive members hold after extraction.
fn check_known_contents(archive: &Path, folder: &Path, file: &RemoteFile) -> Result<(), ItemError> {
    for known in &file.contents {
        let path = folder.join(&known.name);
        let (size, sha256) = download::hash_file(&path).map_err(|_| {
            ItemError::new(format!(
                "{}: the archive has no member {} that the manifest lists",
                archive.display(),
                known.name
            ))
        })?;
        let size_ok = known.size.is_none_or(|expected| expected == size);
        let sha_ok = known
            .sha256
            .as_ref()
            .is_none_or(|expected| expected.eq_ignore_ascii_case(&sha256));
        if !size_ok || !sha_ok {
            return Err(ItemError::new(format!(
                "{}: member {} is {size} bytes with sha256 {sha256}, not what the manifest lists",
                archive.display(),
                known.name
            )));
        }
    }
    Ok(())
}

impl Stage for FetchAnnotationsStage {
    fn name(&self) -> &'static str {
        "fetch-annotations"
    }

    fn depends_on(&self) -> &'static [&'static str] {
        &[]
    }

    fn granularity(&self) -> Granularity {
        Granularity::Whole
    }

    fn params(&self) -> serde_json::Value {
        let lists: Vec<_> = self
            .manifest
            .name_lists
            .values()
            .map(content_identity)
            .collect();
        serde_json::json!({
            "version": 1,
            "annotations": content_identity(&self.manifest.annotations),
            "name_lists": lists,
            "boxes": self.manifest.boxes.as_ref().map(content_identity),
        })
    }

    fn plan(&self, _context: &StageContext) -> Result<Vec<String>, ItemError> {
        Ok(vec![WHOLE.to_string()])
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let downloader = Downloader::new(self.params.policy()).map_err(item_error)?;
        let mut files =
            self.fetch_archive_and_extract(&downloader, &layout, &self.manifest.annotations)?;
        if let Some(boxes) = &self.manifest.boxes {
            files.extend(self.fetch_archive_and_extract(&downloader, &layout, boxes)?);
        }
        for list in self.manifest.name_lists.values() {
            let destination = layout.annotations().join(file_name(&list.path));
            fetch_file(
                &downloader,
                &layout,
                &self.manifest.urls(list),
                &destination,
                &expected(list),
                &|_, _| {},
            )
            .map_err(item_error)?;
            files.push(destination);
        }
        let bytes = files
            .iter()
            .map(|file| std::fs::metadata(layout.annotations().join(file)).map_or(0, |m| m.len()))
            .sum();
        Ok(ItemRecord {
            files: files.len() as u64,
            bytes,
            ..ItemRecord::default()
        })
    }
}

/// `fetch-videos`: one item per planned video.
pub struct FetchVideosStage {
    pub manifest: DatasetManifest,
    pub params: FetchParams,
}

impl FetchVideosStage {
    fn video_url_and_path(
        &self,
        layout: &DataLayout,
        plan: &VideoPlan,
        id: &str,
    ) -> Result<(String, PathBuf), ItemError> {
        let video = plan.video(id).ok_or_else(|| {
            ItemError::new(format!("{id}: not in {}", layout.video_plan().display()))
        })?;
        let folder = &self.manifest.videos[&video.folder];
        let base = &self.manifest.sources[&folder.source].url;
        let base = if base.ends_with('/') {
            base.clone()
        } else {
            format!("{base}/")
        };
        let url = format!("{base}{}{}", folder.path, video.file_name);
        let path = layout
            .videos(&video.folder)
            .join(video.file_name.to_string());
        Ok((url, path))
    }
}

impl Stage for FetchVideosStage {
    fn name(&self) -> &'static str {
        "fetch-videos"
    }

    fn depends_on(&self) -> &'static [&'static str] {
        &["parse"]
    }

    fn granularity(&self) -> Granularity {
        Granularity::PerVideo
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "version": 1, "videos": self.manifest.videos })
    }

    fn plan(&self, context: &StageContext) -> Result<Vec<String>, ItemError> {
        let plan =
            VideoPlan::load(&DataLayout::new(context.data_dir).video_plan()).map_err(item_error)?;
        Ok(plan
            .videos
            .iter()
            .map(|video| video.id.to_string())
            .collect())
    }

    fn concurrency(&self) -> usize {
        self.params.jobs.max(1)
    }

    fn run_item(&self, context: &StageContext, item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let plan = VideoPlan::load(&layout.video_plan()).map_err(item_error)?;
        let (url, path) = self.video_url_and_path(&layout, &plan, item)?;
        let downloader = Downloader::new(self.params.policy()).map_err(item_error)?;
        let marker = layout.missing_videos().join(item);
        let progress = |done: u64, total: Option<u64>| {
            let total = total.unwrap_or(0);
            context
                .reporter
                .item_progress("fetch-videos", item, done, total, Unit::Bytes);
        };
        let fetched = fetch_file(
            &downloader,
            &layout,
            &[url],
            &path,
            &Expected::default(),
            &progress,
        );
        let how = match fetched {
            Err(error) if error.is_not_found() => {
                let message = format!("video {item}: {error}");
                fsutil::write_atomic(&marker, message.as_bytes()).map_err(item_error)?;
                return Err(ItemError::missing(message));
            }
            other => other.map_err(|error| ItemError::new(format!("video {item}: {error}")))?,
        };
        let _ = std::fs::remove_file(&marker);
        #[cfg(feature = "extract")]
        probe_video(&layout, &plan, item, &path)?;
        let size = std::fs::metadata(&path).map_or(0, |meta| meta.len());
        let mut record = ItemRecord {
            files: 1,
            bytes: size,
            ..ItemRecord::default()
        };
        record.counts.insert(format!("{how:?}").to_lowercase(), 1);
        Ok(record)
    }
}

/// A truncated or broken video is caught here, before extraction: libav must open it, find a
/// video stream, and its duration must reach the video's last annotated keyframe.
#[cfg(feature = "extract")]
fn probe_video(
    layout: &DataLayout,
    plan: &VideoPlan,
    item: &str,
    path: &Path,
) -> Result<(), ItemError> {
    let video = plan.video(item).expect("checked by video_url_and_path");
    let needed = video
        .keyframes
        .last()
        .map_or(plan.segment[0], |&last| f64::from(last) + 1.0);
    let problem = match crate::media::probe(path) {
        Ok(info) if info.end_seconds() >= needed => return Ok(()),
        Ok(info) => format!(
            "it ends at {:.1} s but is annotated up to {needed:.1} s",
            info.end_seconds()
        ),
        Err(error) => error.to_string(),
    };
    // Not kept: the next run downloads it again instead of trusting a broken file.
    let _ = std::fs::remove_file(layout.download_record(path));
    let _ = std::fs::remove_file(path);
    Err(ItemError::new(format!(
        "video {item}: downloaded {} but {problem}",
        path.display()
    )))
}
