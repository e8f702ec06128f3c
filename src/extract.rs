//! `avaprep extract`.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use clap::Args;

use avaprep::annotations::plan::Selection;
use avaprep::fetch::FetchParams;
use avaprep::pipeline::prints::Scrutiny;
use avaprep::stages::extract::{ExtractParams, ExtractStage, Ranges};
use avaprep::stages::{Dataset, ProductStages, StageId};
use avaprep_shell::Printer;

use crate::render::{MakingCommand, RunHow, finish, lock, run_stages};
use avaprep_shell::{ExitStatus, GlobalArgs, UsageError};

#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// Frames per second of video time. Frame k shows the source frame nearest to
    /// segment_start + (k-1)/fps.
    #[arg(long, default_value_t = ExtractParams::default().fps)]
    pub fps: f64,
    /// Output height in pixels (width keeps the aspect ratio, rounded to even); 0 keeps the
    /// native size. Smaller sources are not upscaled unless --upscale.
    #[arg(long, default_value_t = ExtractParams::default().height)]
    pub height: u32,
    /// JPEG quantiser, as ffmpeg's -q:v: 2 (best, about JPEG quality 86) to 31.
    #[arg(long, default_value_t = ExtractParams::default().quality)]
    pub quality: u8,
    /// Scale sources smaller than --height up to it.
    #[arg(long)]
    pub upscale: bool,
    /// annotated: only [t - margin, t + margin] around the annotated keyframes; segment: the whole
    /// annotated segment (for PySlowFast's contiguous frame lists).
    #[arg(long, value_parser = avaprep_shell::one_of::<Ranges>(&Ranges::NAMES), default_value = "annotated")]
    pub ranges: Ranges,
    /// Seconds kept on each side of a keyframe (covers AVA's +-1.5 s label context and a
    /// 16-frame clip at 5 fps); 0 keeps the one frame nearest each keyframe.
    #[arg(long, default_value_t = ExtractParams::default().margin, allow_negative_numbers = true)]
    pub margin: f64,
    /// Videos extracted at once, one decoder thread each. Default: the number of cores.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Delete each downloaded video once its frames are complete, to save disk (also those whose
    /// frames an earlier run made).
    #[arg(long)]
    pub delete_videos_after_extract: bool,
    /// Re-hash every recorded frame and index byte for byte (not only names, sizes and times);
    /// a video whose files changed is extracted again.
    #[arg(long)]
    pub verify: bool,
    /// Videos already on disk: a folder of `<id>.mkv`, `.mp4` or `.webm`, read where they are
    /// (nothing is downloaded or deleted). The annotations come from DATA_DIR/annotations, or
    /// --annotations; a video the annotations name that the folder lacks is reported and dropped.
    #[arg(long, value_name = "DIR")]
    pub videos: Option<PathBuf>,
    /// With --videos: the dataset second at the files' time 0, e.g. 900 for AVA's pre-cut
    /// 15-minute clips (`videos_15min/`). Default: the manifest's `video_start` (AVA's: 0,
    /// whole videos).
    #[arg(long, value_name = "SECONDS", requires = "videos")]
    pub video_start: Option<f64>,
    /// With --videos: a folder holding the annotation files the manifest names, copied into
    /// DATA_DIR/annotations.
    #[arg(long, value_name = "DIR", requires = "videos")]
    pub annotations: Option<PathBuf>,
    /// With --videos: the dataset manifest (annotation file names, splits, segment).
    #[arg(long, default_value = crate::fetch::DEFAULT_DATASET, requires = "videos")]
    pub dataset: PathBuf,
    /// With --videos: the splits to plan, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "train,val",
        requires = "videos"
    )]
    pub split: Vec<avaprep::split::SplitName>,
}

pub fn run(
    global: &GlobalArgs,
    args: &ExtractArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<ExitStatus> {
    let mut params = ExtractParams {
        fps: args.fps,
        height: args.height,
        quality: args.quality,
        upscale: args.upscale,
        ranges: args.ranges,
        margin: args.margin,
        delete_videos_after_extract: args.delete_videos_after_extract,
        ..Default::default()
    };
    if let Some(jobs) = args.jobs {
        params.jobs = jobs;
    }
    // Values no video could honour are usage errors, before any work.
    let stage = ExtractStage::new(params).map_err(|bad| UsageError(bad.as_flags()))?;
    let scrutiny = Scrutiny::verify(args.verify);
    if args.videos.is_none() {
        let lock = lock(global, None)?;
        let how = RunHow::single(scrutiny);
        let report = run_stages(global, &lock, vec![&stage], how, printer, cancel)?;
        if args.delete_videos_after_extract && report.succeeded() {
            delete_earlier_downloads(global, printer)?;
        }
        return Ok(finish(&report, printer));
    }
    // Videos on disk: the annotations are taken from disk and planned first, as `fetch` would.
    let fetch = FetchParams {
        videos: args.videos.clone(),
        video_start: args.video_start,
        annotations: args.annotations.clone(),
        ..FetchParams::default()
    };
    fetch.validate().map_err(UsageError)?;
    let selection = Selection {
        splits: args.split.clone(),
        ..Selection::default()
    };
    let dataset = Dataset::new(crate::fetch::load_dataset(&args.dataset)?, selection, fetch)
        .map_err(UsageError)?;
    let mut built = ProductStages::for_command(&dataset, StageId::FetchVideos)?;
    built.stages.push((StageId::Extract, Box::new(stage)));
    let lock = lock(global, None)?;
    let how = RunHow {
        shard: None,
        scrutiny,
        making: MakingCommand::Forget,
    };
    let report = run_stages(global, &lock, built.as_refs(), how, printer, cancel)?;
    Ok(finish(&report, printer))
}

/// After a run whose extraction is done, with `delete_videos_after_extract`: the downloads of
/// videos an earlier run extracted, which this run found done (its own went as each was made).
pub fn delete_earlier_downloads(global: &GlobalArgs, printer: &Printer) -> anyhow::Result<()> {
    let deleted = avaprep::stages::extract::delete_extracted_downloads(&global.data_dir)
        .map_err(|error| anyhow::anyhow!("deleting the extracted videos: {error}"))?;
    if !deleted.is_empty() {
        printer.result(&format!(
            "deleted {} downloaded videos whose frames an earlier run made: {}",
            deleted.len(),
            avaprep::progress::first_named(&deleted, 10)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{ExtractArgs, Ranges};

    #[derive(Debug, Parser)]
    struct Command {
        #[command(flatten)]
        extract: ExtractArgs,
    }

    /// `--ranges` takes the library's names, as a pipeline file's `ranges` does.
    #[test]
    fn ranges_take_the_library_s_names() {
        let parsed = Command::try_parse_from(["extract", "--ranges", "segment"]).unwrap();
        assert_eq!(parsed.extract.ranges, Ranges::Segment);
        let parsed = Command::try_parse_from(["extract"]).unwrap();
        assert_eq!(parsed.extract.ranges, Ranges::Annotated);
        let error = Command::try_parse_from(["extract", "--ranges", "all"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue);
    }
}
