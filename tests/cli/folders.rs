//! Data directories as users lay them out and share them: frames on another disk behind a link,
//! a training beside other commands, a dataset changed under a training. Nothing already made is
//! destroyed, and nothing trains on data that is not what the lists were made from.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use avaprep::pipeline::lock::{DataDirLock, LockMode};

use crate::invalidation::{TRAIN_TABLE, assert_ran, workspace};
use crate::support::{avaprep, stderr, stdout};

/// Every frame file under `folder`, counted.
fn frame_count(folder: &Path) -> usize {
    fs::read_dir(folder)
        .unwrap()
        .map(|video| fs::read_dir(video.unwrap().path()).unwrap().count())
        .sum()
}

/// `frames/` a link to a folder on another filesystem (a tmpfs here): the first extraction
/// fills it, and extracting again at another rate swaps each video's frames there. Before,
/// the old frames were deleted and the new ones could not be renamed across filesystems
/// (EXDEV): every video failed and every frame was gone.
#[test]
fn frames_on_another_filesystem_are_replaced_never_destroyed() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let Ok(other_disk) = tempfile::tempdir_in("/dev/shm") else {
        eprintln!("skipped: no /dev/shm to stand for another disk");
        return;
    };
    if fs::metadata(other_disk.path()).unwrap().dev() == fs::metadata(data.path()).unwrap().dev() {
        eprintln!("skipped: /dev/shm is on the data directory's filesystem here");
        return;
    }
    let frames = other_disk.path().join("frames");
    fs::create_dir(&frames).unwrap();
    std::os::unix::fs::symlink(&frames, data.path().join("frames")).unwrap();

    let first = workspace.run(data.path(), &[]);
    assert_ran(&first);
    let at_five = frame_count(&frames);
    assert!(at_five > 0, "no frame on the other disk");

    let again = workspace.run(data.path(), &["--set", "extract.fps=10"]);
    assert_ran(&again);
    let at_ten = frame_count(&frames);
    assert!(
        at_ten > at_five * 3 / 2,
        "{at_ten} frames at 10 fps, {at_five} at 5"
    );
    assert!(
        fs::symlink_metadata(data.path().join("frames"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link stays"
    );
    // Nothing half-made is left beside the frames.
    let hidden: Vec<String> = fs::read_dir(&frames)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
}

/// Overwrites a file with zeros of its own length and gives it back its modification time: a
/// frame damaged where a listing cannot see it (extraction stays done), which the full
/// validation decodes.
fn damage_unseen(path: &Path) {
    let modified = fs::metadata(path).unwrap().modified().unwrap();
    let length = fs::metadata(path).unwrap().len() as usize;
    fs::write(path, vec![0u8; length]).unwrap();
    set_modified(path, modified);
}

fn set_modified(path: &Path, time: std::time::SystemTime) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(time)
        .unwrap();
}

