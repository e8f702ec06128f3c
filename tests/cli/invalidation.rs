//! A change redoes exactly what it touches: each video's frames depend on its own plan entry,
//! its file and the extraction parameters, not on the rest of the plan. Run on the synthetic
//! mirror's videos already on disk, with its annotations in a folder the tests edit; each step
//! asserts which videos were extracted and that every other video's frames kept their bytes and
//! modification times.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::SystemTime;

use crate::extract::fetched_data;
use crate::nothing_lost::completed;
use crate::support::{avaprep, demo_run, mirror, named_command, run_named, stderr, stdout};

/// Each video's frame files with their bytes and modification times.
type Snapshot = BTreeMap<String, BTreeMap<String, (Vec<u8>, SystemTime)>>;

fn snapshot(data: &Path) -> Snapshot {
    let mut videos = Snapshot::new();
    let Ok(folders) = fs::read_dir(data.join("frames")) else {
        return videos;
    };
    for folder in folders {
        let folder = folder.unwrap().path();
        let frames = videos
            .entry(folder.file_name().unwrap().to_string_lossy().into_owned())
            .or_default();
        for frame in fs::read_dir(&folder).unwrap() {
            let frame = frame.unwrap().path();
            let modified = fs::metadata(&frame).unwrap().modified().unwrap();
            frames.insert(
                frame.file_name().unwrap().to_string_lossy().into_owned(),
                (fs::read(&frame).unwrap(), modified),
            );
        }
    }
    videos
}

/// The videos whose frames differ (in bytes or times) between two snapshots, or are new.
fn touched(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    after
        .iter()
        .filter(|(video, frames)| before.get(*video) != Some(frames))
        .map(|(video, _)| video.clone())
        .collect()
}

/// The mirror's videos (hard links in a folder of the test's own), its annotations in a folder
/// the test may edit, and its manifest without the train table's checksum (so an edit of it is
/// accepted, as a user's fixed annotation file would be).
pub(crate) struct Workspace {
    pub(crate) videos: tempfile::TempDir,
    pub(crate) annotations: tempfile::TempDir,
    pub(crate) manifest: PathBuf,
    _manifest_dir: tempfile::TempDir,
}

pub(crate) const TRAIN_TABLE: &str = "ava_train_v2.2.csv";

pub(crate) fn workspace() -> Workspace {
    let fetched = fetched_data();
    let videos = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(mirror().join("ava-dataset/trainval")).unwrap() {
        let path = entry.unwrap().path();
        fs::hard_link(&path, videos.path().join(path.file_name().unwrap())).unwrap();
    }
    let annotations = tempfile::tempdir().unwrap();
    copy_tree(&fetched.path().join("annotations"), annotations.path());
    let manifest_dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(mirror().join("manifest.toml")).unwrap();
    let mut value: toml::Table = text.parse().unwrap();
    let contents = value["annotations"]["contents"].as_array_mut().unwrap();
    contents.retain(|file| file["name"].as_str() != Some(TRAIN_TABLE));
    let manifest = manifest_dir.path().join("manifest.toml");
    fs::write(&manifest, toml::to_string(&value).unwrap()).unwrap();
    Workspace {
        videos,
        annotations,
        manifest,
        _manifest_dir: manifest_dir,
    }
}

pub(crate) fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            fs::copy(&path, &target).unwrap();
        }
    }
}

impl Workspace {
    /// The demo pipeline through `lists` on the videos and annotations of this workspace.
    pub(crate) fn run(&self, data: &Path, extra: &[&str]) -> Output {
        self.run_until(data, "lists", extra)
    }

    /// The demo pipeline through `stage` on the videos and annotations of this workspace.
    pub(crate) fn run_until(&self, data: &Path, stage: &str, extra: &[&str]) -> Output {
        demo_run(data)
            .args(["--until", stage])
            .args(self.sets())
            .args(extra)
            .output()
            .unwrap()
    }

    /// `avaprep status` of the demo pipeline on this workspace, as [`Self::run`] runs it.
    pub(crate) fn status(&self, data: &Path, extra: &[&str]) -> Output {
        crate::support::avaprep(data)
            .args(["status", "pipelines/demo.toml"])
            .args(["--set", "extract.height=240"])
            .args(self.sets())
            .args(extra)
            .output()
            .unwrap()
    }

