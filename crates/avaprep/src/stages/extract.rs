//! `extract`: one item per planned video, several videos at once.
//!
//! A video's frames are written to `frames/.<id>.partial/`, beside their place (so on its
//! filesystem, wherever `frames/` leads), swapped with `frames/<id>/` when all of them are there,
//! and only then is its index written to `frame_index/<id>.csv`. A kill at any moment leaves
//! either no index (the next run redoes the video) or a complete set; the frames of an earlier
//! extraction stay until the new ones are complete.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{StageId, StageSource};
use crate::bad_setting::BadSetting;
use crate::extract::{
    DEFAULT_MARGIN_S, ExtractSpec, FrameFormat, TimeRange, VideoStats, extract_video,
    frame_numbers, ranges_around, segment_range, write_index,
};
use crate::layout::DataLayout;
use crate::pipeline::spec::SpecError;
use crate::pipeline::state::CountsMismatch;
use crate::pipeline::{
    Granularity, ItemError, ItemRecord, PlannedItem, Stage, StageContext, StageReport,
};
use crate::progress::Unit;
use crate::records::{PlannedVideo, VideoPlan};

/// Which parts of each video to extract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ranges {
    /// [t - margin, t + margin] around every annotated keyframe t, merged, clipped to the segment.
    Annotated,
    /// The whole annotated segment (what PySlowFast's contiguous frame lists need).
    Segment,
}

impl Ranges {
    const ALL: [Ranges; 2] = [Ranges::Annotated, Ranges::Segment];
    /// The names of the pipeline file's `ranges` and the command's `--ranges`.
    pub const NAMES: [&str; 2] = [Ranges::Annotated.name(), Ranges::Segment.name()];

    pub const fn name(self) -> &'static str {
        match self {
            Ranges::Annotated => "annotated",
            Ranges::Segment => "segment",
        }
    }
}

impl std::str::FromStr for Ranges {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|ranges| ranges.name() == name)
            .ok_or_else(|| format!("unknown ranges {name:?}: one of {}", Self::NAMES.join(", ")))
    }
}

/// The `[extract]` table of a pipeline file; the `extract` command's flags of the same names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExtractParams {
    pub fps: f64,
    /// Output height; 0 keeps the native size.
    pub height: u32,
    /// JPEG quantiser as ffmpeg's -q:v (2 best .. 31).
    pub quality: u8,
    pub upscale: bool,
    pub ranges: Ranges,
    /// Seconds kept on each side of a keyframe.
    pub margin: f64,
    /// Videos extracted at once.
    pub jobs: usize,
    /// Delete a downloaded video once its frames are complete.
    pub delete_videos_after_extract: bool,
}

impl ExtractParams {
    /// The frame format, once values no video could honour (the extractor's own checks) are
    /// refused, naming the setting.
    pub fn check(&self) -> Result<FrameFormat, BadSetting> {
        let format = FrameFormat::new(self.fps, self.height, self.quality, self.upscale)?;
        if !(self.margin.is_finite() && self.margin >= 0.0) {
            return Err(BadSetting::new(
                "margin",
                self.margin,
                "must be a finite number of seconds, 0 or more (0 keeps the frame nearest each keyframe)",
            ));
        }
        Ok(format)
    }
}

impl Default for ExtractParams {
    fn default() -> Self {
        ExtractParams {
            fps: crate::extract::DEFAULT_FPS,
            height: crate::extract::DEFAULT_HEIGHT,
            quality: crate::extract::DEFAULT_QUALITY,
            upscale: false,
            ranges: Ranges::Annotated,
            margin: DEFAULT_MARGIN_S,
            jobs: std::thread::available_parallelism().map_or(2, usize::from),
            delete_videos_after_extract: false,
        }
    }
}

/// The cores shared among the videos that can still run at once: one decoder thread each while
/// every worker has a video; the last videos get the cores the finished ones leave, so the tail
/// of a run (or a single video) does not leave cores idle. Frame threads change no pixel and no
/// choice of frame. A video with cores of its own gets two frame threads a core: they wait on
/// each other's reference rows, and more frames in flight keep the cores busy (on 2 cores, a 720p
/// H.264 video alone finished sooner with 4 threads than with 2 or 3).
fn decoder_threads(cores: usize, jobs: usize, not_started: usize) -> usize {
    let running_at_most = jobs.clamp(1, not_started + 1);
    match cores / running_at_most {
        0 | 1 => 1,
        share => (2 * share).min(MAX_FRAME_THREADS),
    }
}

