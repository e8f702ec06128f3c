//! The `lists` stage: what PySlowFast reads, written so that it reads it unchanged.
//!
//! - `frame_lists/<split>.csv` (train, then val, then the rest): PySlowFast's exact format, videos
//!   numbered by first appearance across the files. PySlowFast takes row `p` of a video to show
//!   `segment_start + p / 30` s, so the lists are timed by time, never by count: at `list_fps`
//!   rows a second, row `p` points at the extracted frame nearest that instant. A clip of any
//!   annotated keyframe (`num_frames` rows `sampling_rate` apart, as PySlowFast takes it) must
//!   touch only instants that were extracted; a list that would feed a clip frames from the
//!   wrong time is refused, naming the video, the keyframe and the margin that would do.
//! - `slowfast/annotations/`: ground truth, exclusions, person-detector boxes and label maps,
//!   filtered to exactly the videos that have frames (the dropped ones, with the reason, in
//!   `slowfast/dropped_videos.txt`).
//! - `slowfast/ava.yaml`: the dataset keys of PySlowFast's config for these files, and
//!   `slowfast/lists.json`, the lists' timing (rows a second, segment start, keyframe range) that
//!   PySlowFast's config has no keys for, read by `validate`. `slowfast/annotations/SHA256SUMS`
//!   records what was written.
//! - `slowfast/train.yaml`: PySlowFast's training config for SlowFast R50 on these files, the
//!   trainer's `ava-r50` recipe (see [`pyslowfast_train`]), when the extracted frames hold its clip.
//! - With `pytorchvideo`, `pytorchvideo/`: the 30 fps view of links pytorchvideo's `Ava` reads.
//! - With `mmaction2`, `mmaction2/`: what mmaction2's `AVADataset` reads (see [`mmaction2`]).

mod mmaction2;
mod pickle;
mod pyslowfast_config;
pub mod pyslowfast_train;

pub use pyslowfast_config::relocate_configs;
use pyslowfast_config::{LOCATED_CONFIGS, config_yaml, largest_action_id};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{StageId, StageSource};
use crate::annotations::VideoId;
use crate::bad_setting::BadSetting;
use crate::frame_index::FrameIndex;
use crate::fsutil;
use crate::layout::{DataLayout, frame_file_name};
use crate::pipeline::spec::SpecError;
use crate::pipeline::state::CountsMismatch;
use crate::pipeline::{ItemError, ItemRecord, Stage, StageContext, StageReport};
use crate::records::{Mmaction2View, PlannedVideo, VideoPlan};
use crate::records::{WRITTEN_TIMING, WrittenTiming};

/// The header PySlowFast skips (its typo is the original's).
pub const FRAME_LIST_HEADER: &str = "original_vido_id video_id frame_id path labels";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListsParams {
    /// Rows per second of video: 30 for an unpatched PySlowFast (it hard-codes `FPS = 30`); the
    /// extraction rate for a loader patched to it.
    pub list_fps: f64,
    /// PySlowFast's `DATA.NUM_FRAMES` and `DATA.SAMPLING_RATE`, in list rows: the clip span the
    /// lists are checked for and the config says.
    pub num_frames: u32,
    pub sampling_rate: u32,
    /// Also write the 30 fps view pytorchvideo's `Ava` reads (`pytorchvideo/`): it takes every
    /// file in a video's folder, sorted, as 30 fps frames, so each video gets a folder of links
    /// named as a full 30 fps extraction would be, each pointing at the nearest extracted frame.
    pub pytorchvideo: bool,
    /// Also write the view mmaction2 1.x's `AVADataset` reads (`mmaction2/`): links named as its
    /// `filename_tmpl` expects at the extracted rate, the proposals pickle and a config.
    pub mmaction2: bool,
}

impl Default for ListsParams {
    /// SlowFast R50 8x8 on AVA: 32 rows 2 apart at 30 rows a second, a 2.1 s clip.
    fn default() -> Self {
        ListsParams {
            list_fps: 30.0,
            num_frames: 32,
            sampling_rate: 2,
            pytorchvideo: false,
            mmaction2: false,
        }
    }
}