/// `avaprep train` and `predict` hold the data directory as every other writer does, and
/// training refuses what the pipeline's train stage would not run on: a failed validation, or
/// annotations edited since the lists were made. Before, both trained (or ran) regardless.
#[test]
fn training_takes_the_lock_and_refuses_a_failed_or_stale_dataset() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    // A quick validation first: the full one below then runs again (its parameters changed).
    let quick = ["--set", "validate.quick=true"];
    assert_ran(&workspace.run_until(data, "validate", &quick));

    let held = DataDirLock::acquire(data, LockMode::Exclusive, "avaprep run mine.toml").unwrap();
    for command in [
        &["train", "--preset", "synthetic-tiny"][..],
        &["predict", "--weights", "none.safetensors", "--out", "d.csv"][..],
    ] {
        let refused = avaprep(data).args(command).output().unwrap();
        let message = stderr(&refused);
        assert_eq!(refused.status.code(), Some(1), "{command:?}: {message}");
        assert!(
            message.contains("is in use by `avaprep run mine.toml`"),
            "{command:?}: {message}"
        );
    }
    // A validation beside a writer checks, but keeps nothing as the data directory's.
    let kept = data.join("slowfast/validation.json");
    let kept_at = || fs::metadata(&kept).unwrap().modified().unwrap();
    let before = kept_at();
    let beside = avaprep(data)
        .args(["validate", "--quick"])
        .output()
        .unwrap();
    let message = stderr(&beside);
    assert!(beside.status.success(), "{message}");
    assert!(
        message.contains("in use by `avaprep run mine.toml`")
            && message.contains("checking, without keeping the findings"),
        "{message}"
    );
    assert_eq!(kept_at(), before);
    drop(held);
    // A run folder outside the data directory is held too (by a training of another one here).
    let runs = tempfile::tempdir().unwrap();
    let run = runs.path().join("shared-run");
    let other = DataDirLock::acquire(&run, LockMode::Exclusive, "avaprep train other").unwrap();
    let refused = avaprep(data)
        .args(["train", "--preset", "synthetic-tiny", "--run-dir"])
        .arg(&run)
        .output()
        .unwrap();
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{message}");
    assert!(message.contains("`avaprep train other`"), "{message}");
    drop(other);

    let frame = fs::read_dir(data.join("frames"))
        .unwrap()
        .flat_map(|video| fs::read_dir(video.unwrap().path()).unwrap())
        .map(|frame| frame.unwrap().path())
        .next()
        .unwrap();
    let frame_bytes = fs::read(&frame).unwrap();
    damage_unseen(&frame);
    let failed = workspace.run_until(data, "validate", &[]);
    assert_eq!(failed.status.code(), Some(1), "{}", stdout(&failed));
    let train = || {
        avaprep(data)
            .args([
                "train",
                "--preset",
                "synthetic-tiny",
                "--set",
                "max_epochs=1",
            ])
            .output()
            .unwrap()
    };
    let refused = train();
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{message}");
    let validate_by_hand = format!("avaprep --data-dir {} validate", data.display());
    assert!(
        message.contains(&format!(
            "its last validation failed (frames-decode); `{validate_by_hand}` shows why"
        )),
        "{message}"
    );
    assert!(!data.join("runs").exists(), "a run folder was made");
    // Mended, the command the refusal names passes, and training no longer refuses for it: the
    // stage's record of its failure, and of the findings it kept, gave way to the new findings.
    // Before, the same refusal came back after a validation by hand that passed.
    fs::write(&frame, &frame_bytes).unwrap();
    let by_hand = avaprep(data).arg("validate").output().unwrap();
    assert!(by_hand.status.success(), "{}", stdout(&by_hand));
    let unrefused = train();
    assert!(unrefused.status.success(), "{}", stderr(&unrefused));

    let table = workspace.annotations.path().join(TRAIN_TABLE);
    let mut text = fs::read_to_string(&table).unwrap();
    let first_row = text.lines().next().unwrap().to_string();
    text.push_str(&first_row.replacen(",", ",3", 1));
    text.push('\n');
    fs::write(&table, text).unwrap();
    let refused = train();
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{message}");
    assert!(
        message.contains("changed since") && message.contains(TRAIN_TABLE),
        "{message}"
    );
}

/// `annotations = "ann"` in a pipeline file is the folder beside the file, and an edit there is
/// read again. Before, the state recorded `ann/...` under the data directory (0 files), so the
/// edit was never seen: `fetch-annotations up to date`, the old rows kept.
#[test]
fn an_edit_in_a_relative_annotations_folder_is_read_again() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let pipeline_folder = tempfile::tempdir().unwrap();
    let pipeline = pipeline_folder.path().join("mine.toml");
    fs::copy(
        crate::support::repo_root().join("pipelines/demo.toml"),
        &pipeline,
    )
    .unwrap();
    let annotations = pipeline_folder.path().join("ann");
    crate::invalidation::copy_tree(workspace.annotations.path(), &annotations);
    let run = || {
        // Run from the pipeline's folder and named relatively, as a user in that folder would.
        avaprep(data.path())
            .current_dir(pipeline_folder.path())
            .args(["--json", "run", "mine.toml"])
            .args(["--until", "lists", "--set", "extract.height=240"])
            .arg("--set")
            .arg(format!("dataset=\"{}\"", workspace.manifest.display()))
            .arg("--set")
            .arg(format!(
                "fetch.videos=\"{}\"",
                workspace.videos.path().display()
            ))
            .args(["--set", "fetch.annotations=\"ann\""])
            .output()
            .unwrap()
    };
    assert_ran(&run());
    let table = annotations.join(TRAIN_TABLE);
    let text = fs::read_to_string(&table).unwrap();
    let kept: Vec<&str> = text.lines().skip(1).collect();
    fs::write(&table, kept.join("\n") + "\n").unwrap();
    let again = run();
    assert_ran(&again);
    assert_eq!(
        crate::nothing_lost::completed(&again, "fetch-annotations"),
        1,
        "{}",
        stdout(&again)
    );
    let copied = fs::read_to_string(data.path().join("annotations").join(TRAIN_TABLE)).unwrap();
    assert_eq!(copied.lines().count(), kept.len());
}