/// Above this libavcodec warns that more frame threads are not recommended.
const MAX_FRAME_THREADS: usize = 16;

pub struct ExtractStage {
    params: ExtractParams,
    format: FrameFormat,
}

impl ExtractStage {
    /// The stage of `params`, checked: the `extract` command's flags and the `[extract]` table
    /// both come through here.
    pub fn new(params: ExtractParams) -> Result<Self, BadSetting> {
        let format = params.check()?;
        Ok(ExtractStage { params, format })
    }

    pub fn from_source(source: &StageSource) -> Result<Self, SpecError> {
        let params: ExtractParams = source.typed_params(StageId::Extract)?;
        ExtractStage::new(params).map_err(|bad| source.invalid(StageId::Extract, bad.to_string()))
    }

    /// `not_started`: the videos no worker has begun besides this one.
    fn spec(&self, not_started: usize) -> ExtractSpec {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let threads = decoder_threads(cores, self.params.jobs, not_started);
        ExtractSpec::new(self.format, threads)
    }

    /// The spans of a video to extract. A margin under half a frame period (`--margin 0`) still
    /// keeps the frame nearest each keyframe: its window is widened to one period.
    fn ranges(&self, plan: &VideoPlan, video: &PlannedVideo) -> Vec<TimeRange> {
        let margin = self.params.margin.max(0.5 / self.params.fps);
        match self.params.ranges {
            Ranges::Annotated => {
                ranges_around(&video.keyframes, margin, video.extractable(plan.segment))
            }
            Ranges::Segment => segment_range(video.extractable(plan.segment)),
        }
    }

    /// Extracts one video's frames into place; deletes the download where asked.
    fn extract_video(&self, context: &StageContext, item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let plan = load_plan(context.data_dir)?;
        let video = plan
            .video(item)
            .ok_or_else(|| ItemError::input(format!("video {item}: not in the video plan")))?;
        let input = match &plan.videos_on_disk {
            // The file name is a checked `<id>.<ext>`, so the path stays in the folder.
            Some(on_disk) => on_disk.folder.join(video.file_name.to_string()),
            None => layout
                .videos(&video.folder)
                .join(video.file_name.to_string()),
        };
        if !input.exists() {
            let hint = match plan.videos_on_disk {
                Some(_) => "put it back, or run `avaprep run` again to drop it".to_string(),
                None => Self::ask_for_the_download(&layout, video, &input)?,
            };
            return Err(ItemError::input(format!(
                "video {item}: {} is not there ({hint})",
                input.display()
            )));
        }
        let stats = self.extract_into_place(context, &layout, &plan, video, &input)?;
        // The user's own videos are never deleted.
        if self.params.delete_videos_after_extract && plan.videos_on_disk.is_none() {
            super::fetch_videos::mark_deleted(&layout, item)
                .and_then(|()| std::fs::remove_file(&input))
                .map_err(|error| {
                    ItemError::output(format!("video {item}: {}: {error}", input.display()))
                })?;
        }
        let frames = layout.relative(&layout.video_frames(&video.id));
        let index = layout.relative(&layout.frame_index(&video.id));
        record(&stats)
            .with_files(context.data_dir, &[&frames, &index], &[])
            .map_err(|error| ItemError::output(format!("video {item}: {error}")))
    }
}

/// A pre-cut clip whose time 0 is dataset second `start` has no frame before it: a range that
/// begins earlier would get the clip's first frame for every instant before `start`.
fn check_start(video: &PlannedVideo, ranges: &[TimeRange], start: f64) -> Result<(), ItemError> {
    match ranges.first() {
        Some(first) if first.start < start => Err(ItemError::usage(format!(
            "video {}: the range {:.3}..{:.3} s to extract begins before the file does (its time 0 is dataset second {start}, the video start given as --video-start or [fetch] video_start); give the second the files really begin at",
            video.id, first.start, first.end
        ))),
        _ => Ok(()),
    }
}

impl Stage for ExtractStage {
    type Id = StageId;

    fn id(&self) -> StageId {
        StageId::Extract
    }

