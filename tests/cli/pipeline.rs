//! The whole pipeline in one `run`, shortened (the test mirror, a few epochs of the tiny
//! SlowFast): every stage's outputs, a re-run that redoes nothing, a one-parameter change that
//! redoes exactly the stages depending on it, a failed validation that stops the run before
//! training, and a kill during training that the next run continues from its last checkpoint.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use avaprep_testbed::serve::{self, Fault, FaultPlan, FaultRule, ServeConfig, ServerHandle};

use crate::extract::planned_videos;
use crate::nothing_lost::completed;
use crate::support::{demo_run, mirror, rewrite_keeping_time, run_named, stderr, stdout};

const STAGES: [&str; 8] = [
    "fetch-annotations",
    "parse",
    "fetch-videos",
    "extract",
    "lists",
    "validate",
    "train",
    "eval",
];

fn command(
    data: &Path,
    server: &ServerHandle,
    epochs: u32,
    extra: &[&str],
) -> std::process::Command {
    let mut command = demo_run(data);
    with_settings(&mut command, server, epochs, extra);
    command
}

/// The pipeline of [`run`], printing its closing lines for people.
pub(crate) fn command_for_people(
    data: &Path,
    server: &ServerHandle,
    epochs: u32,
    extra: &[&str],
) -> std::process::Command {
    let mut command = crate::support::demo_run_for_people(data);
    with_settings(&mut command, server, epochs, extra);
    command
}

fn with_settings(
    command: &mut std::process::Command,
    server: &ServerHandle,
    epochs: u32,
    extra: &[&str],
) {
    command
        .arg("--set")
        .arg(format!("fetch.base_url=[\"{}\"]", server.url()))
        .args(["--set", &format!("train.settings.epochs={epochs}")])
        .args(["--set", "train.settings.eval_every=1"])
        .args(["--set", "train.settings.device=\"cpu\""])
        .args(extra);
}

pub(crate) fn run(data: &Path, server: &ServerHandle, epochs: u32, extra: &[&str]) -> Output {
    command(data, server, epochs, extra).output().unwrap()
}

/// `avaprep status` of the pipeline [`run`] runs, one line per stage.
fn status_lines(data: &Path, server: &ServerHandle, epochs: u32) -> Vec<String> {
    let output = crate::support::avaprep(data)
        .args(["status", "pipelines/demo.toml"])
        .arg("--set")
        .arg(format!(
            "dataset=\"{}\"",
            crate::support::mirror().join("manifest.toml").display()
        ))
        .args(["--set", "extract.height=240"])
        .arg("--set")
        .arg(format!("fetch.base_url=[\"{}\"]", server.url()))
        .args(["--set", &format!("train.settings.epochs={epochs}")])
        .args(["--set", "train.settings.eval_every=1"])
        .args(["--set", "train.settings.device=\"cpu\""])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let lines: Vec<String> = stdout(&output).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), STAGES.len(), "{lines:?}");
    lines
}

fn json(path: &Path) -> serde_json::Value {
    let bytes = fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

/// The items each of `STAGES` completed in the run, in order.
fn assert_completed(output: &Output, expected: [u64; 8]) {
    for (stage, expected) in STAGES.iter().zip(expected) {
        assert_eq!(
            completed(output, stage),
            expected,
            "{stage}: {}",
            stdout(output)
        );
    }
}

fn stage_record(output: &Output, stage: &str) -> serde_json::Value {
    stdout(output)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|record| record["type"] == "stage" && record["stage"] == stage)
        .unwrap_or_else(|| panic!("no {stage} record in {}", stdout(output)))
}