/// Gives every file under `folder` a new modification time, as `touch` or a copy that does not
/// keep times (`cp`, `rsync` without `-t`) would.
fn touch_all(folder: &Path) {
    for entry in fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            touch_all(&path);
            continue;
        }
        let later =
            fs::metadata(&path).unwrap().modified().unwrap() + std::time::Duration::from_secs(3600);
        set_modified(&path, later);
    }
}

/// A file's print is its content: videos and annotations touched (or copied without their
/// times) redo nothing. Before, each touched video was checked, extracted, listed and trained
/// on again, though every output came out byte-identical.
#[test]
fn touched_inputs_and_outputs_redo_nothing() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    assert_ran(&workspace.run(data.path(), &[]));
    touch_all(workspace.videos.path());
    touch_all(workspace.annotations.path());
    touch_all(&data.path().join("frames"));
    touch_all(&data.path().join("frame_lists"));
    let again = workspace.run(data.path(), &[]);
    assert_ran(&again);
    for stage in [
        "fetch-annotations",
        "parse",
        "fetch-videos",
        "extract",
        "lists",
    ] {
        assert_eq!(
            crate::nothing_lost::completed(&again, stage),
            0,
            "{stage} redone:\n{}",
            stdout(&again)
        );
    }
    // The new times are recorded: the next look is a listing again, and still nothing to do.
    let third = workspace.run(data.path(), &[]);
    assert_ran(&third);
    assert_eq!(crate::nothing_lost::completed(&third, "extract"), 0);
    // A real edit is still seen.
    let table = workspace.annotations.path().join(TRAIN_TABLE);
    let text = fs::read_to_string(&table).unwrap();
    fs::write(
        &table,
        text.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n",
    )
    .unwrap();
    let edited = workspace.run(data.path(), &[]);
    assert_ran(&edited);
    assert_eq!(
        crate::nothing_lost::completed(&edited, "fetch-annotations"),
        1
    );
}

/// Every table the lists stage writes that names `video`, by file.
fn tables_naming(data: &Path, video: &str) -> Vec<String> {
    let mut naming = Vec::new();
    for folder in ["frame_lists", "slowfast/annotations"] {
        for entry in fs::read_dir(data.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            if fs::read_to_string(&path).is_ok_and(|text| text.contains(video)) {
                naming.push(path.display().to_string());
            }
        }
    }
    naming
}

/// A video renamed in the folder, and another replaced by a file libav cannot open: both leave
/// the lists and the annotations, and `dropped_videos.txt` says why; their frames stay on disk.
/// Before, the lists kept their rows (on the frames of the earlier extraction) and
/// `dropped_videos.txt` was empty.
#[test]
fn a_video_that_cannot_be_used_leaves_every_table() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    assert_ran(&workspace.run(data, &[]));
    let mut listed: Vec<String> = fs::read_dir(data.join("frames"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    listed.sort();
    let (renamed, broken) = (&listed[0], &listed[1]);
    let video_file = |id: &str| {
        fs::read_dir(workspace.videos.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| path.file_stem().unwrap().to_string_lossy() == id)
            .unwrap()
    };
    let renamed_file = video_file(renamed);
    fs::rename(
        &renamed_file,
        renamed_file.with_file_name(format!("{renamed} (1).mp4")),
    )
    .unwrap();
    let broken_file = video_file(broken);
    fs::remove_file(&broken_file).unwrap();
    fs::write(&broken_file, b"not a video").unwrap();

    let again = workspace.run(data, &[]);
    assert_eq!(again.status.code(), Some(1), "{}", stdout(&again));
    let dropped = fs::read_to_string(data.join("slowfast/dropped_videos.txt")).unwrap();
    for video in [renamed, broken] {
        assert_eq!(tables_naming(data, video), Vec::<String>::new(), "{video}");
        assert!(dropped.contains(video.as_str()), "{video}: {dropped}");
        assert!(
            data.join("frames").join(video).is_dir(),
            "{video}'s frames kept"
        );
    }
    assert!(!tables_naming(data, &listed[2]).is_empty());
}

/// A `lists` that fails removes the lists, views and configs of the run before (they may name
/// frames made under other settings), and `status` says it failed and why. Before, they stayed
/// for any loader to read, and `status` said "stale, not made yet".
#[test]
fn a_failed_lists_withdraws_the_old_lists_and_status_says_failed() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    assert_ran(&workspace.run(data, &["--set", "lists.pytorchvideo=true"]));
    assert!(data.join("frame_lists/train.csv").is_file());
    // Clips of 64 frames 8 rows apart (17 s) reach far past the frames kept around each
    // keyframe.
    let too_long = [
        "--set",
        "lists.pytorchvideo=true",
        "--set",
        "lists.num_frames=64",
        "--set",
        "lists.sampling_rate=8",
    ];
    let failed = workspace.run(data, &too_long);
    assert_eq!(failed.status.code(), Some(1), "{}", stdout(&failed));
    let errors = stderr(&failed);
    assert!(errors.contains("were removed"), "{errors}");
    for gone in [
        "frame_lists/train.csv",
        "frame_lists/val.csv",
        "pytorchvideo",
        "slowfast/ava.yaml",
        "slowfast/train.yaml",
    ] {
        assert!(
            !data.join(gone).exists(),
            "{gone} kept after a failed lists"
        );
    }
    let json = ["--json"];
    let status = workspace.status(data, &[&json[..], &too_long].concat());
    let lists = stdout(&status)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|record| record["stage"] == "lists")
        .unwrap_or_else(|| panic!("no lists line: {}", stdout(&status)));
    assert_eq!(lists["condition"], "failed", "{lists}");
    assert!(
        lists["detail"]
            .as_str()
            .is_some_and(|detail| !detail.is_empty()),
        "{lists}"
    );
}