    fn depends_on(&self) -> &'static [StageId] {
        &[StageId::FetchVideos]
    }

    fn granularity(&self) -> Granularity {
        Granularity::PerVideo
    }

    fn params(&self) -> serde_json::Value {
        let mut params = serde_json::to_value(&self.params).expect("params serialise");
        // How many run at once and whether videos are kept change nothing in the frames.
        if let Some(object) = params.as_object_mut() {
            object.remove("jobs");
            object.remove("delete_videos_after_extract");
            object.insert("version".into(), 1.into());
        }
        params
    }

    /// A video's frames depend on its file, its keyframes, the segment and the file's start:
    /// another split or another video in the plan changes nothing here. An own dataset's
    /// segment ends 3 s after its latest keyframe, so one video labelled further would move
    /// every video's: there the frames' first instant and this video's ranges stand for it.
    fn plan(&self, context: &StageContext) -> Result<Vec<PlannedItem>, ItemError> {
        let plan = load_plan(context.data_dir)?;
        Ok(plan
            .videos
            .iter()
            .map(|video| {
                let start = Some(video.file_start(plan.default_file_start())).filter(|&start| {
                    plan.videos_on_disk.is_some() || video.span.is_some() || start != 0.0
                });
                let segment = if plan.own_clock {
                    serde_json::json!({
                        "start": plan.segment[0],
                        "ranges": self.ranges(&plan, video),
                    })
                } else {
                    serde_json::json!(plan.segment)
                };
                let mut identity = serde_json::json!({
                    "file": video.file_name,
                    "folder": video.folder,
                    "keyframes": video.keyframes,
                    "segment": segment,
                    "start": start,
                });
                if let Some(span) = video.span {
                    identity["span"] = serde_json::json!(span);
                }
                PlannedItem::new(video.id.to_string(), identity)
            })
            .collect())
    }

    fn concurrency(&self) -> usize {
        self.params.jobs.max(1)
    }

    fn run_item(&self, context: &StageContext, item: &str) -> Result<ItemRecord, ItemError> {
        let outcome = self.extract_video(context, item);
        let layout = DataLayout::new(context.data_dir);
        super::note_video_outcome(&layout, self.id(), item, &outcome, context.cancelled());
        outcome
    }

    /// How much smaller the result is than every source frame of the segment at native
    /// resolution (what the reference pipelines write), from the counts the extractor measured.
    fn summary(&self, report: &StageReport<StageId>) -> Result<Vec<String>, CountsMismatch> {
        let counts: FrameCounts = report.counts_as()?;
        if counts.segment_source_frames == 0 {
            return Ok(Vec::new());
        }
        // More frames than the source has where a rate above the source's shows some twice.
        let kept = match report.files < counts.segment_source_frames {
            true => format!(
                "{} of {} source frames kept ({:.1}x fewer)",
                report.files,
                counts.segment_source_frames,
                counts.segment_source_frames as f64 / report.files.max(1) as f64,
            ),
            false => format!(
                "{} frames from {} source frames",
                report.files, counts.segment_source_frames
            ),
        };
        let mut lines = vec![format!(
            "{kept}, {:.1}x fewer pixels; {} source frames decoded",
            counts.segment_source_pixels as f64 / counts.pixels_written.max(1) as f64,
            counts.source_frames_decoded,
        )];
        if counts.rotated_videos > 0 {
            lines.push(format!(
                "{} videos turned upright by their display rotation, as players show them",
                counts.rotated_videos
            ));
        }
        Ok(lines)
    }
}

impl ExtractStage {
    /// The hint for a video whose file is not there while its frames are to be made. One that
    /// was downloaded (then deleted after an earlier extraction, or by hand): the frames it had
    /// are of other settings or incomplete, so they are no longer listed, and the next fetch or
    /// run downloads this video again, no other.
    fn ask_for_the_download(
        layout: &DataLayout,
        video: &PlannedVideo,
        input: &Path,
    ) -> Result<String, ItemError> {
        let item = video.id.as_str();
        let fetch = super::download_command(layout.root());
        if !layout.download_record(input).exists() {
            return Ok(format!("not downloaded yet: `{fetch}` downloads it"));
        }
        let asked = crate::fsutil::remove_if_present(&layout.frame_index(&video.id))
            .and_then(|()| super::fetch_videos::ask_again(layout, item));
        asked.map_err(|error| ItemError::output(format!("video {item}: {error}")))?;
        Ok(format!(
            "`{fetch}` downloads it again, and only the videos extraction needs"
        ))
    }

