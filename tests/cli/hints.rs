//! Every remediation message names a command that works: each test provokes the message, runs
//! the command it names, and shows the case fixed. (The trainer's hints are tested beside the
//! trainer: `train::device` and `missing_frames_stop_training_before_the_first_step`.)

use std::fs;
use std::path::Path;

use avaprep_testbed::serve::{self, ServeConfig, ServerHandle};

use crate::extract::{assert_complete, fetched_data, planned_videos};
use crate::support::{avaprep, mirror, named_command, run_named, stderr, stdout};

fn fetch(data: &Path, server: &ServerHandle) -> std::process::Output {
    avaprep(data)
        .arg("fetch")
        .arg("--dataset")
        .arg(mirror().join("manifest.toml"))
        .args(["--base-url", &server.url()])
        .output()
        .unwrap()
}

fn extract(data: &Path, fps: &str) -> std::process::Output {
    avaprep(data)
        .args(["extract", "--fps", fps, "--height", "240"])
        .output()
        .unwrap()
}

#[test]
fn extract_before_fetch_names_fetch_which_makes_the_plan() {
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    let failed = extract(data.path(), "5");
    assert_eq!(failed.status.code(), Some(1));
    let message = stdout(&failed) + &stderr(&failed);
    assert!(message.contains("run `avaprep fetch` first"), "{message}");
    assert!(fetch(data.path(), &server).status.success());
    let again = extract(data.path(), "5");
    assert!(again.status.success(), "{}", stderr(&again));
}

/// `--fps` above a video's rate names the highest rate that video takes, as the command's flag
/// and as the pipeline's key; the lowest of those over all videos extracts them all.
#[test]
fn a_rate_above_the_source_names_one_that_works() {
    let data = fetched_data();
    let failed = extract(data.path(), "1000");
    assert!(!failed.status.success());
    let message = stdout(&failed) + &stderr(&failed);
    let rates: Vec<u32> = message
        .split("extract --fps ")
        .skip(1)
        .map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap()
        })
        .collect();
    assert!(!rates.is_empty(), "{message}");
    let rate = rates.iter().min().unwrap().to_string();
    let again = extract(data.path(), &rate);
    assert!(again.status.success(), "--fps {rate}: {}", stderr(&again));
}

#[test]
fn validate_before_lists_names_lists_which_makes_them() {
    let data = fetched_data();
    assert!(extract(data.path(), "5").status.success());
    let failed = avaprep(data.path()).arg("validate").output().unwrap();
    assert_eq!(failed.status.code(), Some(1));
    let message = stderr(&failed);
    // With the data directory: `avaprep lists` alone, from another folder, made lists of ./data.
    let hint = crate::support::first_named(&message);
    assert!(hint.ends_with(" lists"), "{message}");
    assert!(hint.contains("--data-dir"), "{message}");
    let listed = crate::support::run_named(hint);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let again = avaprep(data.path()).arg("validate").output().unwrap();
    assert!(again.status.success(), "{}", stdout(&again));
}

/// A plan without the annotation files the lists need (as from before the lists stage, or
/// edited): the command named, the `fetch` that made the data directory as it was typed (its
/// manifest and mirror), parses again. `avaprep fetch` alone read AVA's manifest, whose archive
/// check then removed the mirror's download.
#[test]
fn an_old_plan_names_fetch_which_parses_again() {
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    assert!(fetch(data.path(), &server).status.success());
    assert!(extract(data.path(), "5").status.success());
    let plan_path = data.path().join("work/videos.json");
    let mut plan: serde_json::Value =
        serde_json::from_slice(&fs::read(&plan_path).unwrap()).unwrap();
    plan.as_object_mut().unwrap().remove("files");
    fs::write(&plan_path, serde_json::to_vec(&plan).unwrap()).unwrap();
    let failed = avaprep(data.path()).arg("lists").output().unwrap();
    assert_eq!(failed.status.code(), Some(1));
    let message = stdout(&failed) + &stderr(&failed);
    // The plan's recorded print catches the change first.
    let named = named_command(&message);
    assert_eq!(
        named,
        format!(
            "avaprep --data-dir {} fetch --dataset {} --base-url {}",
            data.path().display(),
            mirror().join("manifest.toml").display(),
            server.url()
        )
    );
    let fetched = run_named(&named);
    assert!(fetched.status.success(), "{}", stderr(&fetched));
    let again = avaprep(data.path()).arg("lists").output().unwrap();
    assert!(again.status.success(), "{}", stderr(&again));
}

/// Training names `avaprep extract` when frames are missing: it puts them back.
#[test]
fn missing_frames_come_back_with_extract() {
    let data = fetched_data();
    assert!(extract(data.path(), "5").status.success());
    let videos = planned_videos(data.path());
    fs::remove_dir_all(data.path().join("frames").join(&videos[0])).unwrap();
    let again = extract(data.path(), "5");
    assert!(again.status.success(), "{}", stderr(&again));
    for video in &videos {
        assert_complete(data.path(), video, 5.0);
    }
}

/// Outside the checkout the default manifest is not there: the error names the `--dataset` to
/// give (the checkout this binary was built from), and with it the command reads AVA's manifest
/// and goes on to its downloads. An archive whose members are not the manifest's leaves nothing.
#[test]
fn the_default_manifest_from_another_folder_names_its_path() {
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let data = elsewhere.path().join("data");
    let fetch_here = |extra: &[&str]| {
        avaprep(&data)
            .current_dir(elsewhere.path())
            .args(["fetch", "--annotations-only", "--base-url", &server.url()])
            .args(extra)
            .output()
            .unwrap()
    };
    let failed = fetch_here(&[]);
    assert_eq!(failed.status.code(), Some(1));
    let message = stderr(&failed);
    let named = message
        .split("give `--dataset ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("{message}"));
    assert!(Path::new(named).is_absolute(), "{message}");
    let again = fetch_here(&["--dataset", named]);
    let message = stdout(&again) + &stderr(&again);
    assert!(
        !message.contains("cannot read dataset manifest"),
        "{message}"
    );
    assert!(message.contains("ava_v2.2.zip"), "{message}");
    // The test mirror's archive is not AVA's: refused, and none of its members kept (they once
    // stayed in `annotations/`, for a later command to call edited files).
    assert!(message.contains("not what the manifest lists"), "{message}");
    let kept: Vec<_> = fs::read_dir(data.join("annotations"))
        .map(|entries| entries.flatten().map(|entry| entry.file_name()).collect())
        .unwrap_or_default();
    assert!(kept.is_empty(), "{kept:?}");
}