/// Every output a stage promises is there and says what it should.
fn assert_outputs(data: &Path) -> PathBuf {
    let videos = planned_videos(data);
    assert!(videos.len() >= 3, "{videos:?}");
    for video in &videos {
        assert!(
            data.join("frame_index")
                .join(format!("{video}.csv"))
                .is_file()
        );
    }
    for file in [
        "frame_lists/train.csv",
        "frame_lists/val.csv",
        "slowfast/ava.yaml",
    ] {
        assert!(data.join(file).is_file(), "{file}");
    }
    assert_eq!(json(&data.join("slowfast/validation.json"))["passed"], true);
    let trained = json(&data.join("work/train.json"));
    let run_dir = data.join(trained["run_dir"].as_str().unwrap());
    assert!(data.join(trained["weights"].as_str().unwrap()).is_file());
    assert!(data.join(trained["curves"].as_str().unwrap()).is_file());
    assert!(
        trained["stop"].as_str().unwrap().contains("epoch"),
        "{trained}"
    );
    let evaluation = json(&data.join("work/eval.json"));
    let val = &evaluation["splits"][0];
    assert_eq!(val["split"], "val");
    let map = val["mean_ap"].as_f64().expect("a val mAP");
    assert!((0.0..=1.0).contains(&map), "{map}");
    let detections = fs::read_to_string(data.join(val["detections"].as_str().unwrap())).unwrap();
    assert!(!detections.is_empty());
    for line in detections.lines() {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), 8, "{line}");
        assert!(videos.iter().any(|video| video == fields[0]), "{line}");
    }
    let report = json(&data.join(val["report"].as_str().unwrap()));
    assert_eq!(report["mean_ap"].as_f64(), Some(map));
    // One mAP: training's evaluation of the kept weights scores the detections as the file
    // holds them, so it is the eval stage's figure for that file to the last digit.
    let trained_map = json(&run_dir.join("eval.json"))["mean_ap"].as_f64();
    assert_eq!(trained_map, Some(map));
    let summary = json(&run_dir.join("summary.json"));
    assert_eq!(summary["best_weights_map"].as_f64(), Some(map), "{summary}");
    run_dir
}

