//! `avaprep validate` on data the pipeline prepared from the synthetic mirror: it passes clean
//! (with `--json` and `--junit` a script and a CI system can read), fails naming a planted
//! defect with exit 1 (the mmaction2 view's checked too), reads the same folder as a foreign PySlowFast layout through a config,
//! and runs as the `validate` stage.

use std::fs;
use std::path::{Path, PathBuf};

use avaprep::validate::CheckId;
use avaprep_testbed::serve::{self, ServeConfig};

use crate::extract::fetched_data;
use crate::nothing_lost::{completed, run_pipeline_with};
use crate::support::{avaprep, mirror, stderr, stdout};

fn prepare(data: &Path) {
    for args in [
        &["extract", "--fps", "5", "--height", "240"][..],
        &["lists", "--mmaction2"][..],
    ] {
        let output = avaprep(data).args(args).output().unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    }
}

/// The `validation` record of `--json` output.
fn record(output: &std::process::Output) -> serde_json::Value {
    stdout(output)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|value| value["type"] == "validation")
        .unwrap_or_else(|| panic!("no validation record in {}", stdout(output)))
}

fn failing_cases(junit: &Path) -> Vec<String> {
    let text = fs::read_to_string(junit).unwrap();
    let xml = roxmltree::Document::parse(&text).expect("JUnit XML parses");
    xml.descendants()
        .filter(|node| node.has_tag_name("testcase"))
        .filter(|case| case.children().any(|child| child.has_tag_name("failure")))
        .map(|case| case.attribute("name").unwrap().to_string())
        .collect()
}

#[test]
fn prepared_data_passes_and_a_missing_frame_fails_by_name() {
    let data = fetched_data();
    prepare(data.path());
    let junit = data.path().join("validation.xml");
    let output = avaprep(data.path())
        .args(["--json", "validate", "--junit"])
        .arg(&junit)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let report = record(&output);
    assert_eq!(report["passed"], true);
    for check in report["checks"].as_array().unwrap() {
        assert_eq!(check["status"], "passed", "{check}");
    }
    assert!(report["frames_decoded"].as_u64().unwrap() > 100, "{report}");
    assert!(failing_cases(&junit).is_empty());
    // Kept as the data directory's validation, as the pipeline's stage keeps it: the report
    // said "not validated yet" after this command passed.
    let kept = || -> serde_json::Value {
        serde_json::from_slice(&fs::read(data.path().join("slowfast/validation.json")).unwrap())
            .unwrap()
    };
    assert_eq!(kept()["passed"], true);

    // A frame inside a keyframe's clip disappears.
    let frame = first_clip_frame(data.path());
    fs::remove_file(data.path().join("frames").join(&frame)).unwrap();
    let output = avaprep(data.path())
        .args(["validate", "--junit"])
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let text = stdout(&output);
    assert!(text.contains("FAIL frames-exist"), "{text}");
    assert!(text.contains(&format!("{frame}: missing")), "{text}");
    assert!(text.contains("validation FAILED"), "{text}");
    let failing = failing_cases(&junit);
    assert!(failing.contains(&"frames-exist".to_string()), "{failing:?}");
    assert!(failing.contains(&"clip-frames".to_string()), "{failing:?}");
    assert_eq!(kept()["passed"], false);
}

/// The frame a train list row names at the first keyframe of the first train video.
fn first_clip_frame(data: &Path) -> String {
    let list = fs::read_to_string(data.join("frame_lists/train.csv")).unwrap();
    let video = list
        .lines()
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let boxes = fs::read_to_string(data.join("slowfast/annotations/ava_train_v2.2.csv")).unwrap();
    let second: f64 = boxes
        .lines()
        .find(|line| line.starts_with(&video))
        .and_then(|line| line.split(',').nth(1))
        .unwrap()
        .parse()
        .unwrap();
    let timing: serde_json::Value =
        serde_json::from_slice(&fs::read(data.join("slowfast/lists.json")).unwrap()).unwrap();
    let row = ((second - timing["segment_start"].as_f64().unwrap())
        * timing["list_fps"].as_f64().unwrap()) as usize;
    list.lines()
        .skip(1)
        .filter(|line| line.starts_with(&format!("{video} ")))
        .nth(row)
        .unwrap()
        .split(' ')
        .nth(3)
        .unwrap()
        .to_string()
}

