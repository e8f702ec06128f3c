//! The video plan of the `parse` stage: reads every annotation file of the chosen splits with the strict readers and
//! writes down the videos this run uses (`work/videos.json`), with the keyframes each is annotated
//! at. Every later stage reads that plan, so they all work on the same set of videos.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{
    AnnotationError, KeyframeRange, LabelMap, ReadOptions, VideoFileName, VideoId, VideoSpan,
    read_excluded_timestamps, read_ground_truth, read_included_timestamps, read_label_map,
    read_predicted_boxes, read_video_file_names, read_video_ids, read_video_spans,
};
use crate::layout::DataLayout;
use crate::manifest::DatasetManifest;
use crate::records::{PlanFiles, PlannedVideo, SplitFiles, VideoPlan, VideosOnDisk};

/// Which videos to use: splits, an optional explicit list, an optional deterministic subset.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Selection {
    pub splits: Vec<crate::split::SplitName>,
    /// 0: every video of each split.
    pub videos_per_split: usize,
    pub video_list: Option<Vec<VideoId>>,
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Annotation(#[from] AnnotationError),
    #[error(transparent)]
    Record(#[from] crate::records::RecordError),
    #[error(transparent)]
    UnknownSplit(#[from] crate::split::UnknownSplit),
    #[error("{list}: video {video} of split {split} is not in this name list")]
    NotInNameList {
        video: VideoId,
        split: String,
        list: PathBuf,
    },
    #[error(
        "split `{0}`: the dataset names nowhere to download its videos from: name the folder they are in (`--videos DIR`, [fetch] videos)"
    )]
    NoVideoFolder(String),
    #[error("--video-list names {0}, which is in none of the chosen splits")]
    NotInSplits(VideoId),
    #[error("reading the video folder {folder}: {source}")]
    VideoFolder {
        folder: PathBuf,
        source: std::io::Error,
    },
    /// The two files' names as text: an error the size of two inline ids would burden every
    /// `Result` of planning.
    #[error("{folder}: video {video} is there twice ({first} and {second}); keep one")]
    TwoFiles {
        folder: PathBuf,
        video: String,
        first: String,
        second: String,
    },
}

/// The annotation files (names inside the annotations folder) a plan is built from; with videos
/// already on disk the name lists are not among them (the folder says which files there are).
pub fn plan_inputs(
    manifest: &DatasetManifest,
    selection: &Selection,
    on_disk: Option<&VideosOnDisk>,
) -> Vec<String> {
    let labels = &manifest.labels;
    let mut names = vec![
        labels.full.clone(),
        labels.scored.clone(),
        labels.included_timestamps.clone(),
    ];
    names.extend(manifest.dataset.video_spans.clone());
    for split in selection
        .splits
        .iter()
        .filter_map(|name| manifest.splits.get(name.as_str()))
    {
        let files = [
            &split.ground_truth,
            &split.video_ids,
            &split.excluded_timestamps,
            &split.detected_boxes,
        ];
        names.extend(files.into_iter().flatten().cloned());
        if on_disk.is_some() {
            continue;
        }
        if let Some(folder) = manifest.videos.get(&split.videos) {
            names.push(file_name(&manifest.name_lists[&folder.name_list].path).to_string());
        }
    }
    names.sort();
    names.dedup();
    names
}

fn plan_files(manifest: &DatasetManifest, selection: &Selection) -> PlanFiles {
    let splits = selection
        .splits
        .iter()
        .filter_map(|name| {
            let split = manifest.splits.get(name.as_str())?;
            Some((
                name.to_string(),
                SplitFiles {
                    ground_truth: split.ground_truth.clone(),
                    excluded_timestamps: split.excluded_timestamps.clone(),
                    detected_boxes: split.detected_boxes.clone(),
                },
            ))
        })
        .collect();
    PlanFiles {
        label_map: manifest.labels.full.clone(),
        scored_label_map: manifest.labels.scored.clone(),
        splits,
    }
}

