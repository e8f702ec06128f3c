//! `avaprep import`.

use std::path::PathBuf;

use clap::Args;

use avaprep::import::{
    ActionSource, Browser, DatasetPipeline, ImportError, ImportSummary, TEST_SPLIT, import,
    write_pipeline,
};
use avaprep::progress::counted;
use avaprep::stages::import::ImportParams;
use avaprep_shell::{ExitStatus, Printer, UsageError};

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Annotation-tool exports: CVAT for video 1.1 or CVAT for images 1.1 (.xml, or CVAT's
    /// .zip), VIA 3 projects (.json), whole-clip labels (.csv: video,start_frame,label).
    #[arg(required = true)]
    pub exports: Vec<PathBuf>,
    /// The folder of the videos the exports annotate (`<name>.mp4`, `.mkv` or `.webm`, the name
    /// as the export gives it).
    #[arg(long)]
    pub videos: PathBuf,
    /// The dataset folder to write: dataset.toml (the manifest to run), annotations/ (AVA's
    /// files) and import.json. Importing again keeps the action ids already given.
    #[arg(long)]
    pub out: PathBuf,
    /// Where the action is: `label` (CVAT's label; VIA's one attribute), `attribute:NAME` (that
    /// attribute's value or ticked options) or `checkboxes` (every CVAT checkbox attribute that
    /// is true).
    #[arg(long, default_value = "label", value_parser = str::parse::<ActionSource>)]
    pub action_from: ActionSource,
    /// Seconds between keyframes: AVA labels one a second.
    #[arg(long, default_value_t = 1)]
    pub keyframe_interval: u32,
    /// The share of the videos that are val, chosen by a hash of --seed and each id; a video
    /// keeps the split an earlier import into --out gave it with the same share and seed.
    #[arg(long, default_value_t = 0.2, conflicts_with = "val")]
    pub val_fraction: f64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The val videos by id (comma-separated), instead of a fraction. An id may begin with `-`,
    /// as YouTube's do (`--val -sfq0ssU_na`).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub val: Vec<String>,
    /// Videos of the folder to predict on, by id (comma-separated): not labelled in any export,
    /// the test split, its keyframes the seconds --detections boxes someone at.
    #[arg(
        long,
        value_delimiter = ',',
        requires = "detections",
        allow_hyphen_values = true
    )]
    pub test: Vec<String>,
    /// A person detector's boxes (AVA's detection CSV, seconds of the videos' own clock) as the
    /// proposals; without it the ground-truth boxes are, with score 1.0.
    #[arg(long)]
    pub detections: Option<PathBuf>,
    /// Keyframes not to train on or score (AVA's excluded-timestamps CSV: video,second on the
    /// videos' own seconds).
    #[arg(long)]
    pub excluded: Option<PathBuf>,
    /// The browser VIA projects were labelled in: `chromium` (also Chrome, Edge, Opera, Brave)
    /// or `firefox`. They time a video that does not start at 0 s differently.
    #[arg(long, default_value = "chromium", value_parser = avaprep_shell::one_of::<Browser>(&Browser::NAMES))]
    pub via_browser: Browser,
}

pub fn run(args: &ImportArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let params = ImportParams {
        exports: args.exports.clone(),
        videos: args.videos.clone(),
        keyframe_interval: args.keyframe_interval,
        val_fraction: args.val_fraction,
        seed: args.seed,
        val: args.val.clone(),
        detections: args.detections.clone(),
        excluded: args.excluded.clone(),
        via_browser: args.via_browser,
        test: args.test.iter().cloned().collect(),
        ..ImportParams::default()
    };
    let options = params.options(args.action_from.clone(), args.out.clone());
    let summary = import(&options).map_err(|error| match error {
        ImportError::Setting(bad) => anyhow::Error::new(UsageError(bad.as_flags())),
        error if error.is_usage() => anyhow::Error::new(UsageError(error.to_string())),
        error => anyhow::Error::new(error),
    })?;
    printer.record("import", &summary);
    for note in summary.missing_video_notes(&args.videos) {
        printer.note(&format!("warning: {note}"));
    }
    if let Some(note) = summary.gone_video_note(&args.out) {
        printer.note(&format!("warning: {note}"));
    }
    for problem in &summary.skipped_videos {
        eprintln!("error: video {problem}; left out");
    }
    for note in summary.detection_notes() {
        printer.note(&format!("warning: {note}"));
    }
    if let Some(note) = summary.browser_note(|browser| format!("--via-browser {}", browser.name()))
    {
        printer.note(&format!("note: {note}"));
    }
    if let Some(note) = summary.action_note(|source| format!("--action-from {source}")) {
        printer.note(&format!(
            "note: {note}, into an empty --out (the label map in {} keeps `person` as an action)",
            args.out.display()
        ));
    }
    if let Some(note) = summary.slipped_action_note("import into an empty --out") {
        printer.note(&format!("warning: {note}"));
    }
    if let Some(note) = summary.unboxed_action_note("import into an empty --out") {
        printer.note(&format!("warning: {note}"));
    }
    if let Some(note) = summary.val_note("--val ID,ID") {
        printer.note(&format!("warning: {note}"));
    }
    let splits: Vec<&str> = summary.splits.keys().map(String::as_str).collect();
    let pipeline = write_pipeline(&args.out, &splits)?;
    if let Some(note) = &pipeline.note {
        printer.note(&format!("warning: {note}"));
    }
    printer.result(&summary_text(&summary, &pipeline));
    // A video left out, unreadable or not in the folder, is work not done: a CI job hears of it.
    Ok(
        match summary.skipped_videos.is_empty() && summary.missing_videos.is_empty() {
            true => ExitStatus::Success,
            false => ExitStatus::Failure,
        },
    )
}