    /// The pipeline's keys that point it at this workspace.
    fn sets(&self) -> Vec<String> {
        let set = |key: &str, path: &Path| format!("{key}=\"{}\"", path.display());
        [
            set("dataset", &self.manifest),
            set("fetch.videos", self.videos.path()),
            set("fetch.annotations", self.annotations.path()),
        ]
        .into_iter()
        .flat_map(|pair| ["--set".to_string(), pair])
        .collect()
    }

    /// The train table's rows of its first video, and that video.
    fn first_train_video(&self) -> (String, Vec<String>) {
        let text = fs::read_to_string(self.annotations.path().join(TRAIN_TABLE)).unwrap();
        let video = text.lines().next().unwrap().split(',').next().unwrap();
        let rows = text
            .lines()
            .filter(|line| line.starts_with(&format!("{video},")))
            .map(str::to_string)
            .collect();
        (video.to_string(), rows)
    }
}

fn planned(data: &Path, split: &str) -> Vec<String> {
    let plan: serde_json::Value =
        serde_json::from_slice(&fs::read(data.join("work/videos.json")).unwrap()).unwrap();
    plan["videos"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|video| video["split"] == split)
        .map(|video| video["id"].as_str().unwrap().to_string())
        .collect()
}

fn listed(data: &Path) -> String {
    ["train", "val"]
        .iter()
        .filter_map(|split| fs::read_to_string(data.join(format!("frame_lists/{split}.csv"))).ok())
        .collect()
}

pub(crate) fn assert_ran(output: &Output) {
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(output),
        stderr(output)
    );
}

#[test]
fn a_change_of_the_plan_redoes_exactly_the_videos_it_touches() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let data = data.path();

    // Train first: its videos only.
    let first = workspace.run(data, &["--set", "splits=[\"train\"]"]);
    assert_ran(&first);
    let train = planned(data, "train");
    assert!(!train.is_empty());
    assert_eq!(completed(&first, "extract"), train.len() as u64);
    let before = snapshot(data);

    // A split added: the val videos are extracted, the train videos' frames are left alone.
    let both = workspace.run(data, &[]);
    assert_ran(&both);
    let val = planned(data, "val");
    assert!(!val.is_empty());
    assert_eq!(completed(&both, "extract"), val.len() as u64);
    let after = snapshot(data);
    let mut expected = val.clone();
    expected.sort();
    assert_eq!(touched(&before, &after), expected);

    // One keyframe added to one video: that video only.
    let (video, rows) = workspace.first_train_video();
    let seconds: Vec<u32> = rows
        .iter()
        .map(|row| row.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    let new_second = (902..=927)
        .find(|second| !seconds.contains(second))
        .unwrap();
    let mut fields: Vec<&str> = rows[0].split(',').collect();
    let second_text = new_second.to_string();
    fields[1] = &second_text;
    let table = workspace.annotations.path().join(TRAIN_TABLE);
    let mut text = fs::read_to_string(&table).unwrap();
    text.push_str(&fields.join(","));
    text.push('\n');
    fs::write(&table, text).unwrap();
    let before = after;
    let edited = workspace.run(data, &[]);
    assert_ran(&edited);
    assert_eq!(completed(&edited, "extract"), 1, "{}", stdout(&edited));
    let after = snapshot(data);
    assert_eq!(touched(&before, &after), std::slice::from_ref(&video));

    // A video removed from the plan: nothing extracted, the lists leave it, its frames are kept
    // and reported; named again, it is reused as it is.
    let removed = &val[0];
    let kept: Vec<String> = train.iter().chain(&val[1..]).cloned().collect();
    let list = data.join("video_list.txt");
    fs::write(&list, kept.join("\n")).unwrap();
    let before = after;
    let without = workspace.run(
        data,
        &["--set", &format!("video_list=\"{}\"", list.display())],
    );
    assert_ran(&without);
    assert_eq!(completed(&without, "extract"), 0);
    assert!(
        !listed(data).contains(removed.as_str()),
        "{removed} still listed: {}",
        stdout(&without)
    );
    assert!(
        stdout(&without).contains(&format!("1 item no longer planned keeps what it made, left out of what follows (a plan that names it again reuses it): {removed}")),
        "{}",
        stdout(&without)
    );
    assert_eq!(snapshot(data), before, "frames of the removed video kept");
    let again = workspace.run(data, &[]);
    assert_ran(&again);
    assert_eq!(completed(&again, "extract"), 0);
    assert!(listed(data).contains(removed.as_str()));
    assert_eq!(snapshot(data), before);

    // Another frame rate: every video.
    let faster = workspace.run(data, &["--set", "extract.fps=10"]);
    assert_ran(&faster);
    assert_eq!(
        completed(&faster, "extract"),
        (train.len() + val.len()) as u64
    );
    assert_eq!(
        touched(&before, &snapshot(data)).len(),
        train.len() + val.len()
    );
}

