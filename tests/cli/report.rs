//! `avaprep report` on the synthetic dataset after a short pipeline run: the page opens in
//! headless Chromium with every image and no error, and each ground-truth box drawn in the
//! gallery lies on its actor (the synthetic actors are the only coloured pixels of a frame).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use avaprep_testbed::scratch;
use avaprep_testbed::serve::{self, ServeConfig};
use image::RgbImage;

use crate::support::{avaprep, repo_root, stderr, stdout};

/// A data directory the pipeline ran on (one epoch) and its report, shared by the tests here.
fn reported() -> &'static Path {
    static DATA: OnceLock<PathBuf> = OnceLock::new();
    DATA.get_or_init(|| {
        let server = server();
        let data = scratch::process_folder("reported").unwrap();
        let ran = crate::pipeline::run(&data, server, 1, &[]);
        assert!(ran.status.success(), "{}", stderr(&ran));
        let report = avaprep(&data).args(["--json", "report"]).output().unwrap();
        assert!(report.status.success(), "{}", stderr(&report));
        assert!(
            stdout(&report).contains("\"with_run\":true"),
            "{}",
            stdout(&report)
        );
        data
    })
}

/// The mirror's server, one for the tests here (the pipeline's fingerprint holds its URL).
fn server() -> &'static serve::ServerHandle {
    static SERVER: OnceLock<serve::ServerHandle> = OnceLock::new();
    SERVER.get_or_init(|| serve::start(ServeConfig::new(crate::support::mirror())).unwrap())
}

/// What `tests/support/browser_check.py` saw of a page.
fn open_in_chromium(page: &Path, screenshot: &Path) -> serde_json::Value {
    let script = repo_root().join("tests/support/browser_check.py");
    let output = std::process::Command::new(repo_root().join(".venv/bin/python"))
        .arg(&script)
        .arg(page)
        .arg(screenshot)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_report_loads_every_image_in_chromium_without_errors() {
    let data = reported();
    let page = data.join("report/index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let shots = tempfile::tempdir().unwrap();
    let seen = open_in_chromium(&page, &shots.path().join("report.png"));
    let images = seen["images"].as_array().unwrap();
    assert_eq!(images.len(), html.matches("<img ").count(), "{seen}");
    let figures = html.matches("<figure class=\"keyframe\"").count();
    assert!(figures >= 4, "{figures} keyframes");
    // Per keyframe: truth, detections, clip start and end; and the curves.
    assert_eq!(images.len(), 4 * figures + 1, "{seen}");
    assert_eq!(strings(&seen["broken"]), Vec::<String>::new(), "{seen}");
    assert_eq!(strings(&seen["errors"]), Vec::<String>::new(), "{seen}");
    let files = std::fs::read_dir(data.join("report/images"))
        .unwrap()
        .count();
    assert_eq!(
        files,
        images.len(),
        "the images folder holds what the page shows"
    );
    let shot = image::open(shots.path().join("report.png"))
        .unwrap()
        .into_rgb8();
    assert_eq!(shot.width(), 1280);
    assert!(shot.height() > 2000, "a page of {} px", shot.height());
    let colours: std::collections::HashSet<[u8; 3]> = shot.pixels().map(|p| p.0).collect();
    assert!(
        colours.len() > 1000,
        "{} colours: the frames are drawn",
        colours.len()
    );

    // The same page with one image gone: the check names it.
    let copy = tempfile::tempdir().unwrap();
    let images_dir = copy.path().join("images");
    std::fs::create_dir(&images_dir).unwrap();
    for entry in std::fs::read_dir(data.join("report/images")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), images_dir.join(entry.file_name())).unwrap();
    }
    std::fs::copy(&page, copy.path().join("index.html")).unwrap();
    let gone = images[1]["src"].as_str().unwrap();
    std::fs::remove_file(copy.path().join(gone)).unwrap();
    let seen = open_in_chromium(
        &copy.path().join("index.html"),
        &shots.path().join("gone.png"),
    );
    assert_eq!(strings(&seen["broken"]), vec![gone.to_string()], "{seen}");
    assert!(!strings(&seen["errors"]).is_empty(), "{seen}");
}

