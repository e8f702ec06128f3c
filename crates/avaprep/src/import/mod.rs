//! `avaprep import`: annotation-tool exports (CVAT for video 1.1, CVAT for images 1.1, VIA 3,
//! whole-clip CSV) in, a dataset of videos on disk out, in AVA's files and on AVA's clock.
//!
//! Every consumer (PySlowFast's `ava_helper`, pytorchvideo's `Ava`, mmaction2's `AVADataset`)
//! assumes AVA's clock: row 0 of a video's frames is second 900 and keyframes are the seconds
//! 902..1798. So the dataset is written on that clock, every video the same way: its own second
//! `s` (from the file's first timestamp) is the dataset's second `s + video_start`, where
//! `video_start` puts the earliest annotated keyframe of any video on 902 (902 itself when one is
//! annotated at its second 0). Rows from 900 to the file's start show its first frame, as a
//! consumer shows the first frame for a clip that reaches before a video's start. The shift is
//! recorded in the manifest (`dataset.video_start`), and `video_spans.csv` says where each file
//! ends, so nothing past a video's end is extracted or listed.

pub mod cvat;
pub mod export;
pub mod keyframes;
pub mod resolve;
pub mod via;
pub mod whole_clip;
mod write;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::annotations::{VideoFileName, VideoId};
pub use export::{ActionSource, ExportError};
use export::{Export, ExportedVideo};
use resolve::{KeyframeBox, SampleCounts, VideoFacts};

/// AVA's keyframe seconds, which PySlowFast hard-codes: 902..=1798.
pub const FIRST_KEYFRAME: u32 = 902;
pub const LAST_KEYFRAME: u32 = 1798;
/// The most keyframe seconds a video can span: 897.
pub const MAX_KEYFRAMES: u32 = LAST_KEYFRAME - FIRST_KEYFRAME + 1;

/// Which videos are val (the rest are train).
#[derive(Debug, Clone, PartialEq)]
pub enum SplitRule {
    /// These video ids.
    Given(BTreeSet<String>),
    /// This share of the videos, chosen by a hash of the seed and the id (the same on every
    /// machine, and stable as videos are added).
    Fraction { val: f64, seed: u64 },
}

#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub exports: Vec<PathBuf>,
    /// The folder of `<id>.<ext>` videos the exports annotate.
    pub videos: PathBuf,
    /// The dataset folder written: `dataset.toml` and `annotations/`.
    pub out: PathBuf,
    pub actions: ActionSource,
    /// Seconds between keyframes (AVA: 1).
    pub keyframe_interval: u32,
    pub split: SplitRule,
    /// A person detector's boxes (AVA's detection CSV, on the videos' own seconds); without it
    /// the ground-truth boxes serve as the proposals, with score 1.0.
    pub detections: Option<PathBuf>,
    /// Keyframes not to train on or score (AVA's excluded-timestamps CSV, `video,second` on the
    /// videos' own seconds); without it none are.
    pub excluded: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl ImportError {
    /// A value the user gave that no import could honour (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, ImportError::Usage(_))
    }
}

/// What an import did, printed as its summary and written to `import.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImportSummary {
    pub manifest: PathBuf,
    /// Videos by split.
    pub splits: BTreeMap<String, Vec<String>>,
    pub keyframes: u64,
    pub boxes: u64,
    /// Action ids by name (ids stay as they were in an earlier import; new names are appended).
    pub actions: BTreeMap<String, u16>,
    pub clipped_boxes: u64,
    pub boxes_outside_frame: u64,
    pub boxes_without_action: u64,
    pub shapes_off_keyframe: u64,
    /// Detector boxes and exclusions at seconds outside the dataset's keyframes, left out.
    pub detections_off_keyframes: u64,
    pub exclusions_off_keyframes: u64,
    /// Annotated videos the folder lacks (their boxes are left out).
    pub missing_videos: Vec<String>,
    /// Videos left out, with why (unreadable, too long).
    pub skipped_videos: Vec<String>,
    /// `ground truth (score 1.0)` or the detections file.
    pub proposals: String,
    /// The dataset second of each video's own second 0.
    pub video_start: u32,
}

/// One video of the dataset: its facts and its boxes on its own clock.
struct ImportedVideo {
    id: VideoId,
    facts: VideoFacts,
    boxes: Vec<KeyframeBox>,
}