/// `--config DATA/slowfast/ava.yaml`, the config avaprep wrote, validates as the data directory
/// does: the timing recorded beside it and the frame index are found, every check passes.
/// A copy of that config elsewhere describes a foreign layout: PySlowFast's timing unless the
/// flags say otherwise, and the checks that need avaprep's frame index skipped with the reason.
#[test]
fn a_pyslowfast_config_describes_a_foreign_layout() {
    let data = fetched_data();
    prepare(data.path());
    let own = avaprep(data.path())
        .args(["--json", "validate", "--config"])
        .arg(data.path().join("slowfast/ava.yaml"))
        .output()
        .unwrap();
    assert!(own.status.success(), "{}\n{}", stdout(&own), stderr(&own));
    let report = record(&own);
    for check in report["checks"].as_array().unwrap() {
        assert_eq!(check["status"], "passed", "{check}");
    }
    // A config of one's own whose `_BASE_` is that one checks exactly what it checks (the
    // records are found through the base); the three roots given over the data directory
    // layer over its config. Before, the first failed 3 checks and skipped 3, the second
    // dropped the data directory's file names and failed files-present.
    let mine = tempfile::tempdir().unwrap();
    let my_config = mine.path().join("my_ava.yaml");
    let base = data.path().join("slowfast/ava.yaml");
    fs::write(&my_config, format!("_BASE_: {}\n", base.display())).unwrap();
    let roots = [
        ("--frame-dir", "frames"),
        ("--frame-list-dir", "frame_lists"),
        ("--annotation-dir", "slowfast/annotations"),
    ];
    let over_roots_from = |data_dir: &std::path::Path| {
        let mut command = avaprep(data_dir);
        command.args(["--json", "validate"]);
        for (flag, folder) in roots {
            command.arg(flag).arg(data.path().join(folder));
        }
        command
    };
    let mut through_base = avaprep(data.path());
    through_base
        .args(["--json", "validate", "--config"])
        .arg(&my_config);
    // From another data directory the roots are checked over the config avaprep wrote beside
    // those lists: PySlowFast's defaults failed files-present and row-counts on AVA's clock.
    let from_elsewhere = over_roots_from(mine.path());
    for mut command in [through_base, over_roots_from(data.path()), from_elsewhere] {
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{}\n{}",
            stdout(&output),
            stderr(&output)
        );
        assert_eq!(record(&output)["checks"], report["checks"], "{command:?}");
    }

    let timing: serde_json::Value =
        serde_json::from_slice(&fs::read(data.path().join("slowfast/lists.json")).unwrap())
            .unwrap();
    let keyframes = timing["keyframes"].as_array().unwrap();
    let keyframes = format!("{}-{}", keyframes[0], keyframes[1]);
    let elsewhere = tempfile::tempdir().unwrap();
    let config = elsewhere.path().join("ava.yaml");
    fs::copy(data.path().join("slowfast/ava.yaml"), &config).unwrap();
    let output = avaprep(data.path())
        .args(["--json", "validate", "--config"])
        .arg(&config)
        .args([
            "--segment-start",
            &timing["segment_start"].to_string(),
            "--segment-end",
            &timing["segment_end"].to_string(),
            "--keyframes",
            &keyframes,
            "--height",
            "240",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let report = record(&output);
    let skipped: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|check| check["status"] == "skipped")
        .map(|check| check["name"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["list-timing", "frame-timing", "loader-views"]);

    // A name in the config that leaves its folder is a usage error.
    let config = data.path().join("hostile.yaml");
    fs::write(
        &config,
        format!(
            "_BASE_: {}\nAVA:\n  TRAIN_LISTS: [\"../../../etc/passwd\"]\n",
            data.path().join("slowfast/ava.yaml").display()
        ),
    )
    .unwrap();
    let output = avaprep(data.path())
        .args(["validate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    // So is a config that is not there (a typo): it once exited 1, as a failed check does.
    let typo = data.path().join("slowfast/ava.yml");
    let output = avaprep(data.path())
        .args(["validate", "--config"])
        .arg(&typo)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!("--config {}: no such file", typo.display())),
        "{}",
        stderr(&output)
    );
}

/// A PySlowFast config naming three empty folders: validation fails (nothing is there) but
/// still writes its JUnit file, in milliseconds.
fn empty_layout(dir: &Path) -> std::path::PathBuf {
    for folder in ["frames", "lists", "annotations"] {
        fs::create_dir_all(dir.join(folder)).unwrap();
    }
    let config = dir.join("config.yaml");
    fs::write(
        &config,
        format!(
            "AVA:\n  FRAME_DIR: {0}/frames\n  FRAME_LIST_DIR: {0}/lists\n  ANNOTATION_DIR: {0}/annotations\n",
            dir.display()
        ),
    )
    .unwrap();
    config
}

fn junit_cases(xml: &[u8]) -> usize {
    let text = std::str::from_utf8(xml).unwrap();
    roxmltree::Document::parse(text)
        .expect("JUnit XML parses")
        .descendants()
        .filter(|node| node.has_tag_name("testcase"))
        .count()
}

/// A data directory with no lists yet: the checks cannot start, and the reason reaches a
/// script through its JSON and a CI system through its JUnit file (one test case in error),
/// not only a terminal's stderr.
#[test]
fn an_unprepared_data_directory_is_reported_in_the_json_and_the_junit_file() {
    let data = tempfile::tempdir().unwrap();
    let junit = data.path().join("results.xml");
    let output = avaprep(data.path())
        .args(["--json", "validate", "--junit"])
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let records: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON record"))
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["type"], "error");
    assert_eq!(records[0]["exit_code"], 1);
    let message = records[0]["message"].as_str().unwrap();
    assert!(message.contains("no frame lists yet"), "{message}");
    assert!(stderr(&output).contains(message), "{}", stderr(&output));
    let text = fs::read_to_string(&junit).unwrap();
    let xml = roxmltree::Document::parse(&text).expect("JUnit XML parses");
    let cases: Vec<_> = xml
        .descendants()
        .filter(|node| node.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 1, "{text}");
    let error = cases[0]
        .children()
        .find(|child| child.has_tag_name("error"))
        .unwrap_or_else(|| panic!("no error in {text}"));
    assert_eq!(error.attribute("message"), Some(message));
    let suite = xml
        .descendants()
        .find(|node| node.has_tag_name("testsuite"))
        .unwrap();
    assert_eq!(suite.attribute("errors"), Some("1"));
}