/// A data directory copied (`cp -a`): its next command rewrites PySlowFast's configs to name the
/// copy and redoes nothing; mmaction2's names its files beside itself; `validate` refuses a
/// config that still names the original. Before, the copy's configs named the original's
/// frames, every stage was up to date and `validate` passed.
#[test]
fn a_copied_data_directory_names_itself() {
    let workspace = workspace();
    let parent = tempfile::tempdir().unwrap();
    let original = parent.path().join("original");
    let copy = parent.path().join("copy");
    let mmaction2 = ["--set", "lists.mmaction2=true"];
    assert_ran(&workspace.run_until(&original, "validate", &mmaction2));
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&original)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(copied.success());
    let named = |data: &Path| fs::read_to_string(data.join("slowfast/ava.yaml")).unwrap();
    assert!(named(&copy).contains(&*original.to_string_lossy()));

    let refused = avaprep(&copy).arg("validate").output().unwrap();
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{message}");
    assert!(message.contains("moved or copied"), "{message}");
    // The command it names keeps the loader views the lists were made with: `lists` alone
    // removed the mmaction2 view.
    let hint = crate::support::first_named(&message);
    assert!(hint.ends_with(" lists --mmaction2"), "{message}");
    let relisted = crate::support::run_named(hint);
    assert_ran(&relisted);
    assert!(
        stdout(&relisted).contains("up to date"),
        "{}",
        stdout(&relisted)
    );
    assert!(copy.join("mmaction2/ava.py").is_file());

    let again = workspace.run_until(&copy, "validate", &mmaction2);
    assert_ran(&again);
    for stage in ["extract", "lists", "validate"] {
        assert_eq!(
            crate::nothing_lost::completed(&again, stage),
            0,
            "{stage} redone: {}",
            stdout(&again)
        );
    }
    for config in [
        "slowfast/ava.yaml",
        "slowfast/train.yaml",
        "mmaction2/ava.py",
    ] {
        let text = fs::read_to_string(copy.join(config)).unwrap();
        assert!(
            !text.contains(&*original.to_string_lossy()),
            "{config}:\n{text}"
        );
    }
    assert!(named(&copy).contains(&*copy.join("frames").to_string_lossy()));
    let checked = avaprep(&copy).arg("validate").output().unwrap();
    assert!(checked.status.success(), "{}", stderr(&checked));
    assert!(
        stderr(&checked).contains(&*copy.join("frames").to_string_lossy()),
        "{}",
        stderr(&checked)
    );
}

/// A pipeline of the train split alone validates, writes a PySlowFast config without a test
/// phase, and `status` reads the same file `run` does. Before, `files-present` failed on the
/// val annotations, `train.yaml` enabled a test with no lists, and `status` refused the file.
#[test]
fn a_train_only_pipeline_runs_through_validation() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    let train_only = ["--set", "splits=[\"train\"]"];
    let ran = workspace.run_until(data, "validate", &train_only);
    assert_ran(&ran);
    let train_yaml = fs::read_to_string(data.join("slowfast/train.yaml")).unwrap();
    assert!(!train_yaml.contains("TEST_LISTS: []"), "{train_yaml}");
    let until = ["--until", "validate"];
    let status = workspace.status(data, &[&until[..], &train_only].concat());
    assert!(status.status.success(), "{}", stderr(&status));
    let validate = stdout(&status)
        .lines()
        .find(|line| line.starts_with("validate"))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(validate.contains("done"), "{}", stdout(&status));
}