fn summary_text(summary: &ImportSummary, pipeline: &DatasetPipeline) -> String {
    let labelled: Vec<(&String, usize)> = summary
        .splits
        .iter()
        .filter(|(split, _)| split.as_str() != TEST_SPLIT)
        .map(|(split, videos)| (split, videos.len()))
        .collect();
    let splits: Vec<String> = labelled
        .iter()
        .map(|(split, count)| format!("{split} {count}"))
        .collect();
    let mut actions: Vec<(&u16, &String)> = summary
        .actions
        .iter()
        .map(|(name, id)| (id, name))
        .collect();
    actions.sort();
    let actions: Vec<String> = actions
        .into_iter()
        .map(|(id, name)| format!("{id} {name}"))
        .collect();
    let mut lines = vec![
        format!(
            "imported {} at {} of {} ({})",
            counted(summary.boxes, "box", "boxes"),
            counted(summary.keyframes, "keyframe", "keyframes"),
            counted(
                labelled.iter().map(|(_, count)| count).sum::<usize>() as u64,
                "labelled video",
                "labelled videos"
            ),
            splits.join(", ")
        ),
        format!("actions: {}", actions.join(", ")),
        format!("proposals: {}", summary.proposals),
    ];
    lines.extend(summary.box_lines());
    let left_out = [
        (
            summary.detections_off_keyframes,
            ["detector box", "detector boxes"],
            "at seconds that are no keyframe, left out",
        ),
        (
            summary.detections_repeated,
            ["detector row", "detector rows"],
            "repeating another (the same box, second, label and score), counted once",
        ),
        (
            summary.exclusions_off_keyframes,
            ["exclusion", "exclusions"],
            "at seconds that are no keyframe, left out",
        ),
        (
            summary.missing_videos.len() as u64,
            ["video", "videos"],
            "not in the folder",
        ),
    ];
    for (count, [one, many], what) in left_out.into_iter().filter(|(count, ..)| *count > 0) {
        lines.push(format!("{} {what}", counted(count, one, many)));
    }
    if let Some(test) = summary.splits.get(TEST_SPLIT) {
        lines.push(format!(
            "test: {} to predict on, at the {} the detections box someone at",
            counted(test.len() as u64, "video", "videos"),
            counted(summary.test_keyframes, "keyframe", "keyframes")
        ));
    }
    for (file, parts) in &summary.parts {
        lines.push(format!(
            "{file}: annotated over more than AVA's 897 keyframe seconds, so cut into {} parts on clocks of their own: {}",
            parts.len(),
            parts.join(", ")
        ));
    }
    if !summary.splits.contains_key("val") && pipeline.written {
        lines.push(
            "no val split (one video, or --val-fraction 0): the pipeline trains its whole schedule without validating, and scores nothing".to_string(),
        );
    }
    let whose = match pipeline.written {
        true => "every stage after the import, yours to edit",
        false => "yours, kept as it is",
    };
    let pipeline = std::path::absolute(&pipeline.path).unwrap_or(pipeline.path.clone());
    let manifest = std::path::absolute(&summary.manifest).unwrap_or(summary.manifest.clone());
    lines.push(format!(
        "dataset: {}\npipeline: {} ({whose})\nnext: avaprep --data-dir work run {}",
        manifest.display(),
        pipeline.display(),
        avaprep_shell::shell_word(&pipeline)
    ));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::ImportArgs;

    #[derive(Debug, Parser)]
    struct Command {
        #[command(flatten)]
        import: ImportArgs,
    }

    /// YouTube's ids, as AVA's videos have them, may begin with `-`: they were taken for flags.
    #[test]
    fn a_video_id_may_begin_with_a_hyphen() {
        let parsed = Command::try_parse_from([
            "import",
            "via.json",
            "--videos",
            "v",
            "--out",
            "o",
            "--val",
            "-sfq0ssU_na,b",
            "--test",
            "-x",
            "--detections",
            "d.csv",
        ])
        .unwrap();
        assert_eq!(parsed.import.val, ["-sfq0ssU_na", "b"]);
        assert_eq!(parsed.import.test, ["-x"]);
        assert_eq!(parsed.import.exports.len(), 1);
    }
}
