//! Downloads for the `fetch-annotations` and `fetch-videos` stages.
//!
//! Every file is downloaded resumably and verified (see [`download`]); a completed file is recorded
//! with its size, sha256 and ETag, so a re-run skips it without touching the network, and
//! `--verify` re-hashes what is on disk.

pub mod archive;
pub mod download;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil;
use crate::layout::DataLayout;
use crate::manifest::RemoteFile;
use download::{DownloadError, Downloader, Expected, RetryPolicy};

/// The `[fetch]` table of a pipeline file: `jobs` and `base_url` are the `fetch` command's flags;
/// `videos`, `video_start` and `annotations` are `extract`'s for videos already on disk;
/// `attempts` is the table's alone. (The splits and the choice of videos are the file's top-level
/// keys.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FetchParams {
    /// Concurrent video downloads.
    pub jobs: usize,
    /// Mirrors: `URL` for every source, or `SOURCE=URL` for one; one mirror may be given alone,
    /// as `--set fetch.base_url=http://...` does.
    #[serde(deserialize_with = "one_or_many")]
    pub base_url: Vec<String>,
    /// Attempts per file before giving up.
    pub attempts: u32,
    /// A folder of videos already on disk (`<id>.mkv`, `.mp4` or `.webm`): read where they are,
    /// never downloaded, never deleted.
    pub videos: Option<PathBuf>,
    /// With `videos`: the dataset second at the files' time 0 (900 for AVA's pre-cut 15-minute
    /// clips, `videos_15min/`); unset, the manifest's (AVA's: 0, whole videos).
    pub video_start: Option<f64>,
    /// A folder of the annotation files already on disk (the CSVs, label maps and person boxes
    /// the manifest names), copied into the data directory; nothing is downloaded. With `videos`
    /// and no `annotations`, the data directory's `annotations/` must hold them.
    pub annotations: Option<PathBuf>,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(input: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(input)? {
        OneOrMany::One(url) => vec![url],
        OneOrMany::Many(urls) => urls,
    })
}

impl Default for FetchParams {
    fn default() -> Self {
        FetchParams {
            jobs: 4,
            base_url: Vec::new(),
            attempts: RetryPolicy::default().attempts,
            videos: None,
            video_start: None,
            annotations: None,
        }
    }
}

impl FetchParams {
    /// Refuses values no video could honour, naming the key (`--video-start`, `[fetch]
    /// video_start`).
    pub fn validate(&self) -> Result<(), String> {
        let video_start = self.video_start.unwrap_or(0.0);
        if !(video_start.is_finite() && video_start >= 0.0) {
            return Err(format!(
                "video_start {video_start}: must be a number of seconds, 0 or more"
            ));
        }
        if video_start != 0.0 && self.videos.is_none() {
            return Err(
                "video_start applies to videos already on disk: give their folder too (videos = \"DIR\", --videos DIR)".into(),
            );
        }
        Ok(())
    }

    /// The videos already on disk, their folder made absolute so the plan holds wherever the
    /// command runs from.
    pub fn videos_on_disk(&self) -> Option<crate::records::VideosOnDisk> {
        let folder = self.videos.as_ref()?;
        Some(crate::records::VideosOnDisk {
            folder: std::path::absolute(folder).unwrap_or_else(|_| folder.clone()),
            start_seconds: self.video_start.unwrap_or(0.0),
        })
    }

    /// Whether the annotations come from disk rather than a download.
    pub fn annotations_on_disk(&self) -> bool {
        self.annotations.is_some() || self.videos.is_some()
    }

    /// Folders in a pipeline file are relative to the file, as its `dataset` is.
    pub fn resolve_against(&mut self, folder: &Path) {
        for path in [&mut self.videos, &mut self.annotations]
            .into_iter()
            .flatten()
        {
            *path = folder.join(&*path);
        }
    }

    /// The folders made absolute (a relative one against the working directory), once: the
    /// stages record what they read by these paths, and a relative one would be looked up under
    /// the data directory (never found, so never seen to change).
    pub fn make_absolute(&mut self) {
        for path in [&mut self.videos, &mut self.annotations]
            .into_iter()
            .flatten()
        {
            if let Ok(absolute) = std::path::absolute(&*path) {
                *path = absolute;
            }
        }
    }

    pub fn policy(&self) -> RetryPolicy {
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
            Ok(completed) => {
                // An unrecorded file there (one `--verify` found damaged) goes first: the new
                // record must never describe it, were the rename not to happen.
                remove_unrecorded(destination)?;
                record(layout, destination, &completed.downloaded)?;
                let done = completed.put_in_place()?;
                return Ok(if done.resumed_from > 0 {
                    HowFetched::Resumed
                } else {
                    HowFetched::Downloaded
                });
            }
            Err(error @ DownloadError::Interrupted { .. }) => return Err(error),
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

fn remove_unrecorded(destination: &Path) -> Result<(), DownloadError> {
    match std::fs::remove_file(destination) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(DownloadError::Io {
            path: destination.to_path_buf(),
            source: error,
        }),
        _ => Ok(()),
    }
}

pub fn read_record(layout: &DataLayout, destination: &Path) -> Option<DownloadRecord> {
    // A record planted as a link is no record: the file is downloaded and recorded again.
    let bytes = fsutil::read_own_file(&layout.download_record(destination)).ok()?;
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
/// A file that is gone where `gone_on_purpose` says so is not one (a video deleted after its
/// frames were made).
pub fn verify_recorded(
    layout: &DataLayout,
    gone_on_purpose: &dyn Fn(&Path) -> bool,
) -> Result<Vec<(PathBuf, String)>, DownloadError> {
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
        if gone_on_purpose(&file) {
            continue;
        }
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

/// What the manifest knows of a file's size and sha256.
pub fn expected(file: &RemoteFile) -> Expected {
    Expected {
        size: file.size,
        sha256: file.sha256.clone(),
    }
}

/// What identifies a remote file's content, without its URLs: a mirror serves the same files.
pub fn content_identity(file: &RemoteFile) -> serde_json::Value {
    serde_json::json!({
        "path": file.path,
        "size": file.size,
        "sha256": file.sha256,
        "contents": file.contents,
        "strip_prefix": file.strip_prefix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--set fetch.base_url=http://x/` once failed with "expected a sequence".
    #[test]
    fn one_mirror_may_stand_alone() {
        let one: FetchParams = toml::from_str("base_url = \"http://x/\"").unwrap();
        let many: FetchParams = toml::from_str("base_url = [\"http://x/\"]").unwrap();
        assert_eq!(one.base_url, ["http://x/"]);
        assert_eq!(one, many);
        assert!(toml::from_str::<FetchParams>("base_url = 3").is_err());
    }
}