    fn extract_into_place(
        &self,
        context: &StageContext,
        layout: &DataLayout,
        plan: &VideoPlan,
        video: &PlannedVideo,
        input: &Path,
    ) -> Result<VideoStats, ItemError> {
        let fail = |error: &dyn std::fmt::Display| {
            ItemError::input(format!("video {}: {error}", video.id))
        };
        let final_dir = layout.video_frames(&video.id);
        let staging = crate::fsutil::staging_beside(&final_dir);
        let index = layout.frame_index(&video.id);
        // A pre-cut clip's time 0 is the dataset's second `start`: the extractor works on the
        // file's clock, the index is written on the dataset's.
        // A plan written before `video_start` was recorded has it only for videos on disk.
        let start = video.file_start(plan.default_file_start());
        let ranges = self.ranges(plan, video);
        check_start(video, &ranges, start)?;
        let frames = frame_numbers(&ranges, plan.segment[0], self.params.fps);
        if frames.is_empty() && !video.keyframes.is_empty() {
            return Err(fail(&format!(
                "no frame to extract around its {} keyframes; the frames already there are kept",
                video.keyframes.len()
            )));
        }
        // Whatever an interrupted run left half-made is redone from scratch. The frames already
        // in place stay until the new ones are complete, but are no longer indexed: made under
        // other settings, they must not be listed if this extraction fails.
        crate::fsutil::remove_if_present(&index).map_err(|error| fail(&error))?;
        crate::fsutil::remove_if_present(&staging).map_err(|error| fail(&error))?;
        std::fs::create_dir_all(&staging).map_err(|error| fail(&error))?;
        let item = video.id.to_string();
        // Ctrl-C stops the video in progress too: its frames so far are no set, and the next
        // run extracts it again.
        let progress = |done: u64, total: u64| {
            context
                .reporter
                .item_progress(self.id().name(), &item, done, total, Unit::Frames);
            !context.cancelled()
        };
        // Frames are numbered from the segment's start, even where the file begins later; they
        // end where the file does.
        let end = video.extractable(plan.segment)[1];
        let segment = [plan.segment[0] - start, end - start];
        let made = extract_video(
            input,
            video.id.as_str(),
            &frames,
            segment,
            &self.spec(context.not_started),
            &staging,
            &progress,
        )
        .map_err(|error| fail(&error))
        .and_then(|mut extraction| {
            extraction.index = extraction
                .index
                .into_iter()
                .map(|row| row.starting_at(start))
                .collect();
            crate::fsutil::replace_dir(&staging, &final_dir).map_err(|error| fail(&error))?;
            write_index(&index, &extraction.index).map_err(|error| fail(&error))?;
            Ok(extraction.stats)
        });
        // A failed or stopped extraction's frames are no set, and the next run starts the
        // video afresh: they go now, not left filling a disk that may be what failed.
        if made.is_err()
            && let Err(error) = crate::fsutil::remove_if_present(&staging)
        {
            tracing::debug!("{}: not removed: {error}", staging.display());
        }
        made
    }
}

/// After an extraction that left every video of the plan done: deletes the downloads whose
/// frames an earlier run made (this run's own were deleted as each was made), so
/// `delete_videos_after_extract` asked of data extracted before still frees their disk. Returns
/// the videos deleted; videos on disk are never deleted.
pub fn delete_extracted_downloads(data_dir: &Path) -> Result<Vec<String>, ItemError> {
    let layout = DataLayout::new(data_dir);
    let plan = load_plan(data_dir)?;
    if plan.videos_on_disk.is_some() {
        return Ok(Vec::new());
    }
    let extracted = match crate::pipeline::StateStore::new(data_dir, None)
        .peek(StageId::Extract.name())
        .map_err(ItemError::input)?
    {
        crate::pipeline::state::Peeked::Valid(state) => state.items,
        _ => return Ok(Vec::new()),
    };
    let mut deleted = Vec::new();
    for video in plan
        .videos
        .iter()
        .filter(|video| extracted.contains_key(video.id.as_str()))
    {
        let item = video.id.as_str();
        let input = layout
            .videos(&video.folder)
            .join(video.file_name.to_string());
        if !input.is_file() || !layout.frame_index(&video.id).is_file() {
            continue;
        }
        super::fetch_videos::mark_deleted(&layout, item)
            .and_then(|()| std::fs::remove_file(&input))
            .map_err(|error| {
                ItemError::output(format!("video {item}: {}: {error}", input.display()))
            })?;
        deleted.push(item.to_string());
    }
    Ok(deleted)
}

fn load_plan(data_dir: &Path) -> Result<VideoPlan, ItemError> {
    VideoPlan::load(&DataLayout::new(data_dir).video_plan()).map_err(ItemError::input)
}

/// What the extractor measured of one video; summed over the videos in the stage's report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FrameCounts {
    pub source_frames_decoded: u64,
    pub source_frames_skipped: u64,
    /// Source frames in the annotated segment, and their pixels at native size: what a full
    /// 30 fps native extraction writes.
    pub segment_source_frames: u64,
    pub segment_source_pixels: u64,
    pub pixels_written: u64,
    /// Videos whose frames were turned upright by their display rotation.
    pub rotated_videos: u64,
}