#[test]
fn the_whole_pipeline_reruns_nothing_and_redoes_exactly_what_a_change_touches() {
    // What is redone is the test, not what is learnt: one epoch a training.
    const EPOCHS: u32 = 1;
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    let first = run(data.path(), &server, EPOCHS, &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    for stage in STAGES {
        assert!(completed(&first, stage) >= 1, "{stage}: {}", stdout(&first));
    }
    let first_run_dir = assert_outputs(data.path());
    for record in ["\"type\":\"trained\"", "\"type\":\"evaluation\""] {
        assert!(stdout(&first).contains(record), "{}", stdout(&first));
    }

    let again = run(data.path(), &server, EPOCHS, &[]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_completed(&again, [0; 8]);

    // A deleted report is validated again; the same findings leave training up to date.
    fs::remove_file(data.path().join("slowfast/validation.json")).unwrap();
    let revalidated = run(data.path(), &server, EPOCHS, &[]);
    assert!(revalidated.status.success(), "{}", stderr(&revalidated));
    assert_completed(&revalidated, [0, 0, 0, 0, 0, 1, 0, 0]);

    // Lists made again with the same bytes (a deleted list, a damaged state file) change
    // nothing after them: no validation, no training; `status` calls every stage done.
    fs::remove_file(data.path().join("frame_lists/train.csv")).unwrap();
    let relisted = run(data.path(), &server, EPOCHS, &[]);
    assert!(relisted.status.success(), "{}", stderr(&relisted));
    assert_completed(&relisted, [0, 0, 0, 0, 1, 0, 0, 0]);
    fs::write(data.path().join(".avaprep/state/lists.json"), b"damaged").unwrap();
    let rebuilt = run(data.path(), &server, EPOCHS, &[]);
    assert!(rebuilt.status.success(), "{}", stderr(&rebuilt));
    assert_completed(&rebuilt, [0, 0, 0, 0, 1, 0, 0, 0]);
    for line in status_lines(data.path(), &server, EPOCHS) {
        assert!(line.contains(" done "), "{line}");
    }

    let videos = planned_videos(data.path()).len() as u64;
    let changed = run(
        data.path(),
        &server,
        EPOCHS,
        &["--set", "extract.height=180"],
    );
    assert!(changed.status.success(), "{}", stderr(&changed));
    assert_completed(&changed, [0, 0, 0, videos, 1, 1, 1, 1]);
    let second_run_dir = assert_outputs(data.path());
    assert_ne!(
        first_run_dir, second_run_dir,
        "a new run beside the old one"
    );
    assert!(
        first_run_dir.join("checkpoint.json").is_file(),
        "the old run is kept"
    );
}

/// A JPEG made undecodable with its size and time kept: the extract stage sees nothing changed,
/// validation decodes it and fails, and training does not start.
#[test]
fn a_failed_validation_stops_the_run_before_training() {
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    let lists = run(data.path(), &server, 2, &["--until", "lists"]);
    assert!(lists.status.success(), "{}", stderr(&lists));
    let video = &planned_videos(data.path())[0];
    let frame = fs::read_dir(data.path().join("frames").join(video))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .min()
        .unwrap();
    rewrite_keeping_time(&frame, |bytes| bytes[..4].fill(0));

    let output = run(data.path(), &server, 2, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("frames-decode"),
        "{}",
        stderr(&output)
    );
    let name = frame.file_name().unwrap().to_string_lossy().into_owned();
    assert!(stderr(&output).contains(&name), "{}", stderr(&output));
    let train = stage_record(&output, "train");
    assert_eq!(train["outcome"], "blocked", "{train}");
    assert_eq!(train["blocked_by"][0]["stage"], "validate", "{train}");
    assert!(!data.path().join("runs").exists(), "training started");
    assert!(!data.path().join("work/train.json").exists());
}

/// A video the server did not have is left out of later runs, and the run's summary names the
/// run that asks for it again, as far as the downloads (the data directory was made by a run
/// only as far as parse): pasted once the mirror has it, that run downloads it alone.
#[test]
fn a_video_missing_from_a_run_is_asked_for_again_by_the_run_it_names() {
    let data = tempfile::tempdir().unwrap();
    let making_server = serve::start(ServeConfig::new(mirror())).unwrap();
    let parsed = run(data.path(), &making_server, 1, &["--until", "parse"]);
    assert!(parsed.status.success(), "{}", stderr(&parsed));
    let missing = planned_videos(data.path())[0].clone();
    let (url, _) = crate::fetch::mirror_videos(mirror())
        .into_iter()
        .find(|(_, path)| path.file_stem().unwrap().to_string_lossy() == missing)
        .unwrap();
    let mut faulty = ServeConfig::new(mirror());
    faulty.faults = FaultPlan {
        rules: vec![FaultRule {
            path: url.clone(),
            fault: Fault::NotFound,
            first: None,
        }],
    };
    let server = serve::start(faulty).unwrap();
    let until_downloads = ["--until", "fetch-videos"];
    let first = command_for_people(data.path(), &server, 1, &until_downloads)
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let again = command_for_people(data.path(), &server, 1, &until_downloads)
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", stderr(&again));
    let (hint, named) = crate::fetch::retry_named(&again);
    assert!(
        named.contains(" run pipelines/demo.toml ")
            && named.ends_with(" --until fetch-videos --retry-missing"),
        "{hint}"
    );
    // The run that made the data directory named its mirror: here it comes back mended at
    // another port.
    let mended = serve::start(ServeConfig::new(mirror())).unwrap();
    let retried = run_named(&named.replace(&making_server.url(), &mended.url()));
    assert!(retried.status.success(), "{}", stderr(&retried));
    assert!(
        mended.stats().path(&url).is_some(),
        "not asked again: {named}\n{}\n{}",
        stdout(&retried),
        stderr(&retried)
    );
    let others = crate::fetch::mirror_videos(mirror());
    for (other, _) in others.iter().filter(|(other, _)| *other != url) {
        assert!(mended.stats().path(other).is_none(), "{other} asked again");
    }
    assert!(!data.path().join("work/missing").join(&missing).exists());
}

/// A pipeline's data directory its run left before the frames (here by `--until`, as by a
/// Ctrl-C): `lists` and `validate` name the pipeline's run as far as they need, which works
/// (they named `extract` and `lists`, which refuse where the pipeline's stages did not finish).
#[test]
fn lists_and_validate_before_the_frames_name_the_pipeline_run_that_makes_them() {
    let data = tempfile::tempdir().unwrap();
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let parsed = run(data.path(), &server, 1, &["--until", "parse"]);
    assert!(parsed.status.success(), "{}", stderr(&parsed));
    let avaprep = |command: &str| {
        crate::support::avaprep(data.path())
            .arg(command)
            .output()
            .unwrap()
    };
    for (command, stage) in [("lists", "extract"), ("validate", "lists")] {
        let refused = avaprep(command);
        assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
        let named = crate::support::first_named(&stderr(&refused)).to_string();
        assert!(
            named.contains(" run pipelines/demo.toml ")
                && named.ends_with(&format!(" --until {stage}")),
            "{command}: {}",
            stderr(&refused)
        );
        let made = run_named(&named);
        assert!(made.status.success(), "{named}: {}", stderr(&made));
    }
    let validated = avaprep("validate");
    assert!(validated.status.success(), "{}", stderr(&validated));
}

/// Trainer processes whose command line names this data directory.
/// The trainers running on `data`: their process ids and command lines.
fn trainers_of(data: &Path) -> Vec<(i32, String)> {
    let needle = data.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("avaprep-train") && cmdline.contains(&needle) {
            found.push((pid, cmdline));
        }
    }
    found
}

#[test]
fn a_run_killed_during_training_continues_from_the_last_checkpoint() {
    // The kill comes at the first epoch's checkpoint, so the second is trained after the resume.
    const EPOCHS: u32 = 2;
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut child = command(data.path(), &server, EPOCHS, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let checkpoint = first_checkpoint(data.path(), &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    let killed_at = json(&checkpoint)["step"].as_u64().unwrap();
    // The trainer dies with the run that started it, so nothing goes on writing the run folder.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !trainers_of(data.path()).is_empty() {
        assert!(Instant::now() < deadline, "{:?}", trainers_of(data.path()));
        std::thread::sleep(Duration::from_millis(100));
    }

    let resumed = run(data.path(), &server, EPOCHS, &[]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_eq!(completed(&resumed, "extract"), 0, "{}", stdout(&resumed));
    let counts = stage_record(&resumed, "train")["counts"].clone();
    let resumed_at = counts["resumed_at_step"].as_u64().unwrap();
    assert!(resumed_at >= killed_at && resumed_at > 0, "{counts}");
    assert_eq!(
        counts["epochs"].as_u64(),
        Some(u64::from(EPOCHS)),
        "{counts}"
    );
    let run_dir = assert_outputs(data.path());
    assert_eq!(run_dir, checkpoint.parent().unwrap(), "the same run folder");
}

/// The run folder's checkpoint once it holds a step, while `run` still runs.
fn first_checkpoint(data: &Path, run: &mut std::process::Child) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let found = fs::read_dir(data.join("runs"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path().join("checkpoint.json"))
            .find(|path| path.is_file());
        if let Some(path) = found
            && json(&path)["step"].as_u64().unwrap_or(0) > 0
        {
            return path;
        }
        assert!(Instant::now() < deadline, "no checkpoint was written");
        assert!(
            run.try_wait().unwrap().is_none(),
            "the run ended before a checkpoint"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Ctrl-C sent to `avaprep run` alone (as a job runner signals its main process) stops the
/// training it runs at a clean point. The trainer once heard only a terminal's Ctrl-C, and
/// trained out its whole schedule.
#[test]
fn a_ctrl_c_to_the_run_alone_stops_its_training() {
    stops_its_training_at_a_clean_point(libc::SIGINT);
}

/// A scheduler's time limit (Slurm's SIGTERM, to every process of the job): the trainer does not
/// take its own SIGTERM, which with the SIGINT the run passes on would end it at once, and stops
/// at the run's, as at a Ctrl-C.
#[test]
fn a_sigterm_to_the_run_and_its_trainer_stops_the_training_as_ctrl_c_does() {
    stops_its_training_at_a_clean_point(libc::SIGTERM);
}

fn stops_its_training_at_a_clean_point(signal: libc::c_int) {
    const EPOCHS: u32 = 6;
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut child = command(data.path(), &server, EPOCHS, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let checkpoint = first_checkpoint(data.path(), &mut child);
    if signal == libc::SIGTERM {
        let trainers = trainers_of(data.path());
        for (pid, _) in &trainers {
            // SAFETY: a signal to a trainer of this test's run.
            assert_eq!(unsafe { libc::kill(*pid, libc::SIGTERM) }, 0);
        }
        std::thread::sleep(Duration::from_millis(1000));
        assert_eq!(
            trainers_of(data.path()),
            trainers,
            "a trainer took its SIGTERM"
        );
    }
    // SAFETY: a signal to the child this test started and has not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let mut errors = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut errors).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(1), "{errors}");
    assert!(errors.contains("interrupted"), "{errors}");
    let epoch = json(&checkpoint)["epoch"].as_u64().unwrap();
    assert!(
        epoch < u64::from(EPOCHS),
        "trained {epoch} epochs: {errors}"
    );
    assert!(trainers_of(data.path()).is_empty());
}

/// A train-only pipeline (no val split fetched) trains its whole schedule without evaluating,
/// keeps the last weights, and has no split to score; a misspelt val split is still refused.
/// Before, the pipeline file was refused (`settings.val_split: "val" is not one of the
/// pipeline's splits`) and the trainer could not run without a val split.
#[test]
fn a_train_only_pipeline_trains_the_whole_schedule_and_keeps_the_last_weights() {
    const EPOCHS: u32 = 2;
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    let train_only = ["--set", "splits=[\"train\"]"];
    let output = run(data.path(), &server, EPOCHS, &train_only);
    assert!(output.status.success(), "{}", stderr(&output));
    let trained = json(&data.path().join("work/train.json"));
    assert_eq!(trained["epochs_run"].as_u64(), Some(u64::from(EPOCHS)));
    assert_eq!(trained["best"], serde_json::Value::Null, "{trained}");
    let weights = trained["weights"].as_str().unwrap();
    assert!(weights.contains("/model-s"), "the last weights: {weights}");
    assert!(data.path().join(weights).is_file());
    let run_dir = data.path().join(trained["run_dir"].as_str().unwrap());
    let metrics = fs::read_to_string(run_dir.join("metrics.jsonl")).unwrap();
    assert!(!metrics.contains("\"eval\""), "{metrics}");
    assert_eq!(trained["val_split"], "", "{trained}");
    let evaluation = json(&data.path().join("work/eval.json"));
    assert_eq!(evaluation["splits"], serde_json::json!([]), "{evaluation}");
    for split in [
        "frame_lists/val.csv",
        "slowfast/annotations/ava_val_v2.2.csv",
    ] {
        assert!(!data.path().join(split).exists(), "{split}");
    }
    let report = crate::support::avaprep(data.path())
        .arg("report")
        .output()
        .unwrap();
    assert!(report.status.success(), "{}", stderr(&report));

    let misspelt = run(
        data.path(),
        &server,
        EPOCHS,
        &[
            &train_only[..],
            &["--set", "train.settings.val_split=\"vall\""],
        ]
        .concat(),
    );
    assert_eq!(misspelt.status.code(), Some(2), "{}", stderr(&misspelt));
    assert!(
        stderr(&misspelt).contains("\"vall\""),
        "{}",
        stderr(&misspelt)
    );
}
