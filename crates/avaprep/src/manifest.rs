//! Dataset manifests (`manifests/*.toml`): everything avaprep needs to know about a dataset —
//! where each file is, its size and sha256 where known, the annotated segment, the keyframe range,
//! and the splits. `manifests/ava-v2.2.toml` describes AVA 2.2; `avaprep synth` writes one in the
//! same schema for the synthetic miniature.
//!
//! URLs are a source's base URL joined with a file's path. A mirror replaces the base URLs: every
//! source has a `mirror_path`, so `--base-url http://host/` turns source `ava` into
//! `http://host/ava-dataset/` and one mirror tree can hold every source.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::layout::FolderName;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetManifest {
    pub dataset: DatasetInfo,
    /// Where files are downloaded from; none for a dataset of files on disk (`[local]`).
    #[serde(default)]
    pub sources: BTreeMap<String, Source>,
    /// The annotation archive (a zip of CSV and pbtxt files without a top folder).
    pub annotations: Option<RemoteFile>,
    /// Video file-name lists, by video folder (`trainval`, `test`).
    #[serde(default)]
    pub name_lists: BTreeMap<String, RemoteFile>,
    /// Person-detector boxes (PySlowFast's bundle, a tar).
    pub boxes: Option<RemoteFile>,
    /// Where the videos named in each name list are, by video folder.
    #[serde(default)]
    pub videos: BTreeMap<FolderName, VideoFolder>,
    /// A dataset whose videos and annotation files are on disk (`avaprep import` writes one):
    /// where they are. Nothing is downloaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalFiles>,
    pub labels: Labels,
    pub splits: BTreeMap<String, Split>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetInfo {
    pub name: String,
    pub version: String,
    /// The annotated segment of every video, seconds from the stream's first timestamp: [start, end).
    pub segment: [f64; 2],
    /// The first and last keyframe second (inclusive).
    pub keyframes: [u32; 2],
    /// A CSV in the annotation folder (`video_id,start,end`) of the seconds each video's file
    /// covers on the dataset's clock, for datasets whose videos differ in length: nothing is
    /// extracted or listed past a video's end. Without it every video covers the segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_spans: Option<String>,
    /// The dataset second at each video file's time 0 (AVA: 0, its segment counts from the
    /// stream's first timestamp). A dataset on AVA's clock whose files begin later says so here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub video_start: f64,
    /// The videos are on clocks of their own (an import's): each file's time 0 is the start of
    /// its span in `video_spans`, else `video_start`, and what people read (predict's, eval's
    /// and report's seconds) names the file's seconds too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_clock: bool,
    /// No person detector's boxes were given (an import without `--detections`): the proposals
    /// are the ground-truth boxes with score 1.0, so a score measures the actions only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ground_truth_proposals: bool,
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

/// The files of a dataset on disk. Relative paths are relative to the manifest's folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalFiles {
    /// The folder of `<id>.<ext>` videos.
    pub videos: PathBuf,
    /// The folder of the annotation files the manifest names.
    pub annotations: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub url: String,
    /// This source's folder inside a mirror tree.
    pub mirror_path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteFile {
    pub source: String,
    pub path: String,
    /// Other places the same file is published; not used once a mirror is set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternate_urls: Vec<String>,
    pub size: Option<u64>,
    pub sha256: Option<String>,
    /// A leading folder removed from every member of an archive when it is extracted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strip_prefix: Option<String>,
    /// Known files inside an archive, checked after extraction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contents: Vec<KnownFile>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownFile {
    pub name: String,
    pub size: Option<u64>,
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VideoFolder {
    pub source: String,
    pub path: String,
    /// The name list (a key of `name_lists`) that says which files the folder holds.
    pub name_list: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    /// Every action class (`label { name label_id label_type }` form).
    pub full: String,
    /// The scored classes (`item { name id }` form).
    pub scored: String,
    pub included_timestamps: String,
}

/// Files named in a split are paths inside the extracted annotation archives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Split {
    /// The video folder (a key of `videos`) the split's videos are in.
    pub videos: FolderName,
    pub ground_truth: Option<String>,
    /// A list of video ids, for splits without ground truth.
    pub video_ids: Option<String>,
    pub excluded_timestamps: Option<String>,
    pub detected_boxes: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{path}: cannot read dataset manifest: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("--base-url {argument}: {reason}")]
    BadBaseUrl { argument: String, reason: String },
}