/// Reads the exports, matches their videos to the folder, samples every track at the keyframes
/// and writes the dataset. Videos the folder lacks are listed, not fatal; an unreadable or too
/// long video is left out and listed, and the rest are written.
pub fn import(options: &ImportOptions) -> Result<ImportSummary, ImportError> {
    check_options(options)?;
    let exported = read_exports(options)?;
    let on_disk = videos_in_folder(&options.videos)?;
    let mut summary = ImportSummary::default();
    let mut counts = SampleCounts::default();
    let mut videos = Vec::new();
    for video in &exported {
        let id = video_id(video)?;
        let Some(file) = on_disk.get(&id) else {
            summary.missing_videos.push(id.to_string());
            continue;
        };
        match probe(&options.videos.join(file.to_string())) {
            Ok(facts) => {
                let keyframes =
                    resolve::keyframe_seconds(facts.last_instant(), options.keyframe_interval);
                let boxes = resolve::sample(
                    video,
                    &facts,
                    &keyframes,
                    options.keyframe_interval,
                    &mut counts,
                );
                videos.push(ImportedVideo { id, facts, boxes });
            }
            Err(message) => summary.skipped_videos.push(format!("{id}: {message}")),
        }
    }
    videos.retain(|video| !video.boxes.is_empty());
    let video_start = clock_shift(&videos);
    videos.retain(|video| {
        let last = video.boxes.iter().map(|b| b.second).max().unwrap_or(0);
        let fits = last + video_start <= LAST_KEYFRAME;
        if !fits {
            summary.skipped_videos.push(format!(
                "{}: annotated up to its second {last}; on AVA's clock, which PySlowFast hard-codes, the keyframes of a dataset span at most {MAX_KEYFRAMES} s (902..1798) and this one begins at its second {}: cut the video into parts",
                video.id,
                FIRST_KEYFRAME.saturating_sub(video_start)
            ));
        }
        fits
    });
    if videos.is_empty() {
        return Err(ImportError::Usage(format!(
            "no annotated video of the exports is in {} (missing: {}; left out: {})",
            options.videos.display(),
            list_or_none(&summary.missing_videos),
            list_or_none(&summary.skipped_videos)
        )));
    }
    summary.clipped_boxes = counts.clipped;
    summary.boxes_outside_frame = counts.outside_frame;
    summary.boxes_without_action = counts.without_action;
    summary.shapes_off_keyframe = counts.off_keyframe;
    let splits = split_videos(&videos, &options.split)?;
    write::write_dataset(options, &videos, &splits, video_start, &mut summary)?;
    Ok(summary)
}

/// The dataset second of each file's time 0: the earliest annotated keyframe of any video lands
/// on AVA's first, 902.
fn clock_shift(videos: &[ImportedVideo]) -> u32 {
    let earliest = videos
        .iter()
        .flat_map(|video| video.boxes.iter().map(|b| b.second))
        .min()
        .unwrap_or(0);
    FIRST_KEYFRAME.saturating_sub(earliest)
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join("; ")
    }
}

fn check_options(options: &ImportOptions) -> Result<(), ImportError> {
    if options.exports.is_empty() {
        return Err(ImportError::Usage(
            "name at least one export to import".into(),
        ));
    }
    if options.keyframe_interval == 0 {
        return Err(ImportError::Usage(
            "--keyframe-interval 0: keyframes are whole seconds apart, 1 or more".into(),
        ));
    }
    if let SplitRule::Fraction { val, .. } = options.split
        && !(0.0..1.0).contains(&val)
    {
        return Err(ImportError::Usage(format!(
            "--val-fraction {val}: must be at least 0 and less than 1"
        )));
    }
    if !options.videos.is_dir() {
        return Err(ImportError::Usage(format!(
            "--videos {}: not a folder",
            options.videos.display()
        )));
    }
    Ok(())
}

/// Every export read by its format (from the file's extension), its videos in order. A video
/// in two exports is an error: its person ids would collide.
fn read_exports(options: &ImportOptions) -> Result<Vec<ExportedVideo>, ImportError> {
    let mut videos: Vec<ExportedVideo> = Vec::new();
    for path in &options.exports {
        let export = read_export(path, &options.actions)?;
        for video in export.videos {
            if let Some(first) = videos
                .iter()
                .find(|seen| stem(&seen.name) == stem(&video.name))
            {
                return Err(ImportError::Input {
                    path: path.clone(),
                    message: format!(
                        "video {} is annotated here and in {}; merge them in the tool, or import one",
                        stem(&video.name),
                        first.origin
                    ),
                });
            }
            videos.push(video);
        }
    }
    Ok(videos)
}

fn read_export(path: &Path, actions: &ActionSource) -> Result<Export, ImportError> {
    let extension = path
        .extension()
        .and_then(|extension| extension.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("xml" | "zip") => Ok(cvat::read_cvat(path, actions)?),
        Some("json") => Ok(via::read_via3(path, actions)?),
        Some("csv") => Ok(whole_clip::read_whole_clip(path)?),
        _ => Err(ImportError::Usage(format!(
            "{}: not an export avaprep reads; it reads CVAT for video or images 1.1 (.xml, or CVAT's .zip), VIA 3 projects (.json) and whole-clip labels (.csv: video,start_frame,label)",
            path.display()
        ))),
    }
}

