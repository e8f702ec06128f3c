//! The page: plain HTML and CSS, no scripts, images by relative path.

use std::fmt::Write;

use super::dataset::DatasetStats;
use super::draw::class_colour;
use super::gallery::{GalleryEntry, ShownFrame};
use super::run::RunStats;
use crate::markup::escape;
use crate::progress::{counted, human_bytes};
use crate::records::VideoPlan;

/// The images' folder, beside the page.
pub const IMAGES: &str = "images";

const STYLE: &str = "
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { padding: .2em .7em; border-bottom: 1px solid #e4e4e4; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.bar { display: inline-block; height: .8em; margin-right: .4em; vertical-align: middle; }
.passed { color: #1a7f37; } .failed { color: #c62828; font-weight: bold; } .skipped { color: #777; }
.gallery figure { margin: 1.5em 0; padding: .6em; border: 1px solid #ddd; }
.frames { display: flex; gap: .6em; align-items: flex-start; }
.frames div { flex: 0 1 36%; }
.frames div.clip { flex: 0 1 13%; }
.frames img { width: 100%; display: block; }
.small { font-size: .85em; color: #555; }
.curves { max-width: 100%; }
";

/// `avaprep`: the command as its hints name it for this data directory (`avaprep --data-dir D`).
pub fn render(
    stats: &DatasetStats,
    run: Option<&RunStats>,
    gallery: &[GalleryEntry],
    avaprep: &str,
) -> String {
    let mut html = String::new();
    html.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"generator\" content=\"avaprep report\">\n");
    html.push_str("<title>avaprep report</title>\n<style>");
    html.push_str(STYLE);
    html.push_str("</style>\n</head>\n<body>\n<h1>avaprep report</h1>\n");
    dataset_section(&mut html, stats);
    classes_section(&mut html, stats);
    validation_section(&mut html, stats, avaprep);
    dropped_section(&mut html, stats);
    if let Some(run) = run {
        run_section(&mut html, run, &stats.plan, avaprep);
    }
    gallery_section(&mut html, gallery, run, &stats.plan);
    html.push_str("</body>\n</html>\n");
    html
}

fn dataset_section(html: &mut String, stats: &DatasetStats) {
    html.push_str("<h2 id=\"dataset\">Dataset</h2>\n<table>\n<tr><th>split</th><th>videos planned</th><th>with frames</th><th>keyframes</th><th>ground-truth boxes</th></tr>\n");
    for split in &stats.splits {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(&split.name),
            split.videos,
            split.extracted,
            split.keyframes,
            split.boxes
        );
    }
    html.push_str("</table>\n<table>\n");
    let fps = stats.fps.map_or("?".into(), |fps| format!("{fps:.3}"));
    let sizes: Vec<String> = stats
        .frame_sizes
        .iter()
        .map(|(w, h)| format!("{w}x{h}"))
        .collect();
    let size = sizes.join(", ");
    let per_frame = stats.frame_bytes / stats.frames.max(1);
    let ratio = stats.native_frames as f64 / stats.frames.max(1) as f64;
    let mut rows = vec![
        (
            "frames extracted",
            format!("{} at {fps} fps, {size}", stats.frames),
        ),
        (
            "disk used by frames",
            format!(
                "{} ({} a frame)",
                human_bytes(stats.frame_bytes),
                human_bytes(per_frame)
            ),
        ),
        (
            "30 fps frames of the same segments",
            format!(
                "{} frames, about {} at this size: {ratio:.1}x the frames and disk",
                stats.native_frames,
                human_bytes(stats.native_frames * per_frame)
            ),
        ),
        (
            "segment and keyframes",
            format!(
                "{:.0}-{:.0} s, keyframes {}-{}",
                stats.plan.segment[0],
                stats.plan.segment[1],
                stats.plan.keyframes[0],
                stats.plan.keyframes[1]
            ),
        ),
    ];
    if stats.plan.own_clock {
        rows.push((
            "your videos' clock",
            "the videos' own, moved onto AVA's (one shift where it fits, a video's own where not, long files cut into parts): the gallery names each keyframe's second in its file too".into(),
        ));
    }
    if stats.plan.ground_truth_proposals {
        rows.push((
            "proposals",
            crate::stages::eval::GROUND_TRUTH_PROPOSALS.to_string(),
        ));
    }
    for (name, value) in rows {
        let _ = writeln!(html, "<tr><th>{name}</th><td>{}</td></tr>", escape(&value));
    }
    html.push_str("</table>\n");
}

fn classes_section(html: &mut String, stats: &DatasetStats) {
    let splits: Vec<&str> = stats.splits.iter().map(|s| s.name.as_str()).collect();
    let max = stats
        .classes
        .iter()
        .flat_map(|class| class.boxes.values().copied())
        .max()
        .unwrap_or(0)
        .max(1);
    html.push_str("<h2 id=\"classes\">Boxes per class</h2>\n<table class=\"classes\">\n<tr><th>id</th><th>action</th>");
    for split in &splits {
        let _ = write!(html, "<th>{}</th>", escape(split));
    }
    html.push_str("</tr>\n");
    for class in stats.classes.iter().filter(|class| !class.boxes.is_empty()) {
        let _ = write!(
            html,
            "<tr><td class=\"n\">{}</td><td>{}</td>",
            class.id,
            escape(&class.name)
        );
        for (i, split) in splits.iter().enumerate() {
            let count = class.boxes.get(*split).copied().unwrap_or(0);
            let width = 300 * count / max;
            let colour = class_colour(i as u16).0;
            let _ = write!(
                html,
                "<td><span class=\"bar\" style=\"width:{width}px;background:rgb({},{},{})\"></span>{count}</td>",
                colour[0], colour[1], colour[2]
            );
        }
        html.push_str("</tr>\n");
    }
    let empty = stats
        .classes
        .iter()
        .filter(|class| class.boxes.is_empty())
        .count();
    html.push_str("</table>\n");
    let _ = match empty {
        0 => Ok(()),
        1 => writeln!(
            html,
            "<p class=\"small\">1 class of the label map has no box in these videos.</p>"
        ),
        _ => writeln!(
            html,
            "<p class=\"small\">{empty} classes of the label map have no box in these videos.</p>"
        ),
    };
}

fn validation_section(html: &mut String, stats: &DatasetStats, avaprep: &str) {
    html.push_str("<h2 id=\"validation\">Validation</h2>\n");
    let Some(validation) = &stats.validation else {
        let _ = writeln!(
            html,
            "<p>Not validated yet: run <code>{} validate</code>.</p>",
            escape(avaprep)
        );
        return;
    };
    let verdict = match validation.passed {
        true => "<p class=\"passed\">Every check passed.</p>",
        false => "<p class=\"failed\">Some checks failed.</p>",
    };
    if let Some(changed) = &stats.changed_since_validation {
        let _ = writeln!(
            html,
            "<p class=\"failed\">Out of date: {} changed after this validation, which may no longer hold; run <code>{} validate</code> again.</p>",
            escape(changed),
            escape(avaprep)
        );
    }
    html.push_str(verdict);
    html.push_str("\n<table>\n<tr><th>check</th><th>status</th><th>checked</th><th>failed</th><th>rule</th></tr>\n");
    for check in &validation.checks {
        let example = check.examples.first().map_or(String::new(), |e| {
            format!("<br><span class=\"small\">{}</span>", escape(e))
        });
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}{example}</td></tr>",
            escape(&check.name),
            check.status.word(),
            check.status.word(),
            check.checked,
            check.failed,
            escape(&check.rule)
        );
    }
    html.push_str("</table>\n");
}