fn record(stats: &VideoStats) -> ItemRecord {
    let (source_width, source_height) = stats.source_size;
    let (width, height) = stats.output_size;
    let counts = FrameCounts {
        source_frames_decoded: stats.source_frames_decoded,
        source_frames_skipped: stats.source_frames_skipped,
        segment_source_frames: stats.segment_source_frames,
        rotated_videos: u64::from(stats.rotation_degrees != 0),
        segment_source_pixels: stats.segment_source_frames
            * u64::from(source_width)
            * u64::from(source_height),
        pixels_written: stats.frames_written * u64::from(width) * u64::from(height),
    };
    ItemRecord {
        files: stats.frames_written,
        bytes: stats.jpeg_bytes,
        ..ItemRecord::default()
    }
    .with_counts(&counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::{VideoFileName, VideoId};

    /// `--ranges` and a pipeline file's `ranges` spell each choice the same way.
    #[test]
    fn range_names_are_the_pipeline_files_and_parse_back() {
        for ranges in Ranges::ALL {
            assert_eq!(serde_json::to_value(ranges).unwrap(), ranges.name());
            assert_eq!(ranges.name().parse::<Ranges>(), Ok(ranges));
        }
        assert!("all".parse::<Ranges>().unwrap_err().contains("annotated"));
    }

    fn plan(keyframes: Vec<u32>) -> VideoPlan {
        VideoPlan {
            segment: [5.0, 35.0],
            keyframes: [7, 32],
            videos: vec![PlannedVideo {
                id: "-5KQ66BBWC4".parse::<VideoId>().unwrap(),
                file_name: "-5KQ66BBWC4.mkv".parse::<VideoFileName>().unwrap(),
                folder: "trainval".try_into().unwrap(),
                split: "train".into(),
                keyframes,
                span: None,
            }],
            files: Default::default(),
            videos_on_disk: None,
            video_start: 0.0,
            own_clock: false,
            ground_truth_proposals: false,
        }
    }

    #[test]
    fn cores_go_to_the_videos_that_can_still_run_at_once() {
        // Every worker busy: one decoder thread each.
        assert_eq!(decoder_threads(2, 2, 5), 1);
        // Two cores a video: two frame threads a core.
        assert_eq!(decoder_threads(8, 4, 4), 4);
        // The last video gets them all; the last few share them.
        assert_eq!(decoder_threads(2, 2, 0), 4);
        assert_eq!(decoder_threads(8, 4, 1), 8);
        // One video at a time, within libavcodec's limit; or one core.
        assert_eq!(decoder_threads(8, 1, 30), 16);
        assert_eq!(decoder_threads(32, 1, 0), 16);
        assert_eq!(decoder_threads(1, 2, 0), 1);
    }

    fn frames(margin: f64, keyframes: Vec<u32>) -> Vec<u32> {
        let stage = ExtractStage::new(ExtractParams {
            margin,
            ..ExtractParams::default()
        })
        .unwrap();
        let plan = plan(keyframes);
        let ranges = stage.ranges(&plan, &plan.videos[0]);
        frame_numbers(&ranges, plan.segment[0], stage.params.fps)
    }

    #[test]
    fn margin_zero_keeps_the_frame_nearest_each_keyframe() {
        // At 5 fps from 5 s, frame k shows 5 + (k - 1) / 5 s: 7 s is frame 11, 8 s frame 16.
        assert_eq!(frames(0.0, vec![7, 8]), vec![11, 16]);
        assert_eq!(frames(0.5, vec![7]), (9..=13).collect::<Vec<_>>());
    }

    /// Clips that begin at second 20 while the segment (and a keyframe's range) begins at 5:
    /// the instants before the file would all show its first frame.
    #[test]
    fn a_video_start_after_a_range_begins_is_refused_naming_both() {
        let stage = ExtractStage::new(ExtractParams::default()).unwrap();
        let plan = plan(vec![7, 25]);
        let video = &plan.videos[0];
        let ranges = stage.ranges(&plan, video);
        assert_eq!(ranges[0].start, 5.0);
        let error = check_start(video, &ranges, 20.0).unwrap_err().message;
        assert!(error.contains(&format!("video {}", video.id)), "{error}");
        assert!(error.contains("5.000..9.000 s"), "{error}");
        assert!(error.contains("dataset second 20"), "{error}");
        assert!(check_start(video, &ranges, 5.0).is_ok());
        assert!(check_start(video, &ranges, 0.0).is_ok());
    }
}