/// The file stem an export names a video by: `clips/clip25.mp4` -> `clip25`.
fn stem(name: &str) -> &str {
    let file = name.rsplit(['/', '\\']).next().unwrap_or(name);
    match file.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => file,
    }
}

fn video_id(video: &ExportedVideo) -> Result<VideoId, ImportError> {
    let stem = stem(&video.name);
    stem.parse().map_err(|reason| ImportError::Input {
        path: video.origin.file.clone(),
        message: format!(
            "{}: video {:?}: its file stem {stem:?} is not a video id avaprep takes ({reason}); rename the file and the task",
            video.origin.place, video.name
        ),
    })
}

/// The videos of a folder by id (`<id>.mkv`, `.mp4`, `.webm`); other files are not videos.
fn videos_in_folder(folder: &Path) -> Result<BTreeMap<VideoId, VideoFileName>, ImportError> {
    let entries = std::fs::read_dir(folder).map_err(|error| ImportError::Input {
        path: folder.to_path_buf(),
        message: error.to_string(),
    })?;
    let mut names: BTreeMap<VideoId, VideoFileName> = BTreeMap::new();
    let mut found: Vec<VideoFileName> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<VideoFileName>().ok())
        .collect();
    found.sort_by_key(ToString::to_string);
    for name in found {
        if let Some(first) = names.insert(name.id, name) {
            return Err(ImportError::Input {
                path: folder.to_path_buf(),
                message: format!(
                    "video {} is there twice ({first} and {name}); keep one",
                    name.id
                ),
            });
        }
    }
    Ok(names)
}

fn probe(path: &Path) -> Result<VideoFacts, String> {
    let info = crate::media::probe(path).map_err(|error| error.to_string())?;
    let frame_times = crate::media::frame_times(path).map_err(|error| error.to_string())?;
    let (Some(&first), Some(&last)) = (frame_times.first(), frame_times.last()) else {
        return Err(format!("{}: libav finds no frames in it", path.display()));
    };
    // The video's own end, a frame period after its last frame: the container's duration may
    // be an audio track's, longer.
    let period = match frame_times.len() {
        1 => 1.0 / 30.0,
        count => (last - first) / (count - 1) as f64,
    };
    Ok(VideoFacts {
        frame_times,
        duration: last + period,
        size: export::FrameSize {
            width: info.width,
            height: info.height,
        },
    })
}

/// Video ids by split (`train`, `val`), each sorted.
fn split_videos(
    videos: &[ImportedVideo],
    rule: &SplitRule,
) -> Result<BTreeMap<String, Vec<VideoId>>, ImportError> {
    let ids: Vec<VideoId> = videos.iter().map(|video| video.id).collect();
    let val: BTreeSet<VideoId> = match rule {
        SplitRule::Given(named) => {
            let known: BTreeSet<String> = ids.iter().map(ToString::to_string).collect();
            if let Some(unknown) = named.iter().find(|name| !known.contains(*name)) {
                return Err(ImportError::Usage(format!(
                    "--val {unknown}: not an imported video (they are: {})",
                    known.into_iter().collect::<Vec<_>>().join(", ")
                )));
            }
            ids.iter()
                .copied()
                .filter(|id| named.contains(id.as_str()))
                .collect()
        }
        SplitRule::Fraction { val, seed } => {
            let mut ranked = ids.clone();
            ranked.sort_by_key(|id| {
                let mut hash = Sha256::new();
                hash.update(seed.to_le_bytes());
                hash.update(id.as_bytes());
                hash.finalize()
            });
            let wanted = (val * ids.len() as f64).round() as usize;
            // A fraction above 0 asks for a val split: one video at least, and one left to train.
            let count = match *val > 0.0 && ids.len() >= 2 {
                true => wanted.clamp(1, ids.len() - 1),
                false => 0,
            };
            ranked.into_iter().take(count).collect()
        }
    };
    let train: Vec<VideoId> = ids.iter().copied().filter(|id| !val.contains(id)).collect();
    if train.is_empty() {
        return Err(ImportError::Usage(
            "every video is in val: leave at least one to train on".into(),
        ));
    }
    let mut splits = BTreeMap::from([("train".to_string(), train)]);
    if !val.is_empty() {
        splits.insert("val".to_string(), val.into_iter().collect());
    }
    for ids in splits.values_mut() {
        ids.sort();
    }
    Ok(splits)
}

/// A sample export under `src/import/testdata/`.
#[cfg(test)]
fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/import/testdata")
        .join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_names_match_files_by_stem() {
        assert_eq!(stem("clips/clip25.mp4"), "clip25");
        assert_eq!(stem("C:\\data\\IMG_0042.MOV"), "IMG_0042");
        assert_eq!(stem("cam3_2024-05-01_1200"), "cam3_2024-05-01_1200");
    }
}