impl DatasetManifest {
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text = crate::fsutil::read_regular_text(path, crate::fsutil::FileKind::Config)
            .map_err(|source| ManifestError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        let mut manifest = Self::parse(path, &text)?;
        if let Some(local) = &mut manifest.local {
            let folder = path.parent().unwrap_or(Path::new("."));
            local.videos = folder.join(&local.videos);
            local.annotations = folder.join(&local.annotations);
        }
        Ok(manifest)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self, ManifestError> {
        let invalid = |message: String| ManifestError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let manifest: DatasetManifest = toml::from_str(text)
            .map_err(|error| invalid(error.to_string().trim_end().to_string()))?;
        manifest.check().map_err(invalid)?;
        Ok(manifest)
    }

    fn check(&self) -> Result<(), String> {
        let [start, end] = self.dataset.segment;
        let [first, last] = self.dataset.keyframes;
        if !(start >= 0.0 && start < end) {
            return Err(format!("segment [{start}, {end}) is empty or negative"));
        }
        if first > last || f64::from(first) < start || f64::from(last) >= end {
            return Err(format!(
                "keyframes {first}..={last} must lie inside the segment [{start}, {end})"
            ));
        }
        for file in self.remote_files() {
            if !self.sources.contains_key(&file.source) {
                return Err(format!(
                    "`{}` names unknown source `{}`",
                    file.path, file.source
                ));
            }
            check_relative_path(&file.path)?;
            if let Some(prefix) = &file.strip_prefix {
                check_relative_path(prefix.trim_end_matches('/'))?;
            }
            if let Some(sha256) = &file.sha256 {
                check_sha256(sha256)?;
            }
            for known in &file.contents {
                check_relative_path(&known.name)?;
                if let Some(sha256) = &known.sha256 {
                    check_sha256(sha256)?;
                }
            }
        }
        let labels = &self.labels;
        for file in [&labels.full, &labels.scored, &labels.included_timestamps] {
            check_relative_path(file).map_err(|error| format!("labels: {error}"))?;
        }
        for (name, source) in &self.sources {
            check_relative_path(source.mirror_path.trim_end_matches('/'))
                .map_err(|error| format!("sources.{name}.mirror_path: {error}"))?;
            check_http_url(&source.url).map_err(|error| format!("sources.{name}.url: {error}"))?;
        }
        for file in self.remote_files() {
            for url in &file.alternate_urls {
                check_http_url(url)
                    .map_err(|error| format!("`{}` alternate_urls: {error}", file.path))?;
            }
        }
        let video_start = self.dataset.video_start;
        if !(video_start.is_finite() && video_start >= 0.0 && video_start < end) {
            return Err(format!(
                "video_start {video_start}: must be a number of seconds, 0 or more, before the segment's end"
            ));
        }
        if self.annotations.is_none() && self.local.is_none() {
            return Err(
                "names no annotation archive to download and no [local] folder of annotation files"
                    .into(),
            );
        }
        if let Some(spans) = &self.dataset.video_spans {
            check_relative_path(spans).map_err(|error| format!("dataset.video_spans: {error}"))?;
        }
        for (name, folder) in &self.videos {
            if !self.name_lists.contains_key(&folder.name_list) {
                return Err(format!(
                    "videos.{name} names unknown name list `{}`",
                    folder.name_list
                ));
            }
            if !self.sources.contains_key(&folder.source) {
                return Err(format!(
                    "videos.{name} names unknown source `{}`",
                    folder.source
                ));
            }
        }
        for (name, split) in &self.splits {
            if self.local.is_none() && !self.videos.contains_key(&split.videos) {
                return Err(format!(
                    "splits.{name} names unknown video folder `{}`",
                    split.videos
                ));
            }
            let files = [
                &split.ground_truth,
                &split.video_ids,
                &split.excluded_timestamps,
                &split.detected_boxes,
            ];
            for file in files.into_iter().flatten() {
                check_relative_path(file).map_err(|error| format!("splits.{name}: {error}"))?;
            }
            if split.ground_truth.is_none() && split.video_ids.is_none() {
                return Err(format!("splits.{name} needs ground_truth or video_ids"));
            }
        }
        Ok(())
    }

    fn remote_files(&self) -> impl Iterator<Item = &RemoteFile> {
        self.annotations
            .iter()
            .chain(self.name_lists.values())
            .chain(self.boxes.iter())
    }

    /// Points sources at a mirror: `URL` for every source (each at its `mirror_path` below it), or
    /// `SOURCE=URL` for one source (used as is).
    pub fn apply_base_url(&mut self, argument: &str) -> Result<(), ManifestError> {
        let known = self.sources.keys().cloned().collect::<Vec<_>>().join(", ");
        let bad = |reason: String| ManifestError::BadBaseUrl {
            argument: argument.chars().take(200).collect(),
            reason,
        };
        let unknown = || {
            bad(format!(
                "expected URL or SOURCE=URL with a known source ({known})"
            ))
        };
        match argument.split_once('=') {
            Some((name, url)) if !name.contains('/') => {
                let source = self.sources.get_mut(name).ok_or_else(unknown)?;
                check_http_url(url).map_err(bad)?;
                source.url = with_trailing_slash(url);
            }
            _ => {
                if !argument.contains("://") {
                    return Err(unknown());
                }
                check_http_url(argument).map_err(bad)?;
                let base = with_trailing_slash(argument);
                for source in self.sources.values_mut() {
                    source.url = format!("{base}{}", with_trailing_slash(&source.mirror_path));
                }
            }
        }
        for file in self
            .annotations
            .iter_mut()
            .chain(self.name_lists.values_mut())
            .chain(self.boxes.iter_mut())
        {
            file.alternate_urls.clear();
        }
        Ok(())
    }

    /// The URLs to try for a file, first the source's, then the alternates.
    pub fn urls(&self, file: &RemoteFile) -> Vec<String> {
        let base = &self.sources[&file.source].url;
        std::iter::once(format!("{}{}", with_trailing_slash(base), file.path))
            .chain(file.alternate_urls.iter().cloned())
            .collect()
    }
}

/// Downloads speak HTTP(S) only: another scheme (`file://`, `ftp://`) or no URL at all is
/// refused when it is read, not retried as if the network had failed.
pub fn check_http_url(url: &str) -> Result<(), String> {
    let shown: String = url.chars().take(200).collect();
    let parsed =
        reqwest::Url::parse(url).map_err(|error| format!("`{shown}` is not a URL ({error})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "`{shown}`: downloads take http:// or https:// URLs, not {}://",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{shown}` names no host"));
    }
    Ok(())
}

fn with_trailing_slash(url: &str) -> String {
    if url.ends_with('/') {
        url.to_string()
    } else {
        format!("{url}/")
    }
}

/// Paths in a manifest become paths under the data directory: they must stay inside it.
fn check_relative_path(path: &str) -> Result<(), String> {
    let escapes = path.starts_with('/')
        || path.contains('\\')
        || path
            .split('/')
            .any(|part| part == ".." || part == "." || part.is_empty())
        || path.chars().any(char::is_control);
    if escapes {
        return Err(format!("`{path}` is not a plain relative path"));
    }
    Ok(())
}

fn check_sha256(value: &str) -> Result<(), String> {
    if value.len() == 64 && value.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(format!("`{value}` is not a sha256 (64 hex digits)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ava() -> DatasetManifest {
        DatasetManifest::load(&crate::testing::repo_root().join("manifests/ava-v2.2.toml")).unwrap()
    }

    #[test]
    fn ava_manifest_holds_the_official_facts() {
        let manifest = ava();
        assert_eq!(manifest.dataset.segment, [900.0, 1801.0]);
        assert_eq!(manifest.dataset.keyframes, [902, 1798]);
        assert_eq!(
            manifest.urls(&manifest.name_lists["trainval"])[0],
            "https://s3.amazonaws.com/ava-dataset/annotations/ava_file_names_trainval_v2.1.txt"
        );
        assert_eq!(manifest.name_lists["trainval"].size, Some(4794));
        let train = manifest
            .annotations
            .as_ref()
            .unwrap()
            .contents
            .iter()
            .find(|f| f.name == "ava_train_v2.2.csv");
        assert_eq!(train.unwrap().size, Some(41_125_697));
        assert_eq!(manifest.splits["test"].videos.as_str(), "test");
        assert_eq!(manifest.splits.len(), 3);
    }

    #[test]
    fn base_url_points_every_source_at_a_mirror() {
        let mut manifest = ava();
        manifest.apply_base_url("http://127.0.0.1:8000").unwrap();
        assert_eq!(
            manifest.urls(manifest.annotations.as_ref().unwrap()),
            vec!["http://127.0.0.1:8000/ava-dataset/annotations/ava_v2.2.zip"]
        );
        let boxes = manifest.boxes.clone().unwrap();
        assert_eq!(
            manifest.urls(&boxes),
            vec!["http://127.0.0.1:8000/pyslowfast/annotation/ava/ava_annotations.tar"]
        );
        manifest.apply_base_url("ava=http://mirror/x").unwrap();
        assert_eq!(manifest.sources["ava"].url, "http://mirror/x/");
        assert!(manifest.apply_base_url("nosuch=http://a/").is_err());
        assert!(manifest.apply_base_url("not-a-url").is_err());
        assert!(manifest.apply_base_url("not a url").is_err());
        assert!(manifest.apply_base_url("file:///srv/mirror").is_err());
        assert!(manifest.apply_base_url("ava=ftp://mirror/x").is_err());
    }

    #[test]
    fn urls_that_are_not_http_are_refused_when_read() {
        let path = crate::testing::repo_root().join("manifests/ava-v2.2.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let https = "https://s3.amazonaws.com/ava-dataset/";
        assert!(text.contains(https));
        for (url, expected) in [
            ("file:///srv/ava/", "not file://"),
            ("ftp://mirror/ava/", "not ftp://"),
            ("s3.amazonaws.com/ava-dataset/", "is not a URL"),
        ] {
            let error = DatasetManifest::parse(&path, &text.replace(https, url))
                .unwrap_err()
                .to_string();
            assert!(error.contains("sources.ava.url"), "{error}");
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn rejects_paths_that_escape() {
        let text =
            std::fs::read_to_string(crate::testing::repo_root().join("manifests/ava-v2.2.toml"))
                .unwrap()
                .replace("annotations/ava_v2.2.zip", "../../etc/passwd");
        let error = DatasetManifest::parse(Path::new("m.toml"), &text).unwrap_err();
        assert!(
            error.to_string().contains("not a plain relative path"),
            "{error}"
        );
    }
}