impl ListsParams {
    pub fn validate(&self) -> Result<(), BadSetting> {
        if !(self.list_fps.is_finite() && self.list_fps > 0.0 && self.list_fps <= 240.0) {
            return Err(BadSetting::new(
                "list_fps",
                self.list_fps,
                "must be a rate above 0 and at most 240",
            ));
        }
        if self.num_frames == 0 || self.sampling_rate == 0 {
            return Err(
                BadSetting::new("num_frames", self.num_frames, "must be at least 1")
                    .and("sampling_rate", self.sampling_rate),
            );
        }
        Ok(())
    }

    /// Seconds a clip spans at the list rate.
    pub fn clip_seconds(&self) -> f64 {
        f64::from(self.num_frames * self.sampling_rate) / self.list_fps
    }
}

/// What the lists hold.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListCounts {
    pub videos_listed: u64,
    pub rows: u64,
    pub videos_dropped: u64,
    /// 1 when `slowfast/train.yaml` was written.
    pub train_config: u64,
}

pub struct ListsStage {
    pub params: ListsParams,
}

impl ListsStage {
    pub fn from_source(source: &StageSource) -> Result<Self, SpecError> {
        let params = source.params(StageId::Lists, ListsParams::validate)?;
        Ok(ListsStage { params })
    }
}

impl Stage for ListsStage {
    type Id = StageId;

    fn id(&self) -> StageId {
        StageId::Lists
    }

    fn depends_on(&self) -> &'static [StageId] {
        &[StageId::Parse, StageId::Extract]
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "version": 3, "params": self.params })
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let plan = VideoPlan::load(&layout.video_plan()).map_err(ItemError::input)?;
        if let Some(problem) = plan.unnamed_files(&layout.video_plan()) {
            return Err(ItemError::input(problem));
        }
        let written = write_all(&layout, &plan, &self.params, context.cancel).map_err(|error| {
            match withdraw_lists(&layout, &plan) {
                Ok(()) => error.with_note(
                    "the lists, views and configs of the earlier run were removed: they may name frames made under other settings",
                ),
                Err(removal) => error.with_note(&format!(
                    "the lists of the earlier run could not all be removed ({}); do not train on them",
                    removal.message
                )),
            }
        })?;
        let (configs, made): (Vec<String>, Vec<String>) = written
            .files
            .iter()
            .map(|path| layout.relative(path))
            .partition(|path| LOCATED_CONFIGS.contains(&path.as_str()));
        let made: Vec<&str> = made.iter().map(String::as_str).collect();
        let configs: Vec<&str> = configs.iter().map(String::as_str).collect();
        let bytes = written
            .files
            .iter()
            .map(|path| std::fs::metadata(path).map_or(0, |m| m.len()))
            .sum();
        ItemRecord {
            files: written.files.len() as u64,
            bytes,
            ..ItemRecord::default()
        }
        .with_counts(&written.counts)
        .with_files(context.data_dir, &made, &[])
        .and_then(|record| record.with_named_outputs(context.data_dir, &configs))
        .map_err(ItemError::input)
    }

    fn summary(&self, report: &StageReport<StageId>) -> Result<Vec<String>, CountsMismatch> {
        let counts: ListCounts = report.counts_as()?;
        if counts.videos_listed == 0 {
            return Ok(Vec::new());
        }
        let mut line = format!(
            "{} videos, {} rows at {} rows a second; clips of {} x {} rows ({:.2} s)",
            counts.videos_listed,
            counts.rows,
            self.params.list_fps,
            self.params.num_frames,
            self.params.sampling_rate,
            self.params.clip_seconds()
        );
        if counts.videos_dropped > 0 {
            write!(
                line,
                "; {} without frames dropped everywhere (slowfast/dropped_videos.txt)",
                crate::progress::counted(counts.videos_dropped, "video", "videos")
            )
            .expect("a string");
        }
        let mut lines = vec![line];
        if counts.train_config == 0 {
            let recipe = &pyslowfast_train::Recipe::ava_r50();
            lines.push(format!(
                "no slowfast/train.yaml: the extracted frames do not hold the ava-r50 clip ({} frames {} apart, a whole number of rows each); extract with `--fps 5 --margin 2`",
                recipe.clip_frames, recipe.clip_stride
            ));
        }
        Ok(lines)
    }
}

struct Written {
    files: Vec<std::path::PathBuf>,
    counts: ListCounts,
}