/// A keyframe the gallery shows, and its ground-truth image.
struct Figure {
    video: String,
    second: u32,
    truth_image: PathBuf,
}

fn attribute(tag: &str, name: &str) -> String {
    let start = tag.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
    tag[start..].split('"').next().unwrap().to_string()
}

fn figures(report: &Path) -> Vec<Figure> {
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    html.split("<figure class=\"keyframe\"")
        .skip(1)
        .map(|figure| {
            let truth = figure.split("<img class=\"truth\"").nth(1).unwrap();
            Figure {
                video: attribute(figure, "data-video"),
                second: attribute(figure, "data-second").parse().unwrap(),
                truth_image: report.join(attribute(truth, "src")),
            }
        })
        .collect()
}

/// The boxes of a keyframe in the annotation file, normalised, one per person.
fn annotated_boxes(data: &Path, video: &str, second: u32) -> Vec<[f64; 4]> {
    let mut boxes: Vec<[f64; 4]> = Vec::new();
    for split in ["train", "val"] {
        let path = data.join(format!("annotations/ava_{split}_v2.2.csv"));
        for line in std::fs::read_to_string(path).unwrap().lines() {
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() < 7 || fields[0] != video || fields[1].parse::<u32>() != Ok(second) {
                continue;
            }
            let b: Vec<f64> = fields[2..6].iter().map(|v| v.parse().unwrap()).collect();
            let b = [b[0], b[1], b[2], b[3]];
            if !boxes.contains(&b) {
                boxes.push(b);
            }
        }
    }
    boxes
}

fn chroma(p: &image::Rgb<u8>) -> (f64, f64) {
    let [r, g, b] = p.0.map(f64::from);
    (
        -0.1687 * r - 0.3313 * g + 0.5 * b + 128.0,
        0.5 * r - 0.4187 * g - 0.0813 * b + 128.0,
    )
}

type Rect = [u32; 4];

/// Where the actor under `rect` is, as the frame shows it: of the pixels around the box that
/// have the chroma most common inside it, the share that lies inside the box, and the share of
/// the box they fill.
fn actor_under(image: &RgbImage, rect: Rect) -> Option<(f64, f64)> {
    // An actor has one hue; its light and dark stripes differ in saturation once in RGB.
    let hue = |p: &image::Rgb<u8>| {
        let (u, v) = chroma(p);
        ((u - 128.0).hypot(v - 128.0) > 25.0).then(|| (v - 128.0).atan2(u - 128.0))
    };
    let mut hues: Vec<f64> = (rect[1] + 4..rect[3].saturating_sub(4))
        .flat_map(|y| (rect[0] + 4..rect[2].saturating_sub(4)).map(move |x| (x, y)))
        .filter_map(|(x, y)| hue(image.get_pixel(x, y)))
        .collect();
    if hues.len() < 20 {
        return None;
    }
    hues.sort_by(f64::total_cmp);
    let actor_hue = hues[hues.len() / 2];
    let same_hue = |p: &image::Rgb<u8>| {
        hue(p).is_some_and(|h| {
            let d = (h - actor_hue).abs();
            d.min(std::f64::consts::TAU - d) < 0.4
        })
    };
    let (w, h) = (rect[2] - rect[0], rect[3] - rect[1]);
    let (mut inside, mut outside, mut interior_hits) = (0u32, 0u32, 0u32);
    for y in rect[1].saturating_sub(h / 2)..(rect[3] + h / 2).min(image.height()) {
        for x in rect[0].saturating_sub(w / 2)..(rect[2] + w / 2).min(image.width()) {
            if !same_hue(image.get_pixel(x, y)) {
                continue;
            }
            let within = (rect[0]..rect[2]).contains(&x) && (rect[1]..rect[3]).contains(&y);
            // JPEG's half-resolution chroma bleeds a pixel or two past an edge.
            let (dx, dy) = (
                rect[0].saturating_sub(x).max(x.saturating_sub(rect[2] - 1)),
                rect[1].saturating_sub(y).max(y.saturating_sub(rect[3] - 1)),
            );
            // The 2-pixel outline covers the box's edge: the fill is of what lies inside it.
            let interior =
                (rect[0] + 2..rect[2] - 2).contains(&x) && (rect[1] + 2..rect[3] - 2).contains(&y);
            interior_hits += u32::from(interior);
            if within {
                inside += 1;
            } else if dx.max(dy) > 3 {
                outside += 1;
            }
        }
    }
    let total = f64::from(inside + outside);
    let interior_area = f64::from((w - 4) * (h - 4));
    Some((
        f64::from(inside) / total,
        f64::from(interior_hits) / interior_area,
    ))
}