/// `--junit PATH` writes where PATH points: through a link into a results folder (the link
/// stays), into a FIFO a CI step reads and a character device in place (never replaced by a
/// regular file); a directory is a usage error before any work.
#[test]
fn junit_output_is_written_through_links_fifos_and_devices() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let config = empty_layout(dir.path());
    let validate = |junit: &Path| {
        avaprep(dir.path())
            .args(["validate", "--config"])
            .arg(&config)
            .arg("--junit")
            .arg(junit)
            .output()
            .unwrap()
    };

    let results = dir.path().join("results");
    fs::create_dir(&results).unwrap();
    fs::write(results.join("junit.xml"), "old").unwrap();
    let link = dir.path().join("latest.xml");
    std::os::unix::fs::symlink("results/junit.xml", &link).unwrap();
    let output = validate(&link);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        junit_cases(&fs::read(results.join("junit.xml")).unwrap()),
        CheckId::ALL.len()
    );

    let fifo = dir.path().join("pipe");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(fifo).unwrap())
    };
    let output = validate(&fifo);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(junit_cases(&reader.join().unwrap()), CheckId::ALL.len());
    assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // A FIFO nobody reads is an error, named: it once exited 0 with nothing printed (whatever
    // the checks found), taken for its own stdout closed, and a CI job read success.
    let output = avaprep(dir.path())
        .args(["validate", "--quick", "--config"])
        .arg(&config)
        .arg("--junit")
        .arg(&fifo)
        .output()
        .unwrap();
    assert_ne!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("is a FIFO that no process reads"),
        "{}",
        stderr(&output)
    );

    // The null device's numbers in a folder of our own (root, as CI runs); else /dev/null.
    let device = dir.path().join("device");
    let c_path = std::ffi::CString::new(device.as_os_str().as_encoded_bytes()).unwrap();
    let made = unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    let device = if made == 0 {
        device
    } else {
        std::path::PathBuf::from("/dev/null")
    };
    let output = validate(&device);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(fs::metadata(&device).unwrap().file_type().is_char_device());

    let output = validate(&results);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("is a directory"),
        "{}",
        stderr(&output)
    );
    assert!(stdout(&output).is_empty(), "no work before the refusal");
    for (named, expected) in [
        (PathBuf::new(), "\"\" is no file name"),
        (
            results.join("junit.xml/j.xml"),
            "which is a file, not a folder",
        ),
    ] {
        let output = validate(&named);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{}", stderr(&output));
    }

    // `--junit /dev/stdout > log.txt`: the report, then what the command prints after it,
    // neither over the other (the report once overwrote the start of the log and the summary
    // the start of the report).
    let log = dir.path().join("log.txt");
    let mut redirected = avaprep(dir.path());
    redirected
        .args(["validate", "--config"])
        .arg(&config)
        .args(["--junit", "/dev/stdout"])
        .stdout(fs::File::create(&log).unwrap());
    let status = redirected.status().unwrap();
    assert_eq!(status.code(), Some(1));
    let logged = fs::read_to_string(&log).unwrap();
    let report_end = logged.find("</testsuites>").expect("the whole report") + 13;
    assert!(logged.starts_with("<?xml"), "{logged}");
    assert_eq!(
        junit_cases(&logged.as_bytes()[..report_end]),
        CheckId::ALL.len()
    );
    assert!(
        logged[report_end..].contains("validation FAILED"),
        "{logged}"
    );
}