/// Reads the annotation files and chooses the videos. With `on_disk`, the file names come from
/// that folder; a video it lacks stays in the plan under the name it would have, and the
/// fetch-videos stage reports it missing, as a video the server does not have.
pub fn build_plan(
    manifest: &DatasetManifest,
    layout: &DataLayout,
    selection: &Selection,
    on_disk: Option<&VideosOnDisk>,
) -> Result<VideoPlan, PlanError> {
    let [first, last] = manifest.dataset.keyframes;
    let range = KeyframeRange::new(first, last).expect("the manifest checks its keyframes");
    let annotations = layout.annotations();
    let labels = read_label_map(&annotations.join(&manifest.labels.full))?;
    read_label_map(&annotations.join(&manifest.labels.scored))?;
    let on_disk_names = on_disk
        .map(|on_disk| names_on_disk(&on_disk.folder))
        .transpose()?;
    let mut videos = Vec::new();
    for split in &selection.splits {
        videos.extend(split_videos(
            manifest,
            layout,
            split,
            range,
            &labels,
            on_disk_names.as_ref(),
        )?);
    }
    if let Some(list) = &selection.video_list {
        let wanted: BTreeSet<&VideoId> = list.iter().collect();
        for id in list {
            if !videos.iter().any(|video: &PlannedVideo| video.id == *id) {
                return Err(PlanError::NotInSplits(*id));
            }
        }
        videos.retain(|video| wanted.contains(&video.id));
    }
    if selection.videos_per_split > 0 {
        videos = subset(videos, selection.videos_per_split);
    }
    if let Some(spans) = &manifest.dataset.video_spans {
        let spans: BTreeMap<VideoId, VideoSpan> = read_video_spans(&annotations.join(spans))?
            .into_iter()
            .map(|span| (span.video, span))
            .collect();
        for video in &mut videos {
            let Some(span) = spans.get(&video.id) else {
                continue;
            };
            video.span = Some(span.span);
            // A part of a longer file reads that file (parts are an import's, whose videos are
            // on disk: a downloaded dataset has none).
            if let (Some(file), Some(names)) = (span.file, &on_disk_names) {
                video.file_name = names.get(&file).copied().unwrap_or(VideoFileName {
                    id: file,
                    ..video.file_name
                });
            }
        }
    }
    Ok(VideoPlan {
        segment: manifest.dataset.segment,
        keyframes: manifest.dataset.keyframes,
        videos,
        files: plan_files(manifest, selection),
        videos_on_disk: on_disk.cloned(),
        video_start: on_disk.map_or(manifest.dataset.video_start, |on_disk| {
            on_disk.start_seconds
        }),
        own_clock: manifest.dataset.own_clock,
        ground_truth_proposals: manifest.dataset.ground_truth_proposals,
    })
}

/// The videos in a folder of `<id>.<ext>` files; other files are not videos of the dataset.
fn names_on_disk(folder: &Path) -> Result<BTreeMap<VideoId, VideoFileName>, PlanError> {
    let failed = |source| PlanError::VideoFolder {
        folder: folder.to_path_buf(),
        source,
    };
    let mut names: BTreeMap<VideoId, VideoFileName> = BTreeMap::new();
    let mut entries: Vec<String> = std::fs::read_dir(folder)
        .map_err(failed)?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    entries.sort();
    for entry in entries {
        let Ok(name) = entry.parse::<VideoFileName>() else {
            continue;
        };
        if let Some(first) = names.insert(name.id, name) {
            return Err(PlanError::TwoFiles {
                folder: folder.to_path_buf(),
                video: name.id.to_string(),
                first: first.to_string(),
                second: name.to_string(),
            });
        }
    }
    Ok(names)
}

