//! Nothing lost, nothing stale, nothing outside the data directory: outputs damaged after a
//! finished run are redone (exactly those), a changed annotation file is noticed, a stage never
//! builds on a failed one, hints name commands that work, and hostile manifests and plans are
//! refused before they touch anything outside the data directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use avaprep_testbed::serve::{self, ServeConfig, ServerHandle};

use crate::extract::{assert_complete, fetched_data, planned_videos};
use crate::support::{avaprep, demo_run, mirror, rewrite_keeping_time, stderr, stdout};

const FPS: &str = "5";

fn run_pipeline(data: &Path, server: &ServerHandle) -> std::process::Output {
    run_pipeline_with(data, server, &[])
}

/// `run pipelines/demo.toml --until validate` (the data stages) against the test mirror at 5 fps
/// and 240p, with `extra` arguments.
pub(crate) fn run_pipeline_with(
    data: &Path,
    server: &ServerHandle,
    extra: &[&str],
) -> std::process::Output {
    demo_run(data)
        .args(["--until", "validate"])
        .arg("--set")
        .arg(format!("fetch.base_url=[\"{}\"]", server.url()))
        .args(["--set", &format!("extract.fps={FPS}")])
        .args(extra)
        .output()
        .unwrap()
}

/// The `completed` count of a stage in a `--json run`'s records.
pub(crate) fn completed(output: &std::process::Output, stage: &str) -> u64 {
    stdout(output)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|record| record["type"] == "stage" && record["stage"] == stage)
        .and_then(|record| record["completed"].as_u64())
        .unwrap_or_else(|| panic!("no {stage} record in {}", stdout(output)))
}

fn frames_of(data: &Path, video: &str) -> Vec<PathBuf> {
    let mut frames: Vec<PathBuf> = fs::read_dir(data.join("frames").join(video))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    frames.sort();
    frames
}

fn modified(path: &Path) -> SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

/// Each way of damaging a finished extraction (a JPEG deleted, a JPEG zeroed, the index deleted,
/// the frame folder deleted) once left `run` saying "up to date": now it redoes exactly the
/// damaged videos and leaves the others' files untouched.
#[test]
fn run_redoes_exactly_the_videos_whose_outputs_changed() {
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    let first = run_pipeline(data.path(), &server);
    assert!(first.status.success(), "{}", stderr(&first));
    let videos = planned_videos(data.path());
    assert!(videos.len() >= 3, "{videos:?}");
    let untouched = &videos[2..];
    let untouched_times: Vec<SystemTime> = untouched
        .iter()
        .map(|video| modified(&frames_of(data.path(), video)[0]))
        .collect();

    type Damage = fn(&Path, &str);
    let rounds: [[(&str, Damage); 2]; 2] = [
        [
            ("a JPEG deleted", |data, video| {
                fs::remove_file(&frames_of(data, video)[3]).unwrap();
            }),
            ("a JPEG zeroed", |data, video| {
                fs::write(&frames_of(data, video)[1], b"").unwrap();
            }),
        ],
        [
            ("the index deleted", |data, video| {
                fs::remove_file(data.join("frame_index").join(format!("{video}.csv"))).unwrap();
            }),
            ("the frame folder deleted", |data, video| {
                fs::remove_dir_all(data.join("frames").join(video)).unwrap();
            }),
        ],
    ];
    for round in rounds {
        for ((what, damage), video) in round.iter().zip(&videos) {
            damage(data.path(), video);
            eprintln!("{video}: {what}");
        }
        let again = run_pipeline(data.path(), &server);
        assert!(again.status.success(), "{}", stderr(&again));
        assert_eq!(completed(&again, "extract"), 2, "{}", stdout(&again));
        assert!(
            stdout(&again).contains("changed since made"),
            "{}",
            stdout(&again)
        );
        for video in &videos {
            assert_complete(data.path(), video, 5.0);
        }
        let after = run_pipeline(data.path(), &server);
        assert_eq!(completed(&after, "extract"), 0, "{}", stdout(&after));
    }
    for (video, time) in untouched.iter().zip(untouched_times) {
        assert_eq!(
            modified(&frames_of(data.path(), video)[0]),
            time,
            "{video} was redone"
        );
    }
}