/// An annotation file edited after `lists` wrote it fails its checksum (and here the duplicate
/// row it gained): the exit code is 1 and both are named.
#[test]
fn an_edited_annotation_file_fails_its_checksum() {
    let data = fetched_data();
    prepare(data.path());
    let table = data.path().join("slowfast/annotations/ava_val_v2.2.csv");
    let mut text = fs::read_to_string(&table).unwrap();
    let first = text.lines().next().unwrap().to_string();
    text.push_str(&first);
    text.push('\n');
    fs::write(&table, text).unwrap();
    let output = avaprep(data.path()).args(["validate"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains("FAIL duplicate-rows"), "{text}");
    assert!(text.contains("FAIL checksums"), "{text}");
    assert!(text.contains("ava_val_v2.2.csv: sha256"), "{text}");
    assert!(text.contains("SHA256SUMS when it was written"), "{text}");

    // Against another manifest the mismatch is the manifest's, not an edit after writing.
    let manifest_dir = tempfile::tempdir().unwrap();
    let mut manifest: toml::Table = fs::read_to_string(mirror().join("manifest.toml"))
        .unwrap()
        .parse()
        .unwrap();
    for file in manifest["annotations"]["contents"].as_array_mut().unwrap() {
        if file["name"].as_str() == Some("ava_train_v2.2.csv") {
            file["sha256"] = toml::Value::String("0".repeat(64));
        }
    }
    let other = manifest_dir.path().join("other.toml");
    fs::write(&other, toml::to_string(&manifest).unwrap()).unwrap();
    let output = avaprep(data.path())
        .args(["validate", "--manifest"])
        .arg(&other)
        .output()
        .unwrap();
    let text = stdout(&output);
    assert!(
        text.contains("ava_train_v2.2.csv: sha256")
            && text.contains("not the file the manifest names"),
        "{text}"
    );

    // A dataset of some splits holds only their files (the test split's are not copied in):
    // the manifest's checksums are of the files it holds.
    let test_files: Vec<PathBuf> = fs::read_dir(data.path().join("annotations"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().contains("_test_"))
        .collect();
    assert!(!test_files.is_empty());
    for path in &test_files {
        fs::remove_file(path).unwrap();
    }
    let output = avaprep(data.path())
        .args(["validate", "--manifest"])
        .arg(mirror().join("manifest.toml"))
        .output()
        .unwrap();
    let text = stdout(&output);
    assert!(
        !text.contains("_test_") && text.contains("ava_val_v2.2.csv: sha256"),
        "{text}"
    );
    // A folder that holds none of the manifest's files is another release's or another folder:
    // an error, not a check that passes having compared nothing.
    let annotations = data.path().join("annotations");
    let aside = data.path().join("annotations.aside");
    fs::rename(&annotations, &aside).unwrap();
    fs::create_dir(&annotations).unwrap();
    let output = avaprep(data.path())
        .args(["validate", "--manifest"])
        .arg(mirror().join("manifest.toml"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("holds none of the annotation files it names"),
        "{}",
        stderr(&output)
    );
}

/// In a pipeline, validate runs after lists, keeps its report, and is up to date on a re-run.
#[test]
fn the_validate_stage_runs_after_lists_and_keeps_its_report() {
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    let run = || run_pipeline_with(data.path(), &server, &["--set", "validate.quick=true"]);
    let first = run();
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(completed(&first, "validate"), 1, "{}", stdout(&first));
    let report: serde_json::Value =
        serde_json::from_slice(&fs::read(data.path().join("slowfast/validation.json")).unwrap())
            .unwrap();
    assert_eq!(report["passed"], true, "{report}");
    assert_eq!(report["depth"], "quick");
    // The command counts the checks as the stage does: those run, and those skipped beside.
    let checks = report["checks"].as_array().unwrap();
    let skipped = checks
        .iter()
        .filter(|check| check["status"] == "skipped")
        .count();
    let command = avaprep(data.path())
        .args(["validate", "--quick"])
        .output()
        .unwrap();
    assert!(command.status.success(), "{}", stderr(&command));
    let counted = format!(
        "validation passed: {} checks ({skipped} skipped)",
        checks.len() - skipped
    );
    assert!(
        stdout(&command).contains(&counted),
        "{counted}: {}",
        stdout(&command)
    );
    let again = run();
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(completed(&again, "validate"), 0, "{}", stdout(&again));
}