/// A keyframe the detector alone names, with a box at or above the loaders' threshold (0.8,
/// written into their configs), is one PySlowFast and mmaction2 read: its clip is extracted.
/// One whose boxes all score below it is not. Before, extraction took the ground truth's
/// keyframes only.
#[test]
fn detector_keyframes_that_pass_the_threshold_are_extracted() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    // Two annotated seconds of a train video lose their ground truth; the detector keeps a box
    // at each, one scoring 0.95, one 0.5.
    let table = workspace.annotations.path().join(TRAIN_TABLE);
    let ground_truth = fs::read_to_string(&table).unwrap();
    let video = ground_truth
        .lines()
        .next()
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .to_string();
    let second_of = |line: &str| -> u32 { line.split(',').nth(1).unwrap().parse().unwrap() };
    let mut annotated: Vec<u32> = ground_truth
        .lines()
        .filter(|line| line.starts_with(&format!("{video},")))
        .map(second_of)
        .collect();
    annotated.dedup();
    let (passing, failing) = (annotated[2], annotated[3]);
    let without = |text: &str| -> String {
        text.lines()
            .filter(|line| {
                !(line.starts_with(&format!("{video},"))
                    && [passing, failing].contains(&second_of(line)))
            })
            .map(|line| format!("{line}\n"))
            .collect()
    };
    fs::write(&table, without(&ground_truth)).unwrap();
    let detections = workspace.annotations.path().join(
        "person_box_67091280_iou90/ava_detection_train_boxes_and_labels_include_negative_v2.2.csv",
    );
    let mut text = without(&fs::read_to_string(&detections).unwrap());
    text.push_str(&format!("{video},{passing:04},0.1,0.1,0.5,0.9,,0.95\n"));
    text.push_str(&format!("{video},{failing:04},0.1,0.1,0.5,0.9,,0.5\n"));
    fs::write(&detections, text).unwrap();
    assert_ran(&workspace.run_until(data, "validate", &[]));
    let plan: serde_json::Value =
        serde_json::from_slice(&fs::read(data.join("work/videos.json")).unwrap()).unwrap();
    let keyframes: Vec<u64> = plan["videos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|planned| planned["id"] == video)
        .unwrap()["keyframes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|second| second.as_u64().unwrap())
        .collect();
    assert!(keyframes.contains(&u64::from(passing)), "{keyframes:?}");
    assert!(!keyframes.contains(&u64::from(failing)), "{keyframes:?}");
    let config = fs::read_to_string(data.join("slowfast/ava.yaml")).unwrap();
    assert!(config.contains("DETECTION_SCORE_THRESH: 0.8"), "{config}");
}

/// Data on AVA's own clock (`synth --profile ava-times`, seed 5, where the detector names
/// keyframes with low-scoring boxes only) passes validation. Before, clip-frames failed 9 of
/// 3,249 keyframes, each one whose boxes PySlowFast skips.
#[test]
fn ava_timed_data_passes_validation() {
    let mirror = tempfile::tempdir().unwrap();
    let made = avaprep(mirror.path())
        .args([
            "-q",
            "synth",
            "--profile",
            "ava-times",
            "--seed",
            "5",
            "--out",
        ])
        .arg(mirror.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let server =
        avaprep_testbed::serve::start(avaprep_testbed::serve::ServeConfig::new(mirror.path()))
            .unwrap();
    let data = tempfile::tempdir().unwrap();
    let ran = avaprep(data.path())
        .args([
            "--json",
            "run",
            "pipelines/demo.toml",
            "--until",
            "validate",
        ])
        .arg("--set")
        .arg(format!(
            "dataset=\"{}\"",
            mirror.path().join("manifest.toml").display()
        ))
        .arg("--set")
        .arg(format!("fetch.base_url=[\"{}\"]", server.url()))
        .output()
        .unwrap();
    assert_ran(&ran);
    let report: serde_json::Value =
        serde_json::from_slice(&fs::read(data.path().join("slowfast/validation.json")).unwrap())
            .unwrap();
    let clips = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "clip-frames")
        .unwrap();
    assert_eq!(clips["status"], "passed", "{clips}");
    assert!(clips["checked"].as_u64().unwrap() > 3000, "{clips}");
}