/// The folder of videos is an input like any other: a video that appears there is planned and
/// extracted, a replaced one is extracted again, a deleted one is reported missing.
#[test]
fn videos_on_disk_are_checked_again_on_every_run() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    let mut files: Vec<PathBuf> = fs::read_dir(workspace.videos.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    let late = files[0].clone();
    let aside = data.join("aside");
    fs::create_dir_all(&aside).unwrap();
    fs::rename(&late, aside.join(late.file_name().unwrap())).unwrap();
    let late_id = late.file_stem().unwrap().to_string_lossy().into_owned();

    let first = workspace.run(data, &[]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    assert!(
        stderr(&first).contains(&format!("no {late_id}.mkv")),
        "{}",
        stderr(&first)
    );
    let before = snapshot(data);
    assert!(!before.contains_key(&late_id));

    // It appears: planned and extracted, the others left alone.
    fs::rename(aside.join(late.file_name().unwrap()), &late).unwrap();
    let appeared = workspace.run(data, &[]);
    assert_ran(&appeared);
    assert_eq!(completed(&appeared, "extract"), 1, "{}", stdout(&appeared));
    let after = snapshot(data);
    assert_eq!(touched(&before, &after), std::slice::from_ref(&late_id));
    assert!(listed(data).contains(late_id.as_str()));

    // Another file under the same name (another size): extracted again.
    let replaced = &files[1];
    let replaced_id = replaced.file_stem().unwrap().to_string_lossy().into_owned();
    let other = files
        .iter()
        .find(|file| file.extension() == replaced.extension() && *file != replaced)
        .unwrap_or(&files[2]);
    let bytes = fs::read(other).unwrap();
    assert_ne!(bytes.len() as u64, fs::metadata(replaced).unwrap().len());
    fs::remove_file(replaced).unwrap();
    fs::write(replaced, bytes).unwrap();
    let status = avaprep(data)
        .args(["status", "pipelines/demo.toml", "--set"])
        .arg(format!("dataset=\"{}\"", workspace.manifest.display()))
        .args(["--set", "extract.height=240"])
        .arg("--set")
        .arg(format!(
            "fetch.videos=\"{}\"",
            workspace.videos.path().display()
        ))
        .arg("--set")
        .arg(format!(
            "fetch.annotations=\"{}\"",
            workspace.annotations.path().display()
        ))
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", stderr(&status));
    let table = stdout(&status);
    let line = |stage: &str| {
        table
            .lines()
            .find(|line| line.starts_with(stage))
            .unwrap_or_else(|| panic!("no {stage} in {table}"))
            .to_string()
    };
    assert!(line("fetch-videos").contains("stale"), "{table}");
    let before = after;
    let redone = workspace.run(data, &[]);
    assert_ran(&redone);
    assert_eq!(completed(&redone, "extract"), 1, "{}", stdout(&redone));
    assert_eq!(touched(&before, &snapshot(data)), [replaced_id]);

    // Deleted: reported missing, by name.
    fs::remove_file(&late).unwrap();
    let deleted = workspace.run(data, &[]);
    assert_eq!(deleted.status.code(), Some(1), "{}", stderr(&deleted));
    assert!(
        stderr(&deleted).contains(&format!("no {late_id}.mkv")),
        "{}",
        stderr(&deleted)
    );
}

/// A view no longer asked for goes: after a run with the pytorchvideo and mmaction2 views, a run
/// without them (and at another rate) leaves no `pytorchvideo/` or `mmaction2/` pointing at the
/// old frames.
#[test]
fn a_view_no_longer_asked_for_is_removed() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let with_view = workspace.run(
        data.path(),
        &[
            "--set",
            "lists.pytorchvideo=true",
            "--set",
            "lists.mmaction2=true",
        ],
    );
    assert_ran(&with_view);
    assert!(
        data.path()
            .join("pytorchvideo/frame_lists/train.csv")
            .is_file()
    );
    assert!(data.path().join("mmaction2/ava.py").is_file());
    let without = workspace.run(data.path(), &["--set", "extract.fps=4"]);
    assert_ran(&without);
    assert!(!data.path().join("pytorchvideo").exists());
    assert!(!data.path().join("mmaction2").exists());
}