/// Splits in the order PySlowFast numbers videos: train, val, then the rest by name.
fn split_order(plan: &VideoPlan) -> Vec<String> {
    let mut splits: Vec<String> = plan
        .videos
        .iter()
        .map(|video| video.split.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let rank = |split: &str| match split {
        "train" => 0,
        "val" => 1,
        _ => 2,
    };
    splits.sort_by_key(|split| rank(split));
    splits
}

/// `cancel`: the first Ctrl-C; the lists stop at the next video (and are withdrawn, as after
/// any failure: half of them would name frames of other settings).
fn write_all(
    layout: &DataLayout,
    plan: &VideoPlan,
    params: &ListsParams,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<Written, ItemError> {
    let mut files = Vec::new();
    let mut counts = ListCounts::default();
    let mut kept: BTreeSet<VideoId> = BTreeSet::new();
    let mut dropped: BTreeMap<VideoId, String> = BTreeMap::new();
    let mut number = 0;
    let mut mmaction2_view: Option<Mmaction2View> = None;
    let mut period: Option<f64> = None;
    let mut train_clip_fits = true;
    let recipe = pyslowfast_train::Recipe::ava_r50();
    if let Some(reason) = no_frames_at_all(layout, plan) {
        return Err(ItemError::input(reason));
    }
    for split in split_order(plan) {
        let mut text = format!("{FRAME_LIST_HEADER}\n");
        let mut view_text = format!("{FRAME_LIST_HEADER}\n");
        for video in plan.videos.iter().filter(|video| video.split == split) {
            if cancel.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(ItemError::input("interrupted"));
            }
            let index_path = layout.frame_index(&video.id);
            if !index_path.exists() {
                dropped.insert(video.id, missing_reason(layout, video));
                continue;
            }
            let index = FrameIndex::read(&index_path).map_err(ItemError::input)?;
            check_clips(video, &index, plan.segment, params)?;
            let train_clip = recipe
                .sampling_rate(params.list_fps, *period.get_or_insert(index.period))
                .map(|rate| recipe.list_clip(params, rate));
            train_clip_fits &= train_clip
                .is_some_and(|clip| check_clips(video, &index, plan.segment, &clip).is_ok());
            let listed = video.listed(plan.segment);
            counts.rows += write_rows(&mut text, video, &index, listed, params, number);
            if params.pytorchvideo {
                let reach = view_reach(video, listed, plan.segment);
                write_view(layout, video, &index, reach, number, &mut view_text)?;
            }
            if params.mmaction2 {
                let view = mmaction2::view_for(plan.segment, index.period)?;
                if *mmaction2_view.get_or_insert(view) != view {
                    return Err(ItemError::input(format!(
                        "video {}: its frames were extracted at another rate than the other videos'; run `{}` again",
                        video.id,
                        crate::stages::remake_command(layout.root(), StageId::Extract)
                    )));
                }
                mmaction2::write_video(layout, video, plan.segment, &index, &view)?;
            }
            kept.insert(video.id);
            number += 1;
        }
        let path = layout.frame_lists().join(format!("{split}.csv"));
        write_file(&path, text.as_bytes())?;
        files.push(path);
        if params.pytorchvideo {
            let path = layout
                .pytorchvideo()
                .join("frame_lists")
                .join(format!("{split}.csv"));
            write_file(&path, view_text.as_bytes())?;
            files.push(path);
        }
    }
    remove_unplanned_lists(layout, plan)?;
    if params.pytorchvideo {
        remove_stale_folders(&layout.pytorchvideo().join("frames"), &kept)?;
        files.push(layout.pytorchvideo().join("frames"));
    } else {
        remove_view(&layout.pytorchvideo())?;
    }
    counts.videos_listed = kept.len() as u64;
    counts.videos_dropped = dropped.len() as u64;
    files.extend(write_annotations(layout, plan, &kept)?);
    match mmaction2_view {
        Some(view) => {
            remove_stale_folders(&layout.mmaction2().join("rawframes"), &kept)?;
            files.push(layout.mmaction2().join("rawframes"));
            files.extend(mmaction2::write_files(layout, plan, &view)?);
        }
        None => remove_view(&layout.mmaction2())?,
    }
    let mut dropped_text = String::new();
    for (video, reason) in &dropped {
        writeln!(dropped_text, "{video}: {reason}").expect("a string");
    }
    let dropped_path = layout.slowfast().join("dropped_videos.txt");
    write_file(&dropped_path, dropped_text.as_bytes())?;
    files.push(dropped_path);
    let config = layout.slowfast().join("ava.yaml");
    write_file(&config, config_yaml(layout, plan, params).as_bytes())?;
    files.push(config);
    let train_config = layout.slowfast().join("train.yaml");
    match period.filter(|_| train_clip_fits) {
        Some(period) => {
            let rate = recipe
                .sampling_rate(params.list_fps, period)
                .expect("checked with the clips");
            let root =
                std::path::absolute(layout.root()).unwrap_or_else(|_| layout.root().to_path_buf());
            let text = pyslowfast_train::train_yaml(
                &recipe,
                rate,
                params.list_fps,
                largest_action_id(layout, plan)?,
                &root.join("runs").join("pyslowfast"),
                split_order(plan).iter().any(|split| split == "val"),
            );
            write_file(&train_config, text.as_bytes())?;
            files.push(train_config);
            counts.train_config = 1;
        }
        None => remove_file(&train_config)?,
    }
    // What the config cannot say (PySlowFast rejects unknown keys): the lists' timing.
    let timing = WrittenTiming {
        list_fps: params.list_fps,
        segment_start: plan.segment[0],
        segment_end: plan.segment[1],
        keyframes: plan.keyframes,
        video_spans: plan
            .videos
            .iter()
            .filter_map(|video| Some((video.id.to_string(), video.span?)))
            .collect(),
        other_splits: other_splits(plan),
    };
    let timing_path = layout.slowfast().join(WRITTEN_TIMING);
    let timing_json = serde_json::to_vec_pretty(&timing).expect("timing serialises");
    write_file(&timing_path, &timing_json)?;
    files.push(timing_path);
    Ok(Written { files, counts })
}

/// The listed splits the config has no key for, with their tables' names as written.
fn other_splits(plan: &VideoPlan) -> BTreeMap<String, crate::records::SplitFiles> {
    let written = |name: &Option<String>| name.as_deref().map(|name| base_name(name).to_string());
    split_order(plan)
        .into_iter()
        .filter(|split| !pyslowfast_config::CONFIGURED_SPLITS.contains(&split.as_str()))
        .map(|split| {
            let files = plan.files.splits.get(&split).cloned().unwrap_or_default();
            let tables = crate::records::SplitFiles {
                ground_truth: written(&files.ground_truth),
                excluded_timestamps: written(&files.excluded_timestamps),
                detected_boxes: written(&files.detected_boxes),
            };
            (split, tables)
        })
        .collect()
}

/// Why no list is written: no video of the plan has frames (extraction has not run here, or
/// every video is missing). Lists of nothing would pass for a dataset, and PySlowFast fails on
/// them.
fn no_frames_at_all(layout: &DataLayout, plan: &VideoPlan) -> Option<String> {
    if plan
        .videos
        .iter()
        .any(|video| layout.frame_index(&video.id).exists())
    {
        return None;
    }
    let first = plan.videos.first()?;
    Some(format!(
        "no video of the plan has frames ({} planned; {}: {}): run `{}` first",
        plan.videos.len(),
        first.id,
        missing_reason(layout, first),
        crate::stages::make_command(layout.root(), StageId::Extract)
    ))
}

fn missing_reason(layout: &DataLayout, video: &PlannedVideo) -> String {
    crate::stages::no_frames_reason(layout, video.id.as_str())
}

/// Rows `0 .. segment * list_fps` of one video, row `p` pointing at the frame nearest
/// `segment_start + p / list_fps`; returns the row count.
fn write_rows(
    text: &mut String,
    video: &PlannedVideo,
    index: &FrameIndex,
    segment: [f64; 2],
    params: &ListsParams,
    number: usize,
) -> u64 {
    let rows = row_count(segment, params.list_fps);
    let id = video.id.as_str();
    for row in 0..rows {
        let frame = index.nearest(segment[0] + row as f64 / params.list_fps);
        writeln!(
            text,
            "{id} {number} {row} {id}/{} \"\"",
            frame_file_name(id, frame)
        )
        .expect("a string");
    }
    rows
}

/// pytorchvideo's `Ava` assumes 30 frames a second from the segment start, read by position
/// from a sorted folder.
const PYTORCHVIDEO_FPS: f64 = 30.0;

/// AVA's segment runs this far past its last keyframe: a clip of AVA's label context reaches no
/// further.
const CONTEXT_PAST_LAST_KEYFRAME: f64 = 3.0;

/// The seconds the pytorchvideo view covers. pytorchvideo takes a clip from the frames a folder
/// has, so one reaching past a file's end would come back shorter: the view runs on, showing the
/// last frame, as far past the video's last keyframe as AVA's segment runs past its own (3 s),
/// as PySlowFast and mmaction2 repeat a video's last frame.
fn view_reach(video: &PlannedVideo, listed: [f64; 2], segment: [f64; 2]) -> [f64; 2] {
    let last = video.keyframes.last().map_or(listed[1], |&second| {
        f64::from(second) + CONTEXT_PAST_LAST_KEYFRAME
    });
    [listed[0], last.min(segment[1]).max(listed[1])]
}

/// One video's folder of the pytorchvideo view: file `p + 1` is a relative link to the frame
/// nearest `segment_start + p / 30`, so the folder looks like a full 30 fps extraction while
/// holding no bytes of its own. Built beside the old folder and renamed over it: a reader never
/// sees half a folder. Appends the video's rows to the view's list.
fn write_view(
    layout: &DataLayout,
    video: &PlannedVideo,
    index: &FrameIndex,
    segment: [f64; 2],
    number: usize,
    list: &mut String,
) -> Result<(), ItemError> {
    let id = video.id.as_str();
    let folder = layout.pytorchvideo().join("frames").join(id);
    replace_folder(&folder, |staging| {
        for row in 0..row_count(segment, PYTORCHVIDEO_FPS) {
            let frame = index.nearest(segment[0] + row as f64 / PYTORCHVIDEO_FPS);
            let name = frame_file_name(id, row as u32 + 1);
            let target = Path::new("../../../frames")
                .join(id)
                .join(frame_file_name(id, frame));
            let link = staging.join(&name);
            std::os::unix::fs::symlink(&target, &link)
                .map_err(|e| ItemError::output(format!("{}: {e}", link.display())))?;
            writeln!(list, "{id} {number} {row} {id}/{name} \"\"").expect("a string");
        }
        Ok(())
    })
}

/// Fills a staging folder beside `folder` and swaps it in: a reader never sees half a folder,
/// and the old one stays until the new one is complete.
fn replace_folder(
    folder: &Path,
    fill: impl FnOnce(&Path) -> Result<(), ItemError>,
) -> Result<(), ItemError> {
    let io = |path: &Path, error: std::io::Error| {
        ItemError::output(format!("{}: {error}", path.display()))
    };
    let staging = crate::fsutil::staging_beside(folder);
    crate::fsutil::remove_if_present(&staging).map_err(|e| io(&staging, e))?;
    std::fs::create_dir_all(&staging).map_err(|e| io(&staging, e))?;
    fill(&staging)?;
    crate::fsutil::replace_dir(&staging, folder).map_err(|e| io(folder, e))
}

/// After a failed run the lists, views and configs of the run before would still be read, on
/// frames that may since show other instants: they go, so every loader and `validate` refuses
/// the data directory until a run succeeds. (Only the files: a folder may be a link elsewhere.)
fn withdraw_lists(layout: &DataLayout, plan: &VideoPlan) -> Result<(), ItemError> {
    for split in plan.files.splits.keys() {
        remove_file(&layout.frame_lists().join(format!("{split}.csv")))?;
    }
    remove_view(&layout.pytorchvideo())?;
    remove_view(&layout.mmaction2())?;
    for name in ["ava.yaml", "train.yaml", WRITTEN_TIMING] {
        remove_file(&layout.slowfast().join(name))?;
    }
    Ok(())
}

/// The list of a split that no longer has a video (its last one left the plan) would go on
/// naming the videos it had.
fn remove_unplanned_lists(layout: &DataLayout, plan: &VideoPlan) -> Result<(), ItemError> {
    let written = split_order(plan);
    for split in plan
        .files
        .splits
        .keys()
        .filter(|split| !written.contains(split))
    {
        for folder in [
            layout.frame_lists(),
            layout.pytorchvideo().join("frame_lists"),
        ] {
            let path = folder.join(format!("{split}.csv"));
            match std::fs::remove_file(&path) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    return Err(ItemError::input(format!("{}: {error}", path.display())));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// A view no longer asked for would go on pointing at frames of another rate or run: it goes
/// (the lists stage made all of it).
fn remove_view(view: &Path) -> Result<(), ItemError> {
    match std::fs::remove_dir_all(view) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(ItemError::output(format!(
                "{}: {error} (a loader view no longer asked for)",
                view.display()
            )))
        }
        _ => Ok(()),
    }
}

/// Folders of videos no longer listed would make a view disagree with its lists.
fn remove_stale_folders(frames: &Path, kept: &BTreeSet<VideoId>) -> Result<(), ItemError> {
    let Ok(entries) = std::fs::read_dir(frames) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let listed = name
            .to_str()
            .and_then(|name| name.parse::<VideoId>().ok())
            .is_some_and(|id| kept.contains(&id));
        if !listed {
            let path = entry.path();
            std::fs::remove_dir_all(&path)
                .map_err(|error| ItemError::input(format!("{}: {error}", path.display())))?;
        }
    }
    Ok(())
}

fn row_count(segment: [f64; 2], list_fps: f64) -> u64 {
    ((segment[1] - segment[0]) * list_fps).round() as u64
}

/// Every row a keyframe's clip takes (PySlowFast: `range(c - T*r/2, c + T*r/2, r)` around row
/// `c = (second - start) * fps`, clamped to the video's rows) shows an extracted instant.
fn check_clips(
    video: &PlannedVideo,
    index: &FrameIndex,
    segment: [f64; 2],
    params: &ListsParams,
) -> Result<(), ItemError> {
    let segment_start = segment[0];
    let span = i64::from(params.num_frames * params.sampling_rate);
    let last_row = row_count(video.listed(segment), params.list_fps) as i64 - 1;
    for &second in &video.keyframes {
        let centre = ((f64::from(second) - segment_start) * params.list_fps) as i64;
        for row in ((centre - span / 2)..(centre + span / 2)).step_by(params.sampling_rate as usize)
        {
            let row = row.clamp(0, last_row);
            let at = segment_start + row as f64 / params.list_fps;
            if !index.covers(video.shown_at(segment, at, index.period)) {
                return Err(ItemError::usage(format!(
                    "video {}: the clip of keyframe {second} ({} rows {} apart at {} rows a second: {:.2} s) reaches {at:.2} s, which was not extracted; extract with a --margin of at least {:.2}, or choose a shorter clip",
                    video.id,
                    params.num_frames,
                    params.sampling_rate,
                    params.list_fps,
                    params.clip_seconds(),
                    params.clip_seconds() / 2.0 + index.period,
                )));
            }
        }
    }
    Ok(())
}

/// The annotation files, filtered to the videos that have frames: rows of other videos would
/// make PySlowFast's loader fail (its video sets must be equal).
fn write_annotations(
    layout: &DataLayout,
    plan: &VideoPlan,
    kept: &BTreeSet<VideoId>,
) -> Result<Vec<std::path::PathBuf>, ItemError> {
    let source = layout.annotations();
    let target = layout.slowfast().join("annotations");
    let mut files = Vec::new();
    let mut sums = String::new();
    let mut write = |name: &str, bytes: &[u8]| -> Result<(), ItemError> {
        let path = target.join(name);
        write_file(&path, bytes)?;
        writeln!(sums, "{}  {name}", hex::encode(Sha256::digest(bytes))).expect("a string");
        files.push(path);
        Ok(())
    };
    for name in [&plan.files.label_map, &plan.files.scored_label_map] {
        write(base_name(name), &read(&source.join(name))?)?;
    }
    for split in plan.files.splits.values() {
        let tables = [
            &split.ground_truth,
            &split.excluded_timestamps,
            &split.detected_boxes,
        ];
        for name in tables.into_iter().flatten() {
            let bytes = read(&source.join(name))?;
            write(base_name(name), &keep_videos(&bytes, kept))?;
        }
    }
    // `sha256sum -c SHA256SUMS` in the folder, and `avaprep validate`, notice a later edit.
    let sums_path = target.join("SHA256SUMS");
    write_file(&sums_path, sums.as_bytes())?;
    files.push(sums_path);
    Ok(files)
}

/// The lines whose first field is a kept video (parse read these files strictly: no header, no
/// quoting).
fn keep_videos(bytes: &[u8], kept: &BTreeSet<VideoId>) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|&byte| byte == b'\n') {
        let id = line.split(|&byte| byte == b',').next().unwrap_or_default();
        let keep = std::str::from_utf8(id)
            .ok()
            .and_then(|id| id.parse::<VideoId>().ok())
            .is_some_and(|id| kept.contains(&id));
        if keep {
            out.extend_from_slice(line);
        }
    }
    out
}

