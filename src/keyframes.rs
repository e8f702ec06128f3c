//! `avaprep keyframes`.

use std::path::PathBuf;

use clap::Args;

use avaprep::import::Browser;
use avaprep::import::keyframes::{KeyframeOptions, KeyframeSummary, export_keyframes};
use avaprep::progress::{counted, first_named};
use avaprep_shell::{ExitStatus, Printer, UsageError};

#[derive(Debug, Args)]
pub struct KeyframesArgs {
    /// The folder of your videos (`<name>.mp4`, `.mkv` or `.webm`).
    #[arg(long)]
    pub videos: PathBuf,
    /// The folder to write: images/<video>/<second>.jpg, images.zip (the images for a CVAT task),
    /// annotations.xml (the task's labels and pre-drawn boxes, CVAT for images 1.1) and
    /// via_project.json (the same boxes on the videos, a VIA 3 video annotator project).
    #[arg(long)]
    pub out: PathBuf,
    /// The actions to label, comma-separated: one checkbox each on every person box.
    #[arg(long, value_delimiter = ',', required = true)]
    pub actions: Vec<String>,
    /// A person detector's boxes (AVA's detection CSV on the videos' own seconds), drawn in the
    /// task and the project so people label actions only.
    #[arg(long)]
    pub detections: Option<PathBuf>,
    /// Seconds between keyframes: AVA labels one a second. Import with the same.
    #[arg(long, default_value_t = 1)]
    pub keyframe_interval: u32,
    /// The images' height in pixels (0: the videos' own), as `extract --height`.
    #[arg(long, default_value_t = avaprep::extract::DEFAULT_HEIGHT)]
    pub height: u32,
    /// The browser VIA will run in: `chromium` (also Chrome, Edge, Opera, Brave) or `firefox`.
    /// They time a video that does not start at 0 s differently. Import with the same.
    #[arg(long, default_value = "chromium", value_parser = avaprep_shell::one_of::<Browser>(&Browser::NAMES))]
    pub via_browser: Browser,
}

pub fn run(args: &KeyframesArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let options = KeyframeOptions {
        videos: args.videos.clone(),
        out: args.out.clone(),
        actions: args.actions.clone(),
        keyframe_interval: args.keyframe_interval,
        height: args.height,
        detections: args.detections.clone(),
        via_browser: args.via_browser,
    };
    let summary =
        export_keyframes(&options, printer, &avaprep_shell::CANCEL).map_err(|error| match error
            .is_usage()
        {
            true => anyhow::Error::new(UsageError(error.to_string())),
            false => anyhow::Error::new(error),
        })?;
    printer.record("keyframes", &summary);
    for problem in &summary.skipped_videos {
        eprintln!("error: video {problem}; left out");
    }
    if !summary.detections_of_other_videos.is_empty() {
        printer.note(&format!(
            "warning: the detections name videos with no keyframe images here, their boxes left out: {}",
            first_named(&summary.detections_of_other_videos, 10)
        ));
    }
    printer.result(&summary_text(args, &summary));
    Ok(match summary.skipped_videos.is_empty() {
        true => ExitStatus::Success,
        false => ExitStatus::Failure,
    })
}

fn summary_text(args: &KeyframesArgs, summary: &KeyframeSummary) -> String {
    let kept = match summary.kept_videos {
        0 => String::new(),
        kept => format!(
            " (the images of {kept} kept from an earlier run: their files and settings are as they were)"
        ),
    };
    let mut lines = vec![format!(
        "{} of {}{kept}, {} drawn",
        counted(summary.images as u64, "keyframe image", "keyframe images"),
        counted(summary.videos as u64, "video", "videos"),
        counted(summary.boxes as u64, "person box", "person boxes")
    )];
    if summary.detections_off_keyframes > 0 {
        lines.push(format!(
            "{} at seconds that are no keyframe, left out",
            counted(
                summary.detections_off_keyframes as u64,
                "detector box",
                "detector boxes"
            )
        ));
    }
    let interval = match args.keyframe_interval {
        1 => String::new(),
        seconds => format!(" --keyframe-interval {seconds}"),
    };
    lines.push(format!(
        "CVAT: create a task from {} (its labels: import {} as CVAT for images 1.1), tick the actions, export it as CVAT for images 1.1 (that .zip is EXPORT)",
        summary.archive.display(),
        summary.task.display(),
    ));
    let browser = args.via_browser;
    lines.push(format!(
        "or VIA 3 in {}: open {} in VIA's video annotator, choose each video when asked, tick the actions, save the project (that .json is EXPORT; for {}, run keyframes again with --via-browser {})",
        browser.label(),
        summary.via_project.display(),
        browser.other().label(),
        browser.other().name(),
    ));
    let via_browser = match browser {
        Browser::Chromium => String::new(),
        other => format!(" --via-browser {}", other.name()),
    };
    lines.push(format!(
        "next: avaprep import EXPORT --videos {} --out DATASET --action-from checkboxes{interval}{via_browser}",
        avaprep_shell::shell_word(&args.videos)
    ));
    lines.join("\n")
}