fn split_videos(
    manifest: &DatasetManifest,
    layout: &DataLayout,
    split_name: &crate::split::SplitName,
    range: KeyframeRange,
    labels: &LabelMap,
    on_disk: Option<&BTreeMap<VideoId, VideoFileName>>,
) -> Result<Vec<PlannedVideo>, PlanError> {
    let split = manifest.split(split_name)?;
    let annotations = layout.annotations();
    let mut keyframes = split_keyframes(manifest, &annotations, split, range, labels)?;
    if let Some(excluded) = &split.excluded_timestamps {
        read_excluded_timestamps(&annotations.join(excluded), range)?;
    }
    if let Some(boxes) = &split.detected_boxes {
        let proposals = read_predicted_boxes(
            &annotations.join(boxes),
            &ReadOptions::new(range, Some(labels)),
        )?;
        // The loaders take a keyframe from any box of the detector that passes the threshold:
        // its clip must be extracted too.
        for proposal in proposals {
            if proposal.score >= crate::annotations::DETECTION_SCORE_THRESHOLD
                && let Some(seconds) = keyframes.get_mut(&proposal.key.video)
            {
                seconds.insert(proposal.key.second);
            }
        }
    }
    // A listed video the detector boxes nobody in has nothing to extract or predict on.
    keyframes.retain(|_, seconds| !seconds.is_empty());
    let list_path = manifest
        .videos
        .get(&split.videos)
        .map(|folder| annotations.join(file_name(&manifest.name_lists[&folder.name_list].path)));
    let names: BTreeMap<VideoId, VideoFileName> = match (on_disk, &list_path) {
        (Some(names), _) => names.clone(),
        (None, Some(list_path)) => read_video_file_names(list_path)?
            .into_iter()
            .map(|name| (name.id, name))
            .collect(),
        (None, None) => return Err(PlanError::NoVideoFolder(split_name.to_string())),
    };
    keyframes
        .into_iter()
        .map(|(id, seconds)| {
            let file_name = match (names.get(&id), on_disk) {
                (Some(name), _) => *name,
                (None, Some(_)) => VideoFileName {
                    id,
                    extension: crate::annotations::VideoExtension::Mkv,
                },
                (None, None) => {
                    return Err(PlanError::NotInNameList {
                        video: id,
                        split: split_name.to_string(),
                        list: list_path.clone().unwrap_or_default(),
                    });
                }
            };
            Ok(PlannedVideo {
                id,
                file_name,
                folder: split.videos.clone(),
                split: split_name.to_string(),
                keyframes: seconds.into_iter().collect(),
                span: None,
            })
        })
        .collect()
}

/// Keyframes by video: from the ground truth, or for a split without one (test), every included
/// timestamp for each listed video.
fn split_keyframes(
    manifest: &DatasetManifest,
    annotations: &Path,
    split: &crate::manifest::Split,
    range: KeyframeRange,
    labels: &LabelMap,
) -> Result<BTreeMap<VideoId, BTreeSet<u32>>, PlanError> {
    let mut keyframes: BTreeMap<VideoId, BTreeSet<u32>> = BTreeMap::new();
    if let Some(ground_truth) = &split.ground_truth {
        let options = ReadOptions::new(range, Some(labels));
        for row in read_ground_truth(&annotations.join(ground_truth), &options)? {
            keyframes
                .entry(row.key.video)
                .or_default()
                .insert(row.key.second);
        }
    } else if let Some(ids) = &split.video_ids {
        // AVA's test videos are boxed at every included timestamp; an import's (a dataset that
        // records its videos' spans), each on a clock of its own, only where the detector boxes
        // someone, which the caller adds.
        let seconds: BTreeSet<u32> = match manifest.dataset.video_spans.is_some() {
            true => BTreeSet::new(),
            false => {
                let included = annotations.join(&manifest.labels.included_timestamps);
                read_included_timestamps(&included, range)?
                    .into_iter()
                    .collect()
            }
        };
        for id in read_video_ids(&annotations.join(ids))? {
            keyframes.insert(id, seconds.clone());
        }
    }
    Ok(keyframes)
}

/// `n` videos of each split, chosen by a hash of the id: stable, and spread over the whole list
/// rather than its alphabetical start.
fn subset(videos: Vec<PlannedVideo>, n: usize) -> Vec<PlannedVideo> {
    let mut by_split: BTreeMap<String, Vec<PlannedVideo>> = BTreeMap::new();
    for video in videos {
        by_split.entry(video.split.clone()).or_default().push(video);
    }
    let mut chosen = Vec::new();
    for (_, mut split_videos) in by_split {
        split_videos.sort_by_key(|video| Sha256::digest(video.id.as_bytes()));
        split_videos.truncate(n);
        split_videos.sort_by_key(|video| video.id);
        chosen.extend(split_videos);
    }
    chosen
}

/// The last component of a manifest path: name lists are stored flat in the annotation folder.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