/// A single command builds on nothing stale: after an annotation file is edited, `extract` and
/// `lists` refuse, naming the stage that no longer matches and the command that redoes it, as
/// `status` says; once that command ran, they are up to date again.
#[test]
fn single_commands_refuse_a_stale_upstream_as_status_reports_it() {
    let data = fetched_data();
    let data = data.path();
    for args in [&["extract", "--height", "240"][..], &["lists"][..]] {
        let output = avaprep(data).args(args).output().unwrap();
        assert_ran(&output);
    }
    let table = data.join("annotations").join(TRAIN_TABLE);
    let mut text = fs::read(&table).unwrap();
    text.extend_from_slice(b"\n");
    fs::write(&table, text).unwrap();
    for args in [&["extract", "--height", "240"][..], &["lists"][..]] {
        let output = avaprep(data).args(args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            stdout(&output)
        );
        let said = stdout(&output);
        assert!(
            said.contains("not run: ")
                && said.contains("fetch-annotations made files that changed since")
                && said.contains(&format!(
                    "run `avaprep --data-dir {} fetch --dataset {} --base-url http://127.0.0.1:",
                    data.display(),
                    mirror().join("manifest.toml").display()
                )),
            "{args:?}: {said}"
        );
    }
    let status = avaprep(data)
        .args(["status", "pipelines/demo.toml", "--set"])
        .arg(format!(
            "dataset=\"{}\"",
            mirror().join("manifest.toml").display()
        ))
        .args(["--set", "extract.height=240"])
        .output()
        .unwrap();
    let table = stdout(&status);
    let fetch_line = table
        .lines()
        .find(|line| line.starts_with("fetch-annotations"))
        .unwrap();
    assert!(fetch_line.contains("stale"), "{table}");
    let server =
        avaprep_testbed::serve::start(avaprep_testbed::serve::ServeConfig::new(mirror())).unwrap();
    let fetch = avaprep(data)
        .arg("fetch")
        .arg("--dataset")
        .arg(mirror().join("manifest.toml"))
        .args(["--base-url", &server.url()])
        .output()
        .unwrap();
    assert_ran(&fetch);
    for args in [&["extract", "--height", "240"][..], &["lists"][..]] {
        let output = avaprep(data).args(args).output().unwrap();
        assert_ran(&output);
        // Nothing made again: the annotations are back as the stages were made from them.
        let said = stdout(&output);
        assert!(
            said.contains("up to date") || said.contains("(0 now,"),
            "{args:?}: {said}"
        );
    }
}