/// How much of each edge of `rect` is drawn white (within a pixel of where it belongs).
fn outline_drawn(image: &RgbImage, rect: Rect) -> f64 {
    let white = |x: u32, y: u32| {
        let near = |c: u32, lo: u32, hi: u32| {
            [c.saturating_sub(1), c, (c + 1).min(hi - 1)]
                .into_iter()
                .filter(move |&c| c >= lo)
        };
        near(x, 0, image.width()).any(|x| {
            near(y, 0, image.height()).any(|y| image.get_pixel(x, y).0.iter().all(|&c| c >= 240))
        })
    };
    let [x0, y0, x1, y1] = rect;
    let edge: Vec<(u32, u32)> = (x0..x1)
        .flat_map(|x| [(x, y0), (x, y1 - 1)])
        .chain((y0..y1).flat_map(|y| [(x0, y), (x1 - 1, y)]))
        .collect();
    edge.iter().filter(|&&(x, y)| white(x, y)).count() as f64 / edge.len() as f64
}

#[test]
fn each_ground_truth_box_in_the_gallery_lies_on_its_actor() {
    let data = reported();
    let figures = figures(&data.join("report"));
    assert!(figures.len() >= 4);
    let mut checked = 0;
    for figure in &figures {
        let image = image::open(&figure.truth_image).unwrap().into_rgb8();
        let (w, h) = (f64::from(image.width()), f64::from(image.height()));
        let boxes = annotated_boxes(data, &figure.video, figure.second);
        assert!(!boxes.is_empty(), "{} {}", figure.video, figure.second);
        for b in boxes {
            let rect = [
                (b[0] * w).round() as u32,
                (b[1] * h).round() as u32,
                ((b[2] * w).round() as u32).min(image.width()),
                ((b[3] * h).round() as u32).min(image.height()),
            ];
            let at = format!(
                "{} second {} box {b:?} = {rect:?}",
                figure.video, figure.second
            );
            let drawn = outline_drawn(&image, rect);
            assert!(drawn > 0.75, "{at}: {drawn:.2} of its outline is drawn");
            if rect[2] - rect[0] < 12 || rect[3] - rect[1] < 12 {
                continue; // an actor at the frame's edge: too few pixels to measure
            }
            let Some((within, fill)) = actor_under(&image, rect) else {
                panic!("{at}: no actor under the box");
            };
            // A box a frame late or early, or drawn off its actor, leaves part of the actor out.
            assert!(
                within > 0.9,
                "{at}: {within:.2} of the actor's pixels are inside the box"
            );
            assert!(fill > 0.4, "{at}: the actor fills {fill:.2} of the box");
            checked += 1;
        }
    }
    assert!(checked >= 8, "{checked} boxes measured");
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `--out` a folder that holds other files: the page goes beside them; the next report removes
/// only the pictures an earlier report wrote and no longer shows; an index.html no report wrote
/// is a refusal naming the folder (exit 2), and nothing in that folder changes.
/// A keyframe named that the data does not have is a wrong flag, exit 2 (it exited 1), and no
/// page is written. Pictures drawn before it are taken away: they once stayed, unrecorded, and
/// the next report into the folder refused them as another's.
#[test]
fn a_named_keyframe_the_data_lacks_is_a_usage_error() {
    let data = reported();
    let sampled = tempfile::tempdir().unwrap();
    let report = |out: &Path, keyframes: &[String]| {
        let mut command = avaprep(data);
        command.arg("report");
        for keyframe in keyframes {
            command.args(["--keyframe", keyframe]);
        }
        command.arg("--out").arg(out).output().unwrap()
    };
    let first = report(sampled.path(), &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let shown = &figures(sampled.path())[0];
    let good = format!("{},{}", shown.video, shown.second);
    let video = &shown.video;
    let out = tempfile::tempdir().unwrap();
    let refused = report(out.path(), &[good.clone(), format!("{video},3")]);
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{message}");
    assert!(
        message.contains(&format!(
            "--keyframe: keyframe {video},0003: no extracted frame"
        )),
        "{message}"
    );
    assert!(!out.path().join("index.html").exists());
    assert_eq!(names_in(&out.path().join("images")), Vec::<String>::new());
    let again = report(out.path(), &[good]);
    assert!(again.status.success(), "{}", stderr(&again));
}

#[test]
fn a_report_in_a_shared_folder_removes_only_its_own_files() {
    let data = reported();
    let shared = tempfile::tempdir().unwrap();
    let out = shared.path();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    std::fs::create_dir_all(out.join("images/album")).unwrap();
    std::fs::write(out.join("images/holiday.png"), "mine").unwrap();
    let report = |sample: &str| {
        avaprep(data)
            .args(["report", "--sample", sample, "--out"])
            .arg(out)
            .output()
            .unwrap()
    };
    let first = report("4");
    assert!(first.status.success(), "{}", stderr(&first));
    let with_four = names_in(&out.join("images"));
    assert!(with_four.len() > 10, "{with_four:?}");
    let second = report("1");
    assert!(second.status.success(), "{}", stderr(&second));
    let with_one = names_in(&out.join("images"));
    assert!(with_one.len() < with_four.len() - 8, "{with_one:?}");
    for kept in ["album", "holiday.png"] {
        assert!(
            with_one.contains(&kept.to_string()),
            "{kept} removed: {with_one:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    for name in &with_one {
        let shown = page.contains(&format!("\"images/{name}\""));
        assert_eq!(
            shown,
            !["album", "holiday.png"].contains(&name.as_str()),
            "{name}"
        );
    }

    // Without its record (deleted, or a report of a version that kept none), the report's own
    // are its page and the pictures the page shows: a note beside them stays.
    std::fs::remove_file(out.join(".avaprep-report.json")).unwrap();
    std::fs::write(out.join("images/notes.md"), "mine").unwrap();
    let third = report("4");
    assert!(third.status.success(), "{}", stderr(&third));
    let with_four_again = names_in(&out.join("images"));
    for kept in ["album", "holiday.png", "notes.md"] {
        assert!(
            with_four_again.contains(&kept.to_string()),
            "{kept} removed: {with_four_again:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(out.join("images/notes.md")).unwrap(),
        "mine"
    );

    let foreign = tempfile::tempdir().unwrap();
    std::fs::write(foreign.path().join("index.html"), "<html>my page</html>").unwrap();
    let refused = avaprep(data)
        .args(["report", "--out"])
        .arg(foreign.path())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(
        message.contains(&foreign.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("did not write"), "{message}");
    assert_eq!(names_in(foreign.path()), ["index.html"]);
    assert_eq!(
        std::fs::read_to_string(foreign.path().join("index.html")).unwrap(),
        "<html>my page</html>"
    );

    // A picture of the user's under a name the report would write: refused, kept.
    let pictures = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(pictures.path().join("images")).unwrap();
    std::fs::write(pictures.path().join("images/curves.png"), "mine").unwrap();
    let refused = avaprep(data)
        .args(["report", "--out"])
        .arg(pictures.path())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("images/curves.png"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        std::fs::read_to_string(pictures.path().join("images/curves.png")).unwrap(),
        "mine"
    );
    assert_eq!(names_in(&pictures.path().join("images")), ["curves.png"]);

    let not_a_score = avaprep(data)
        .args(["report", "--min-score", "NaN", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert_eq!(
        not_a_score.status.code(),
        Some(2),
        "{}",
        stderr(&not_a_score)
    );
}

/// Evaluating the train split too: each split's closing line shows its own mAP, and only the
/// split training evaluated (val) shows the figure from training beside it.
#[test]
fn the_closing_lines_put_the_training_figure_beside_its_own_split_only() {
    let data = reported();
    let output = crate::pipeline::command_for_people(
        data,
        server(),
        1,
        &["--set", "eval.splits=[\"train\", \"val\"]"],
    )
    .output()
    .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let line = |split: &str| {
        text.lines()
            .find(|line| line.starts_with(&format!("{split} mAP ")))
            .unwrap_or_else(|| panic!("no {split} mAP line in {text}"))
            .to_string()
    };
    assert!(
        !line("train").contains("during training"),
        "{}",
        line("train")
    );
    assert!(
        line("val").contains("when evaluated during training"),
        "{}",
        line("val")
    );
    // The train stage's lines come first, then each split's detections, score and table.
    let position = |start: &str| {
        text.lines()
            .position(|line| line.starts_with(start))
            .unwrap_or_else(|| panic!("no line starting {start:?} in {text}"))
    };
    let order = [
        "model ",
        "stopped ",
        "train dets ",
        "val dets ",
        "train mAP ",
        "val mAP ",
    ]
    .map(position);
    assert!(order.is_sorted(), "{order:?}: {text}");
    assert_eq!(text.matches("frame-mAP@0.5").count(), 2, "{text}");

    // A run through training only (up to date: nothing is redone) ends with training's lines and
    // no score.
    let through_train = crate::pipeline::command_for_people(
        data,
        server(),
        1,
        &[
            "--set",
            "eval.splits=[\"train\", \"val\"]",
            "--until",
            "train",
        ],
    )
    .output()
    .unwrap();
    assert!(through_train.status.success(), "{}", stderr(&through_train));
    let text = stdout(&through_train);
    assert!(
        text.lines().any(|line| line.starts_with("stopped ")),
        "{text}"
    );
    assert!(
        !text.lines().any(|line| line.contains(" dets ")
            || (line.contains(" mAP ") && !line.starts_with("stopped "))),
        "{text}"
    );
    assert!(!text.contains("frame-mAP@"), "{text}");
}

/// The first Ctrl-C stops a report at the next keyframe, with nothing of the page written.
/// Before, it was ignored until every picture was drawn.
#[test]
fn a_cancelled_report_writes_no_page() {
    let data = reported();
    let out = tempfile::tempdir().unwrap();
    let request = avaprep::report::ReportRequest {
        data_dir: data.to_path_buf(),
        run: None,
        out: out.path().join("page"),
        keyframes: Vec::new(),
        sample: 4,
        min_score: 0.0,
    };
    let cancelled = std::sync::atomic::AtomicBool::new(true);
    let error = avaprep::report::write_report(&request, &cancelled).unwrap_err();
    assert!(error.to_string().contains("interrupted"), "{error}");
    assert!(!out.path().join("page/index.html").exists());
}

/// A copy of [`reported`] (times kept), in `data/` of the folder returned, for a test that
/// changes it or holds it.
fn copy_of_reported() -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(reported())
        .arg(copy.path().join("data"))
        .status()
        .unwrap();
    assert!(copied.success());
    copy
}

/// A frame rewritten in place after the validation (same name, its folder's time unchanged)
/// marks the page's validation out of date, naming the frame: the page said "Every check
/// passed" of a frame the checks never saw.
#[test]
fn a_frame_rewritten_after_validation_marks_the_validation_out_of_date() {
    let copy = copy_of_reported();
    let data = &copy.path().join("data");
    let out = copy.path().join("page");
    let page = |name: &str| {
        let report = avaprep(data)
            .args(["report", "--out"])
            .arg(out.join(name))
            .output()
            .unwrap();
        assert!(report.status.success(), "{}", stderr(&report));
        std::fs::read_to_string(out.join(name).join("index.html")).unwrap()
    };
    assert!(!page("before").contains("Out of date"));
    let video = std::fs::read_dir(data.join("frames"))
        .unwrap()
        .flatten()
        .find(|entry| {
            entry.path().is_dir() && !entry.file_name().to_string_lossy().starts_with('.')
        })
        .unwrap()
        .path();
    let frame = std::fs::read_dir(&video)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "jpg"))
        .unwrap();
    let folder_time = std::fs::metadata(&video).unwrap().modified().unwrap();
    let bytes = std::fs::read(&frame).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&frame)
        .and_then(|mut file| std::io::Write::write_all(&mut file, &bytes[..bytes.len() / 2]))
        .unwrap();
    assert_eq!(
        std::fs::metadata(&video).unwrap().modified().unwrap(),
        folder_time
    );
    let after = page("after");
    let named = frame.strip_prefix(data).unwrap().display().to_string();
    assert!(
        after.contains(&format!(
            "Out of date: {named} changed after this validation"
        )),
        "no out-of-date note naming {named}"
    );
}

/// The weights a run wrote record their network: `predict` builds it from them, without being
/// told the preset that trained them. Before, it built the default preset's R50 and failed with
/// `no tensor s2.pathway0_res2...`. Its other settings (crop, clip, thresholds) are the run's
/// `config.toml` beside the weights: its rows are the eval stage's, byte for byte (with the
/// default recipe's, every score differed). A data directory left unnamed gets the one the
/// weights are a run of.
#[test]
fn predict_builds_the_network_the_weights_record() {
    // A copy: predict holds its data directory, which the other tests here run pipelines in.
    let copy = copy_of_reported();
    let data = &copy.path().join("data");
    let trained: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("work/train.json")).unwrap()).unwrap();
    let weights = data.join(trained["weights"].as_str().unwrap());
    let out = tempfile::tempdir().unwrap();
    let predicted = avaprep(data)
        .args(["predict", "--split", "val", "--weights"])
        .arg(&weights)
        .arg("--out")
        .arg(out.path().join("detections.csv"))
        .output()
        .unwrap();
    assert!(predicted.status.success(), "{}", stderr(&predicted));
    let said = stdout(&predicted) + &stderr(&predicted);
    assert!(said.contains("config.toml, the run's own"), "{said}");
    let rows = std::fs::read_to_string(out.path().join("detections.csv")).unwrap();
    assert!(rows.lines().count() > 10, "{rows}");
    let evaluated: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("work/eval.json")).unwrap()).unwrap();
    let stage_rows = data.join(evaluated["splits"][0]["detections"].as_str().unwrap());
    assert!(
        rows == std::fs::read_to_string(stage_rows).unwrap(),
        "predict's rows differ from the eval stage's"
    );

    let elsewhere = tempfile::tempdir().unwrap();
    let unnamed = avaprep(elsewhere.path())
        .args(["predict", "--split", "val", "--weights"])
        .arg(&weights)
        .arg("--out")
        .arg(out.path().join("nowhere.csv"))
        .output()
        .unwrap();
    assert_eq!(unnamed.status.code(), Some(2), "{}", stderr(&unnamed));
    let hint = format!("`avaprep --data-dir {} predict", data.display());
    assert!(stderr(&unnamed).contains(&hint), "{}", stderr(&unnamed));
}