fn dropped_section(html: &mut String, stats: &DatasetStats) {
    html.push_str("<h2 id=\"dropped\">Dropped videos</h2>\n");
    if stats.dropped.is_empty() {
        html.push_str("<p>None: every planned video has its frames.</p>\n");
        return;
    }
    html.push_str("<table>\n<tr><th>video</th><th>split</th><th>reason</th></tr>\n");
    for dropped in &stats.dropped {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&dropped.video),
            escape(&dropped.split),
            escape(&dropped.reason)
        );
    }
    html.push_str("</table>\n");
}

fn run_section(html: &mut String, run: &RunStats, plan: &VideoPlan, avaprep: &str) {
    html.push_str("<h2 id=\"run\">Training run</h2>\n");
    if plan.ground_truth_proposals {
        let _ = writeln!(
            html,
            "<p class=\"proposals\">Every score here: {}.</p>",
            escape(crate::stages::eval::GROUND_TRUTH_PROPOSALS)
        );
    }
    let _ = writeln!(
        html,
        "<p class=\"small\">{}</p>",
        escape(&run.dir.display().to_string())
    );
    if let Some(summary) = &run.summary {
        let best = summary.best.map_or("no evaluation".into(), |(map, epoch)| {
            format!("val mAP {map:.4} at epoch {epoch}")
        });
        let _ = writeln!(
            html,
            "<p>Stopped: {}. {} epochs, {} steps; kept weights: {}.</p>",
            escape(&summary.stop),
            summary.epochs_run,
            summary.steps,
            escape(&best)
        );
    }
    if run.has_curves() {
        let _ = writeln!(
            html,
            "<img class=\"curves\" src=\"{IMAGES}/curves.png\" alt=\"training curves: loss, learning rate, val mAP\">"
        );
    }
    let Some(evaluation) = &run.evaluation else {
        let _ = writeln!(
            html,
            "<p>No per-class evaluation in this run yet: training writes one when it ends \
             (<code>{avaprep} train --resume --run-dir {}</code> finishes a stopped run), and so \
             does a pipeline's eval stage (<code>{avaprep} run PIPELINE</code>).</p>",
            escape(&crate::progress::shell_word(&run.dir)),
            avaprep = escape(avaprep)
        );
        return;
    };
    let map = evaluation
        .mean_ap
        .map_or("n/a".into(), |m| format!("{m:.4}"));
    let _ = writeln!(html, "<h3>Per-class AP (val), frame-mAP@0.5 {map}</h3>");
    html.push_str("<table class=\"ap\">\n<tr><th>id</th><th>action</th><th>AP</th><th>ground truth</th><th>detections</th><th>true positives</th></tr>\n");
    for class in evaluation
        .classes
        .iter()
        .filter(|class| class.ground_truth > 0)
    {
        let ap = class.ap.map_or("n/a".into(), |ap| format!("{ap:.4}"));
        let _ = writeln!(
            html,
            "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{ap}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            class.id,
            escape(&class.name),
            class.ground_truth,
            class.detections,
            class.true_positives
        );
    }
    html.push_str("</table>\n");
}