/// An annotation CSV edited after parsing was not noticed: `fetch` now restores the file the
/// manifest describes and parses again.
#[test]
fn an_edited_annotation_file_is_restored_and_parsed_again() {
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    let fetch = || {
        avaprep(data.path())
            .arg("fetch")
            .arg("--dataset")
            .arg(mirror().join("manifest.toml"))
            .args(["--base-url", &server.url(), "--annotations-only"])
            .output()
            .unwrap()
    };
    assert!(fetch().status.success());
    let csv = fs::read_dir(data.path().join("annotations"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.to_string_lossy().ends_with("_train_v2.2.csv"))
        .expect("a train ground truth");
    let original = fs::read(&csv).unwrap();
    let mut edited = original.clone();
    edited.extend_from_slice(b"not,a,valid,row\n");
    fs::write(&csv, &edited).unwrap();

    let again = fetch();
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(fs::read(&csv).unwrap(), original, "the edit is still there");
    let message = stderr(&again);
    assert!(message.contains("changed since made"), "{message}");
}

/// After parse failed (and so fetch-videos did not run), `extract` once ran on the previous plan
/// with rc 0: it now refuses, naming the command to run first.
#[test]
fn a_stage_never_runs_on_a_failed_upstream_stage() {
    let data = fetched_data();
    let failed = avaprep(data.path())
        .arg("fetch")
        .arg("--dataset")
        .arg(mirror().join("manifest.toml"))
        .args(["--base-url", "http://127.0.0.1:9/", "--video-list"])
        .arg(write_list(data.path(), "AAAAAAAAAAA"))
        .output()
        .unwrap();
    assert!(!failed.status.success());
    let extract = avaprep(data.path())
        .args(["extract", "--fps", FPS, "--height", "240"])
        .output()
        .unwrap();
    assert_eq!(extract.status.code(), Some(1), "{}", stdout(&extract));
    let report = stdout(&extract) + &stderr(&extract);
    assert!(
        report.contains(&format!(
            "fetch-videos was left undone by the last run, as a stage before it was not done; run `avaprep --data-dir {} fetch --dataset {} --base-url http://127.0.0.1:",
            data.path().display(),
            mirror().join("manifest.toml").display()
        )),
        "{report}"
    );
    assert!(!data.path().join("frames").exists(), "extract ran");
    // The command it names, with a reachable server, fixes it.
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let fetched = avaprep(data.path())
        .arg("fetch")
        .arg("--dataset")
        .arg(mirror().join("manifest.toml"))
        .args(["--base-url", &server.url()])
        .output()
        .unwrap();
    assert!(fetched.status.success(), "{}", stderr(&fetched));
    let extract = avaprep(data.path())
        .args(["extract", "--fps", FPS, "--height", "240"])
        .output()
        .unwrap();
    assert!(extract.status.success(), "{}", stderr(&extract));
}

fn write_list(data: &Path, id: &str) -> PathBuf {
    let path = data.join("list.txt");
    fs::write(&path, format!("{id}\n")).unwrap();
    path
}

/// Requests the server answered for videos since its last reset, by URL path.
fn video_requests(server: &ServerHandle) -> Vec<String> {
    server
        .stats()
        .paths
        .iter()
        .filter(|(path, stats)| {
            (path.contains("/trainval/") || path.contains("/test/")) && stats.requests > 0
        })
        .map(|(path, _)| path.clone())
        .collect()
}

/// After `--delete-videos-after-extract`, a video whose frames are to be made again needs its
/// file back. Its extraction names the command that brings it back, and that command downloads
/// that video and no other: the hint once named `fetch --verify`, which downloaded every deleted
/// video again (157 GB on AVA to mend one frame), and the lists kept the video whose frame was
/// gone. `--verify` leaves the videos deleted on purpose alone.
#[test]
fn a_deleted_video_needed_again_is_downloaded_again_alone() {
    let root = mirror();
    let server = serve::start(ServeConfig::new(root)).unwrap();
    let data = tempfile::tempdir().unwrap();
    let fetch = |extra: &[&str]| {
        avaprep(data.path())
            .arg("fetch")
            .arg("--dataset")
            .arg(root.join("manifest.toml"))
            .args(["--base-url", &server.url()])
            .args(extra)
            .output()
            .unwrap()
    };
    let extract = |extra: &[&str]| {
        avaprep(data.path())
            .args(["extract", "--fps", FPS, "--height", "240"])
            .args(extra)
            .output()
            .unwrap()
    };
    assert!(fetch(&[]).status.success());
    let deleting = extract(&["--delete-videos-after-extract"]);
    assert!(deleting.status.success(), "{}", stderr(&deleting));
    let videos = planned_videos(data.path());
    let needed = videos[0].clone();
    let frames = data.path().join("frames").join(&needed);
    let frame = fs::read_dir(&frames)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    fs::remove_file(frame).unwrap();

    let failed = extract(&[]);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    let message = stderr(&failed);
    assert!(message.contains(&format!("video {needed}:")), "{message}");
    let hint = crate::support::first_named(&message);
    assert!(hint.contains(" fetch --dataset "), "{message}");
    assert!(!hint.contains("--verify"), "{message}");
    // Until its frames are whole again, the lists leave it out.
    let lists = avaprep(data.path()).arg("lists").output().unwrap();
    assert!(lists.status.success(), "{}", stderr(&lists));
    let dropped = fs::read_to_string(data.path().join("slowfast/dropped_videos.txt")).unwrap();
    assert!(dropped.starts_with(&format!("{needed}: ")), "{dropped}");

    server.reset_stats();
    let fetched = crate::support::run_named(hint);
    assert!(fetched.status.success(), "{}", stderr(&fetched));
    let asked = video_requests(&server);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains(&needed), "{asked:?}");

    server.reset_stats();
    let verify = fetch(&["--verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    assert_eq!(video_requests(&server), Vec::<String>::new());
    let again = extract(&["--delete-videos-after-extract"]);
    assert!(again.status.success(), "{}", stderr(&again));
    for video in &videos {
        assert_complete(data.path(), video, 5.0);
    }
    server.reset_stats();
    assert!(fetch(&[]).status.success());
    assert_eq!(video_requests(&server), Vec::<String>::new());
}

/// A manifest whose video folder is `../../evil-out` once made `fetch` write every video outside
/// the data directory: it is refused before anything is written.
#[test]
fn a_hostile_manifest_folder_is_refused_before_anything_is_written() {
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let outer = tempfile::tempdir().unwrap();
    let data = outer.path().join("a/b/data");
    let text = fs::read_to_string(mirror().join("manifest.toml")).unwrap();
    let hostile = text
        .replace("[videos.trainval]", "[videos.\"../../evil-out\"]")
        .replace("videos = \"trainval\"", "videos = \"../../evil-out\"");
    assert_ne!(hostile, text, "the mirror's manifest changed shape");
    let manifest = outer.path().join("hostile.toml");
    fs::write(&manifest, hostile).unwrap();
    let output = avaprep(&data)
        .arg("fetch")
        .arg("--dataset")
        .arg(&manifest)
        .args(["--base-url", &server.url()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("not a folder name"), "{message}");
    assert!(message.contains("hostile.toml"), "{message}");
    assert!(!outer.path().join("a/evil-out").exists());
    assert!(!outer.path().join("a/b/evil-out").exists());
    assert!(!data.exists(), "something was written");
}

/// A plan (`work/videos.json`) whose folder leaves the data directory once made
/// `extract --delete-videos-after-extract` delete a file outside it.
#[test]
fn a_hostile_plan_folder_is_refused_and_deletes_nothing() {
    let data = fetched_data();
    let plan_path = data.path().join("work/videos.json");
    let mut plan: serde_json::Value =
        serde_json::from_slice(&fs::read(&plan_path).unwrap()).unwrap();
    // A folder beside the data directory, named after it so parallel runs do not meet.
    let beside = format!(
        "{}-victim",
        data.path().file_name().unwrap().to_string_lossy()
    );
    let video = &mut plan["videos"][0];
    video["folder"] = format!("../../{beside}").into();
    let file = video["file_name"].as_str().unwrap().to_string();
    fs::write(&plan_path, serde_json::to_vec(&plan).unwrap()).unwrap();
    let outside = data.path().parent().unwrap().join(&beside);
    let victim = outside.join(&file);
    fs::create_dir_all(&outside).unwrap();
    fs::write(&victim, b"not yours").unwrap();
    let output = avaprep(data.path())
        .args(["extract", "--fps", FPS, "--height", "240"])
        .arg("--delete-videos-after-extract")
        .output()
        .unwrap();
    let intact = fs::read(&victim).ok();
    let _ = fs::remove_dir_all(&outside);
    assert_eq!(
        intact.as_deref(),
        Some(&b"not yours"[..]),
        "the file outside was deleted"
    );
    assert!(!output.status.success());
    // Refused as a plan changed since parse made it, before it is read (or, read, as a folder
    // that is not a plain name).
    let message = format!("{}{}", stdout(&output), stderr(&output));
    assert!(
        message.contains("not a folder name") || message.contains("made files that changed since"),
        "{message}"
    );
    assert!(message.contains("videos.json"), "{message}");
    assert!(!data.path().join("frames").exists(), "extract ran");
}

/// One video whose download fails (the server refuses it) fails only that video: the run
/// extracts every other planned video, lists and validates them, and exits 1 naming the one;
/// the run after the server gives it adds it.
#[test]
fn a_failed_download_blocks_only_its_own_video() {
    let planned = {
        let data = fetched_data();
        planned_videos(data.path())
    };
    let failing = planned[0].clone();
    let (url, _) = crate::fetch::mirror_videos(mirror())
        .into_iter()
        .find(|(url, _)| url.contains(&failing))
        .unwrap();
    let mut config = ServeConfig::new(mirror());
    config.faults = serve::FaultPlan {
        rules: vec![serve::FaultRule {
            path: url,
            fault: serve::Fault::StatusFirst {
                code: 403,
                count: u64::MAX,
                retry_after: None,
            },
            first: None,
        }],
    };
    let server = serve::start(config).unwrap();
    let data = tempfile::tempdir().unwrap();
    let output = run_pipeline(data.path(), &server);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(stderr(&output).contains(&failing) || stdout(&output).contains(&failing));
    assert_eq!(
        completed(&output, "extract") as usize,
        planned.len() - 1,
        "{}",
        stdout(&output)
    );
    for video in &planned[1..] {
        assert_complete(data.path(), video, 5.0);
    }
    assert!(!data.path().join("frames").join(&failing).exists());
    // The whole-dataset stages run on the videos that have frames and say which they dropped.
    assert_eq!(completed(&output, "lists"), 1, "{}", stdout(&output));
    assert_eq!(completed(&output, "validate"), 1, "{}", stdout(&output));
    let dropped = fs::read_to_string(data.path().join("slowfast/dropped_videos.txt")).unwrap();
    assert!(dropped.starts_with(&format!("{failing}: ")), "{dropped}");
    let list = fs::read_to_string(data.path().join("frame_lists/train.csv")).unwrap()
        + &fs::read_to_string(data.path().join("frame_lists/val.csv")).unwrap();
    assert!(!list.contains(&failing));

    // Once the server gives the video, the next run adds it everywhere.
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let again = run_pipeline(data.path(), &server);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(completed(&again, "extract"), 1, "{}", stdout(&again));
    assert_eq!(completed(&again, "lists"), 1, "{}", stdout(&again));
    let list = fs::read_to_string(data.path().join("frame_lists/train.csv")).unwrap()
        + &fs::read_to_string(data.path().join("frame_lists/val.csv")).unwrap();
    assert!(list.contains(&failing));
}

/// The downloaded file of `video` under `videos/`.
fn downloaded_video(data: &Path, video: &str) -> PathBuf {
    let folders = fs::read_dir(data.join("videos")).unwrap();
    folders
        .flatten()
        .flat_map(|folder| fs::read_dir(folder.path()).unwrap().flatten())
        .map(|entry| entry.path())
        .find(|path| path.file_stem().is_some_and(|stem| stem == video))
        .unwrap_or_else(|| panic!("no downloaded file of {video}"))
}

/// A flipped bit keeps a frame's name, size and modification time: the cheap check cannot see
/// it, `run --verify` (every byte against the recorded hash) redoes exactly that video. A flipped
/// bit in a downloaded video is downloaded again (`run --verify` once left it as it was).
#[test]
fn verify_finds_a_flipped_bit_and_redoes_only_its_video() {
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    assert!(run_pipeline(data.path(), &server).status.success());
    let videos = planned_videos(data.path());
    let frame = frames_of(data.path(), &videos[1])[2].clone();
    let flip_a_bit = |bytes: &mut Vec<u8>| {
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x10;
    };
    rewrite_keeping_time(&frame, flip_a_bit);
    let bytes = fs::read(&frame).unwrap();
    // A downloaded video too (its sha256 is in the download records, not the stage's prints).
    let video = downloaded_video(data.path(), &videos[3]);
    let original = rewrite_keeping_time(&video, flip_a_bit);
    let cheap = run_pipeline(data.path(), &server);
    assert_eq!(completed(&cheap, "extract"), 0, "{}", stdout(&cheap));
    assert_eq!(completed(&cheap, "fetch-videos"), 0, "{}", stdout(&cheap));
    let verified = run_pipeline_with(data.path(), &server, &["--verify"]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    assert_eq!(
        completed(&verified, "fetch-videos"),
        1,
        "{}",
        stdout(&verified)
    );
    assert_eq!(
        fs::read(&video).unwrap(),
        original,
        "the video was downloaded again"
    );
    // Its bytes are those its frames were made from: they stay.
    assert_eq!(completed(&verified, "extract"), 1, "{}", stdout(&verified));
    assert!(
        stdout(&verified).contains("bytes differ"),
        "{}",
        stdout(&verified)
    );
    assert_ne!(fs::read(&frame).unwrap(), bytes, "the frame was made again");
}

/// A disk that fills: a fetch and an extraction fail naming the file and saying what to do (a
/// hint, once), leave no half-made frames taking the space, and once there is room the same
/// commands finish, resuming the partial downloads and keeping the videos done. The data
/// directory is a small tmpfs mounted in a namespace of the test's own (`unshare`), resized
/// between the steps.
#[test]
fn a_full_disk_is_said_and_the_same_commands_finish_once_there_is_room() {
    let probe_disk = tempfile::tempdir().unwrap();
    let probe = std::process::Command::new("unshare")
        .args(["-Urm", "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(probe_disk.path())
        .output();
    if !probe.is_ok_and(|output| output.status.success()) {
        eprintln!(
            "SKIPPED: this system lets no test mount a small disk (`unshare -Urm mount -t tmpfs` failed)"
        );
        return;
    }
    let root = mirror();
    let videos: u64 = crate::fetch::mirror_videos(root)
        .iter()
        .map(|(_, path)| fs::metadata(path).unwrap().len())
        .sum();
    let server = serve::start(ServeConfig::new(root)).unwrap();
    let disk = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let script = r#"
set -u
mount -t tmpfs -o "size=$SMALL" tmpfs "$DISK" || exit 90
step() { name=$1; shift; "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; echo $? >"$OUT/$name.rc"; }
fetch() { "$AVAPREP" --data-dir "$DISK/data" fetch --dataset "$MANIFEST" --base-url "$URL" --split train,val,test; }
step fetch-full fetch
mount -o remount,"size=$BIG" "$DISK"
step fetch-again fetch
# Room for the state files and a few frames, not for every frame.
used=$(df --output=used -B1 "$DISK" | tail -1)
mount -o remount,"size=$((used + ROOM))" "$DISK"
step extract-full "$AVAPREP" --data-dir "$DISK/data" extract
ls -a "$DISK/data/frames" >"$OUT/frames-after-full"
mount -o remount,"size=$BIG" "$DISK"
step extract-again "$AVAPREP" --data-dir "$DISK/data" extract
cp -a "$DISK/data" "$OUT/data"
"#;
    let ran = std::process::Command::new("unshare")
        .args(["-Urm", "bash", "-c", script])
        .env("AVAPREP", env!("CARGO_BIN_EXE_avaprep"))
        .env("DISK", disk.path())
        .env("OUT", out.path())
        .env("MANIFEST", root.join("manifest.toml"))
        .env("URL", server.url())
        .env("SMALL", (videos / 2).to_string())
        .env("ROOM", (1 << 20).to_string())
        .env("BIG", (4 * videos + (64 << 20)).to_string())
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", stderr(&ran));
    let read = |name: &str| fs::read_to_string(out.path().join(name)).unwrap();
    let code = |step: &str| read(&format!("{step}.rc")).trim().to_string();
    let hint = "hint: the disk (or your quota on it) is full: free space on it";
    for step in ["fetch-full", "extract-full"] {
        let errors = read(&format!("{step}.err"));
        assert_eq!(code(step), "1", "{step}: {errors}");
        assert!(
            errors.contains("No space left on device"),
            "{step}: {errors}"
        );
        assert_eq!(errors.matches(hint).count(), 1, "{step}: {errors}");
        // The stage stops beginning items once its state cannot be saved: said once.
        assert!(
            errors.matches("beginning no more items").count() <= 1,
            "{step}: {errors}"
        );
    }
    assert_eq!(code("fetch-again"), "0", "{}", read("fetch-again.err"));
    // What the full disk had taken was kept: a download it cut short resumed.
    let again = read("fetch-again.out");
    let resumed: u32 = again
        .split(" resumed")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no resumed count: {again}"));
    assert!(resumed >= 1, "{again}");
    let listing = read("frames-after-full");
    assert!(listing.lines().any(|name| name == "."), "no frames folder");
    let partial: Vec<String> = listing
        .lines()
        .filter(|name| name.ends_with(".partial"))
        .map(String::from)
        .collect();
    assert!(partial.is_empty(), "half-made frames left: {partial:?}");
    assert_eq!(code("extract-again"), "0", "{}", read("extract-again.err"));
    let data = out.path().join("data");
    for video in planned_videos(&data) {
        crate::extract::assert_complete(&data, &video, FPS.parse().unwrap());
    }
}

/// `[extract] delete_videos_after_extract` set in a pipeline whose videos were extracted before
/// it was: the run deletes their downloads (as `extract --delete-videos-after-extract` does),
/// keeps the frames whole and downloads none of them again.
#[test]
fn a_pipeline_asked_later_to_delete_extracted_videos_deletes_them() {
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let data = tempfile::tempdir().unwrap();
    let kept = run_pipeline(data.path(), &server);
    assert!(kept.status.success(), "{}", stderr(&kept));
    let videos = data.path().join("videos");
    assert!(!crate::extract::walk_files(&videos).is_empty());
    let deleting = ["--set", "extract.delete_videos_after_extract=true"];
    let deleted = run_pipeline_with(data.path(), &server, &deleting);
    assert!(deleted.status.success(), "{}", stderr(&deleted));
    let left = crate::extract::walk_files(&videos);
    assert!(left.is_empty(), "videos left: {left:?}");
    for video in planned_videos(data.path()) {
        assert_complete(data.path(), &video, FPS.parse().unwrap());
    }
    server.reset_stats();
    let again = run_pipeline_with(data.path(), &server, &deleting);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(completed(&again, "extract"), 0, "{}", stdout(&again));
    assert_eq!(
        crate::fetch::video_requests(&server),
        0,
        "a deleted video was downloaded again"
    );
}