/// Two runs started at once on one folder: one does the work, the other refuses naming it (or
/// finds it done); two shards of the README's Slurm example started at once both finish, the
/// annotations downloaded once; afterwards a run finds everything as one run leaves it.
#[test]
fn concurrent_runs_and_shards_share_a_folder_safely() {
    let server =
        avaprep_testbed::serve::start(avaprep_testbed::serve::ServeConfig::new(mirror())).unwrap();
    let command = |data: &Path, extra: &[&str]| {
        let mut command = demo_run(data);
        command
            .args(["--until", "lists"])
            .arg("--set")
            .arg(format!("fetch.base_url=[\"{}\"]", server.url()))
            .args(extra);
        command
    };
    let data = tempfile::tempdir().unwrap();
    let both: Vec<std::process::Child> = (0..2)
        .map(|_| {
            command(data.path(), &[])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = both
        .into_iter()
        .map(|child| child.wait_with_output().unwrap())
        .collect();
    for output in &outputs {
        let refused = stderr(output).contains("is in use by `avaprep");
        assert!(
            output.status.success() || (output.status.code() == Some(1) && refused),
            "{}\n{}",
            stdout(output),
            stderr(output)
        );
    }
    assert!(outputs.iter().any(|output| output.status.success()));
    let again = command(data.path(), &[]).output().unwrap();
    assert_ran(&again);
    for stage in [
        "fetch-annotations",
        "parse",
        "fetch-videos",
        "extract",
        "lists",
    ] {
        assert_eq!(completed(&again, stage), 0, "{stage}: {}", stdout(&again));
    }

    let shared = tempfile::tempdir().unwrap();
    let shards: Vec<std::process::Child> = ["1/2", "2/2"]
        .iter()
        .map(|shard| {
            command(shared.path(), &["--shard", shard])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for shard in shards {
        let output = shard.wait_with_output().unwrap();
        assert_ran(&output);
    }
    // Before the combining run, `status` counts the shards' work (it once showed fetch-videos
    // and extract pending), and `extract` alone redoes none of it (it once redid every video:
    // the videos' records were in the shards' files only).
    let mut status = avaprep(shared.path());
    status
        .args(["--json", "status", "pipelines/demo.toml"])
        .arg("--set")
        .arg(format!(
            "dataset=\"{}\"",
            mirror().join("manifest.toml").display()
        ))
        .args(["--set", "extract.height=240"])
        .arg("--set")
        .arg(format!("fetch.base_url=[\"{}\"]", server.url()));
    let status = status.output().unwrap();
    assert!(status.status.success(), "{}", stderr(&status));
    let conditions: std::collections::BTreeMap<String, String> = stdout(&status)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|record| record["type"] == "stage_status")
        .map(|record| {
            let stage = record["stage"].as_str().unwrap().to_string();
            (stage, record["condition"].as_str().unwrap().to_string())
        })
        .collect();
    for stage in ["fetch-videos", "extract"] {
        assert_eq!(conditions[stage], "done", "{stage}: {}", stdout(&status));
    }
    let alone = avaprep(shared.path())
        .args(["--json", "extract", "--height", "240"])
        .output()
        .unwrap();
    assert_ran(&alone);
    assert_eq!(completed(&alone, "extract"), 0, "{}", stdout(&alone));
    let combined = command(shared.path(), &[]).output().unwrap();
    assert_ran(&combined);
    for stage in ["fetch-annotations", "parse", "fetch-videos", "extract"] {
        assert_eq!(
            completed(&combined, stage),
            0,
            "{stage}: {}",
            stdout(&combined)
        );
    }
    assert_eq!(completed(&combined, "lists"), 1);
    assert_eq!(
        fs::read(shared.path().join("frame_lists/train.csv")).unwrap(),
        fs::read(data.path().join("frame_lists/train.csv")).unwrap()
    );

    // One shard of two run: `lists` waits for the other, and names the pipeline run that does
    // the rest with the pipeline's settings (`extract` alone took its defaults and every video,
    // the other shard's not downloaded among them). It once listed half the videos.
    let half = tempfile::tempdir().unwrap();
    assert_ran(&command(half.path(), &["--shard", "1/2"]).output().unwrap());
    let early = avaprep(half.path()).arg("lists").output().unwrap();
    assert_eq!(early.status.code(), Some(1), "{}", stdout(&early));
    let said = stdout(&early) + &stderr(&early);
    assert!(said.contains("--shard 2/2 has not run yet"), "{said}");
    let named = named_command(&said);
    assert!(
        named.contains(" run pipelines/demo.toml ") && named.ends_with("--until extract"),
        "{named}"
    );
    assert_ran(&run_named(&named));
    let listed = avaprep(half.path()).arg("lists").output().unwrap();
    assert_ran(&listed);
    assert_eq!(
        fs::read(half.path().join("frame_lists/train.csv")).unwrap(),
        fs::read(data.path().join("frame_lists/train.csv")).unwrap()
    );
}