fn frame_cell(html: &mut String, title: &str, frame: &ShownFrame, class: &str) {
    let cell = if class == "truth" { "frame" } else { "clip" };
    let _ = writeln!(
        html,
        "<div class=\"{cell}\"><img class=\"{class}\" src=\"{}\" alt=\"{title}\"><span class=\"small\">{title}: frame {} at {:.2} s</span></div>",
        frame.image, frame.number, frame.seconds
    );
}

fn gallery_section(
    html: &mut String,
    gallery: &[GalleryEntry],
    run: Option<&RunStats>,
    plan: &VideoPlan,
) {
    html.push_str("<h2 id=\"gallery\">Keyframes</h2>\n");
    let _ = writeln!(
        html,
        "<p class=\"small\">Each row: the extracted frame nearest the keyframe with its ground-truth boxes (white), the first and last frame of the clip built around it{}.</p>",
        match run {
            Some(run) => format!(
                ", and the run's detections scoring at least {:.2}, coloured by class",
                run.min_score
            ),
            None => String::new(),
        }
    );
    html.push_str("<div class=\"gallery\">\n");
    for entry in gallery {
        let _ = writeln!(
            html,
            "<figure class=\"keyframe\" data-video=\"{}\" data-second=\"{}\" data-split=\"{}\">",
            entry.key.video,
            entry.key.second,
            escape(&entry.split)
        );
        let actions: Vec<String> = entry.truth.iter().map(|names| names.join(", ")).collect();
        // Videos on their own clock are named by the file's seconds too.
        let own = plan
            .own_second(&entry.key.video, f64::from(entry.key.second))
            .map_or(String::new(), |(file, own)| match file == entry.key.video {
                true => format!(" (the file's {own} s)"),
                false => format!(" ({file}'s {own} s)"),
            });
        let without_truth = plan
            .files
            .splits
            .get(&entry.split)
            .is_some_and(|files| files.ground_truth.is_none());
        let labels = match (without_truth, entry.truth.len()) {
            (true, _) => "no ground truth (a video to predict on)".to_string(),
            (false, 0) => "no box".to_string(),
            (false, count) => format!(
                "{}; {}",
                counted(count as u64, "box", "boxes"),
                escape(&actions.join("; "))
            ),
        };
        let _ = writeln!(
            html,
            "<figcaption>{} second {}{own} ({}): {labels}</figcaption>\n<div class=\"frames\">",
            entry.key.video,
            entry.key.second,
            escape(&entry.split)
        );
        frame_cell(html, "ground truth", &entry.keyframe, "truth");
        if let Some((image, count)) = &entry.detections {
            let _ = writeln!(
                html,
                "<div class=\"frame\"><img class=\"detections\" src=\"{image}\" alt=\"detections\"><span class=\"small\">the run's detections: {count}</span></div>"
            );
        }
        frame_cell(html, "clip start", &entry.first, "first");
        frame_cell(html, "clip end", &entry.last, "last");
        html.push_str("</div>\n</figure>\n");
    }
    html.push_str("</div>\n");
}