fn base_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

fn remove_file(path: &Path) -> Result<(), ItemError> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(ItemError::input(format!("{}: {error}", path.display())))
        }
        _ => Ok(()),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ItemError> {
    std::fs::read(path).map_err(|error| ItemError::input(format!("{}: {error}", path.display())))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ItemError> {
    fsutil::write_atomic(path, bytes)
        .map_err(|error| ItemError::input(format!("{}: {error}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first Ctrl-C stops the lists before the next video, writing no list. Before, `lists`
    /// went on to the end whatever the flag said.
    #[test]
    fn a_cancelled_lists_stops_before_the_next_video_and_writes_nothing() {
        let data = tempfile::tempdir().unwrap();
        let layout = DataLayout::new(data.path());
        let plan: VideoPlan = serde_json::from_value(serde_json::json!({
            "segment": [902.0, 905.0],
            "keyframes": [902, 904],
            "videos": [{
                "id": "-5KQ66BBWC4",
                "file_name": "-5KQ66BBWC4.mkv",
                "folder": "trainval",
                "split": "train",
                "keyframes": [902, 903],
            }],
        }))
        .unwrap();
        // Extracted, as far as the lists look before the first video.
        let index = layout.frame_index(&plan.videos[0].id);
        std::fs::create_dir_all(index.parent().unwrap()).unwrap();
        std::fs::write(&index, format!("{}\n", crate::frame_index::HEADER)).unwrap();
        let cancelled = std::sync::atomic::AtomicBool::new(true);
        let params = ListsParams::default();
        let Err(error) = write_all(&layout, &plan, &params, &cancelled) else {
            panic!("the cancelled lists were written");
        };
        assert!(error.message.contains("interrupted"), "{}", error.message);
        assert!(!layout.root().join("frame_lists").join("train.csv").exists());
    }

    /// A long clip of a keyframe near the segment's end reaches its last rows, which show the
    /// last frame (as every consumer repeats a video's end): the lists once asked for a margin
    /// that no extraction could give, as nothing past the end is extracted.
    #[test]
    fn a_long_clip_at_the_segments_end_shows_its_last_frame() {
        let video: PlannedVideo = serde_json::from_value(serde_json::json!({
            "id": "JB1it8ISjLY",
            "file_name": "JB1it8ISjLY.mp4",
            "folder": "trainval",
            "split": "train",
            "keyframes": [926],
        }))
        .unwrap();
        let frames = |last: f64| -> FrameIndex {
            let rows: String = (0..)
                .map(|k| 920.0 + f64::from(k) * 0.2)
                .take_while(|t| *t <= last + 1e-6)
                .enumerate()
                .map(|(k, t)| format!("{},{t:.6},{t:.6},64,48,0.033367,{:.6}\n", k + 1, t - 900.0))
                .collect();
            FrameIndex::parse(&format!("{}\n{rows}", crate::frame_index::HEADER)).unwrap()
        };
        let long = ListsParams {
            num_frames: 64,
            sampling_rate: 4,
            ..ListsParams::default()
        };
        // 5 fps over the segment [900, 930): the last frame is at 929.8 s.
        assert!(check_clips(&video, &frames(929.8), [900.0, 930.0], &long).is_ok());
        // A frame short of the end is still a gap.
        let error = check_clips(&video, &frames(929.6), [900.0, 930.0], &long).unwrap_err();
        assert!(
            error.message.contains("which was not extracted"),
            "{}",
            error.message
        );
    }
}
