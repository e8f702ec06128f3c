//! Videos already on disk, no server: `extract --videos DIR` on the mirror's own files, and
//! `run` on pre-cut clips (`[fetch] videos`, `video_start`: the file's time 0 is the segment's
//! start), each against the fetched path's frames, byte for byte.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::extract::{fetched_data, planned_videos};
use crate::support::{avaprep, cut_video, demo_run, mirror, stderr, stdout};

/// Segment start of the synthetic mirror's quick profile, on the dataset's clock (AVA's)...
const START: f64 = 900.0;
/// ...and in its files' seconds: their time 0 is the dataset's second 895.
const FILE_START: f64 = 5.0;

/// Every frame file of a data directory, by video and name, with its bytes.
fn frames(data: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut frames = BTreeMap::new();
    for video in fs::read_dir(data.join("frames")).unwrap() {
        let video = video.unwrap().path();
        for frame in fs::read_dir(&video).unwrap() {
            let frame = frame.unwrap().path();
            let key = format!(
                "{}/{}",
                video.file_name().unwrap().to_string_lossy(),
                frame.file_name().unwrap().to_string_lossy()
            );
            frames.insert(key, fs::read(&frame).unwrap());
        }
    }
    frames
}

/// A video's index rows as (frame, target, source, width, height, gap) text and the file times.
fn index(data: &Path, video: &str) -> (Vec<String>, Vec<f64>) {
    let text = fs::read_to_string(data.join("frame_index").join(format!("{video}.csv"))).unwrap();
    let mut rows = Vec::new();
    let mut file_times = Vec::new();
    for line in text.lines().skip(1) {
        let (dataset, file_time) = line.rsplit_once(',').unwrap();
        rows.push(dataset.to_string());
        file_times.push(file_time.parse().unwrap());
    }
    (rows, file_times)
}

fn source_times(rows: &[String]) -> Vec<f64> {
    rows.iter()
        .map(|row| row.split(',').nth(2).unwrap().parse().unwrap())
        .collect()
}

/// The fetched path, extracted: the reference every on-disk path must equal.
fn fetched_and_extracted() -> tempfile::TempDir {
    let data = fetched_data();
    let output = avaprep(data.path())
        .args(["extract", "--height", "240"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    data
}

#[test]
fn videos_on_disk_give_the_frames_of_the_fetched_path() {
    let fetched = fetched_and_extracted();
    let on_disk = tempfile::tempdir().unwrap();
    let output = avaprep(on_disk.path())
        .args(["extract", "--height", "240", "--videos"])
        .arg(mirror().join("ava-dataset/trainval"))
        .arg("--annotations")
        .arg(fetched.path().join("annotations"))
        .arg("--dataset")
        .arg(mirror().join("manifest.toml"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("already on disk (nothing downloaded)"),
        "{}",
        stdout(&output)
    );
    assert!(
        !on_disk.path().join("videos").exists(),
        "nothing downloaded"
    );
    assert!(
        !on_disk.path().join("downloads").exists(),
        "nothing downloaded"
    );
    assert_eq!(
        planned_videos(on_disk.path()),
        planned_videos(fetched.path())
    );
    let reference = frames(fetched.path());
    assert!(reference.len() > 100, "{} frames", reference.len());
    assert!(
        frames(on_disk.path()) == reference,
        "the frames differ from the fetched path's"
    );
    for video in planned_videos(fetched.path()) {
        let (rows, file_times) = index(on_disk.path(), &video);
        assert_eq!(rows, index(fetched.path(), &video).0, "{video}");
        // Whole videos: the file's clock is the dataset's, from its second 895.
        for (source, file_time) in source_times(&rows).iter().zip(&file_times) {
            assert!(
                (source - file_time - (START - FILE_START)).abs() < 1e-9,
                "{video}"
            );
        }
    }
    // An annotation file on disk that is not the one the manifest lists is refused, named.
    let edited = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(fetched.path().join("annotations")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            fs::copy(&path, edited.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let copied_boxes = fetched.path().join("annotations/person_box_67091280_iou90");
    let boxes = edited.path().join("person_box_67091280_iou90");
    fs::create_dir_all(&boxes).unwrap();
    for entry in fs::read_dir(&copied_boxes).unwrap() {
        let path = entry.unwrap().path();
        fs::copy(&path, boxes.join(path.file_name().unwrap())).unwrap();
    }
    let label_map = edited.path().join("ava_action_list_v2.2.pbtxt");
    let mut text = fs::read(&label_map).unwrap();
    text.extend_from_slice(b"\n");
    fs::write(&label_map, text).unwrap();
    let refusing = tempfile::tempdir().unwrap();
    let refused = avaprep(refusing.path())
        .args(["extract", "--videos"])
        .arg(mirror().join("ava-dataset/trainval"))
        .arg("--annotations")
        .arg(edited.path())
        .arg("--dataset")
        .arg(mirror().join("manifest.toml"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("ava_action_list_v2.2.pbtxt")
            && stderr(&refused).contains("not the official file")
            && stderr(&refused)
                .contains("drop ava_action_list_v2.2.pbtxt's line from its `contents` list"),
        "{}",
        stderr(&refused)
    );
    // Refused where it is: never copied over the data directory's copy.
    assert!(
        !refusing
            .path()
            .join("annotations/ava_action_list_v2.2.pbtxt")
            .exists()
    );
    // A missing video folder is an error naming it, before anything is planned.
    let missing = avaprep(tempfile::tempdir().unwrap().path())
        .args(["extract", "--videos", "/no/such/folder", "--annotations"])
        .arg(fetched.path().join("annotations"))
        .arg("--dataset")
        .arg(mirror().join("manifest.toml"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("/no/such/folder"),
        "{}",
        stderr(&missing)
    );
}

/// Clips cut at the segment's start, as PySlowFast's `videos_15min/` are cut at AVA second 900:
/// with `video_start` the frames are those of the whole videos; the index keeps the dataset's
/// clock and records the file's. A video the annotations name that the folder lacks is
/// reported missing and dropped; the others go on through lists and validation.
#[test]
fn pre_cut_clips_run_through_the_pipeline_with_the_fetched_frames() {
    let fetched = fetched_and_extracted();
    let plan: serde_json::Value =
        serde_json::from_slice(&fs::read(fetched.path().join("work/videos.json")).unwrap())
            .unwrap();
    let clips = tempfile::tempdir().unwrap();
    let mut cut = Vec::new();
    for video in plan["videos"].as_array().unwrap() {
        let id = video["id"].as_str().unwrap();
        let (rows, _) = index(fetched.path(), id);
        // Only a video with a source frame exactly at the cut keeps its clock when cut: a clip's
        // first frame is its time 0, as for every pre-cut clip.
        if source_times(&rows)[0] != START || cut.len() == 2 {
            continue;
        }
        let source = mirror()
            .join("ava-dataset/trainval")
            .join(video["file_name"].as_str().unwrap());
        // Lossless, no B-frames: the cut's pixels are the source's, its first frame at time 0.
        let lossless = [
            &crate::support::LOSSLESS_H264[..],
            &["-fps_mode", "passthrough"],
        ]
        .concat();
        let out = clips.path().join(format!("{id}.mp4"));
        cut_video(&source, FILE_START, &lossless, &out);
        cut.push(id.to_string());
    }
    assert!(
        !cut.is_empty(),
        "the mirror has a video with a frame at {START} s"
    );

    let data = tempfile::tempdir().unwrap();
    let on_disk = [
        format!("fetch.videos=\"{}\"", clips.path().display()),
        format!("fetch.video_start={START}"),
        format!(
            "fetch.annotations=\"{}\"",
            fetched.path().join("annotations").display()
        ),
    ];
    let run = |extra: &[&str]| {
        demo_run(data.path())
            .args(["--until", "validate"])
            .args(on_disk.iter().flat_map(|set| ["--set", set]))
            .args(extra)
            .output()
            .unwrap()
    };
    // Each stage's condition as `status` says it, for the same pipeline.
    let status_conditions = || -> BTreeMap<String, String> {
        let dataset = format!("dataset=\"{}\"", mirror().join("manifest.toml").display());
        let output = avaprep(data.path())
            .args(["--json", "status", "pipelines/demo.toml", "--set", &dataset])
            .args(["--set", "extract.height=240"])
            .args(on_disk.iter().flat_map(|set| ["--set", set]))
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|line| {
                let condition = line["condition"].as_str()?.to_string();
                Some((line["stage"].as_str()?.to_string(), condition))
            })
            .collect()
    };
    let first = run(&[]);
    // The videos not in the folder are newly missing: reported, and the run says so (exit 1).
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let others: Vec<String> = planned_videos(fetched.path())
        .into_iter()
        .filter(|id| !cut.contains(id))
        .collect();
    for id in &others {
        let named = format!(
            "no {id}.mkv, {id}.mp4 or {id}.webm in {}",
            clips.path().display()
        );
        assert!(
            stderr(&first).contains(&named),
            "{named}: {}",
            stderr(&first)
        );
    }
    let missing = others.clone();
    let others = others.len();
    let dropped = fs::read_to_string(data.path().join("slowfast/dropped_videos.txt")).unwrap();
    assert_eq!(dropped.lines().count(), others, "{dropped}");
    let validation: serde_json::Value =
        serde_json::from_slice(&fs::read(data.path().join("slowfast/validation.json")).unwrap())
            .unwrap();
    assert_eq!(validation["passed"], true, "{validation}");
    for id in &cut {
        let (rows, file_times) = index(data.path(), id);
        assert_eq!(rows, index(fetched.path(), id).0, "{id}: the index differs");
        for (source, file_time) in source_times(&rows).iter().zip(&file_times) {
            assert!((source - START - file_time).abs() < 1e-6, "{id}");
        }
        let reference = frames(fetched.path());
        for (key, bytes) in frames(data.path()) {
            assert!(reference.get(&key) == Some(&bytes), "{key} differs");
        }
    }
    // Known missing, nothing changed: the second run succeeds and redoes nothing.
    let again = run(&[]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(crate::nothing_lost::completed(&again, "extract"), 0);

    // A start later than the ranges begin: every instant before it would show the clip's first
    // frame. Each video is refused naming its range and the start; its frames are kept.
    let kept = frames(data.path());
    let late = START + 15.0;
    let wrong = run(&["--set", &format!("fetch.video_start={late}")]);
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    for id in &cut {
        let named = format!("video {id}: the range {START:.3}..");
        let message = stderr(&wrong);
        assert!(message.contains(&named), "{named}: {message}");
        assert!(
            message.contains(&format!(
                "begins before the file does (its time 0 is dataset second {late}"
            )),
            "{message}"
        );
    }
    assert!(kept == frames(data.path()), "frames changed");

    // A video under a camera's upper-case extension is named with the rename that makes it
    // read; a file libav cannot open is named once, with what to do.
    assert!(missing.len() >= 2, "{missing:?}");
    let (misnamed, broken) = (&missing[0], &missing[1]);
    fs::write(clips.path().join(format!("{misnamed}.MP4")), b"a camera's").unwrap();
    let junk = clips.path().join(format!("{broken}.mp4"));
    fs::write(&junk, b"not a video").unwrap();
    let named = run(&[]);
    let message = stderr(&named);
    assert_eq!(named.status.code(), Some(1), "{message}");
    assert!(
        message.contains(&format!(
            "{misnamed}.MP4 is there: rename it {misnamed}.mp4"
        )),
        "{message}"
    );
    let once = format!("video {broken}: {}: libav cannot open it (", junk.display());
    assert!(
        message.contains(&once) && message.contains("replace it with a whole copy"),
        "{message}"
    );
    // The lists that drop it say why, in the stage's words (they said "not extracted, or its
    // extraction did not finish", as of a stopped run).
    let dropped = fs::read_to_string(data.path().join("slowfast/dropped_videos.txt")).unwrap();
    let line = dropped
        .lines()
        .find(|line| line.starts_with(&format!("{broken}:")))
        .unwrap_or_else(|| panic!("{broken} not dropped: {dropped}"));
    assert!(
        line.contains("fetch-videos failed: ") && line.contains("libav cannot open it"),
        "{line}"
    );
    // `status` says what the run did: the lists and validation past the failed videos are
    // done (they were "stale, after fetch-videos", which the next run found up to date).
    let after_run = status_conditions();
    let conditions = &after_run;
    assert_eq!(conditions["fetch-videos"], "failed", "{conditions:?}");
    assert_eq!(conditions["lists"], "done", "{conditions:?}");
    assert_eq!(conditions["validate"], "done", "{conditions:?}");
    let again = run(&[]);
    assert_eq!(crate::nothing_lost::completed(&again, "lists"), 0);
    assert_eq!(
        status_conditions(),
        after_run,
        "a run that redid nothing changed the status"
    );

    // An annotation folder that is not there is said to be so, with where a pipeline names it.
    let nowhere = clips.path().join("no-such-folder");
    let named = run(&[
        "--set",
        &format!("fetch.annotations=\"{}\"", nowhere.display()),
    ]);
    assert_eq!(named.status.code(), Some(1), "{}", stderr(&named));
    assert!(
        stderr(&named).contains(&format!(
            "{}: no such folder of annotation files",
            nowhere.display()
        )) && stderr(&named).contains("`[fetch] annotations = \"DIR\"` in a pipeline"),
        "{}",
        stderr(&named)
    );
}

/// Ids of one's own videos: file stems of other lengths than YouTube's 11 characters. The same
/// videos and annotations with every id renamed give, through validation, the fetched path's
/// frames under the new names. Before, `parse` refused them: `invalid video id "clip25": must be
/// exactly 11 characters long`.
#[test]
fn videos_named_by_any_safe_file_stem_run_through_validation() {
    let fetched = fetched_and_extracted();
    let ids = planned_videos(fetched.path());
    let own = |index: usize| -> String {
        let named = [
            "clip25",
            "cam3_2024-05-01_1200",
            "IMG_0042",
            "x",
            &"L".repeat(64),
        ];
        named
            .get(index)
            .map_or(format!("own-{index}"), |name| name.to_string())
    };
    let renamed: BTreeMap<String, String> = ids
        .iter()
        .enumerate()
        .map(|(index, id)| (id.clone(), own(index)))
        .collect();
    let rename = |text: &str| {
        renamed
            .iter()
            .fold(text.to_string(), |text, (old, new)| text.replace(old, new))
    };
    let annotations = tempfile::tempdir().unwrap();
    for entry in walk(&fetched.path().join("annotations")) {
        let relative = entry
            .strip_prefix(fetched.path().join("annotations"))
            .unwrap();
        let to = annotations.path().join(relative);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        match fs::read_to_string(&entry) {
            Ok(text) => fs::write(&to, rename(&text)).unwrap(),
            Err(_) => {
                fs::copy(&entry, &to).unwrap();
            }
        }
    }
    let videos = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(mirror().join("ava-dataset/trainval")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        std::os::unix::fs::symlink(&path, videos.path().join(rename(&name))).unwrap();
    }

    // The dataset's own manifest: no official sizes and hashes for the annotation files.
    let manifest = fs::read_to_string(mirror().join("manifest.toml")).unwrap();
    let manifest: String = manifest
        .lines()
        .filter(|line| !line.starts_with("size =") && !line.starts_with("sha256 ="))
        .map(|line| format!("{line}\n"))
        .collect();
    let manifest_path = videos.path().join("manifest.toml");
    fs::write(&manifest_path, manifest).unwrap();

    let data = tempfile::tempdir().unwrap();
    let output = demo_run(data.path())
        .args(["--until", "validate"])
        .arg("--set")
        .arg(format!("dataset=\"{}\"", manifest_path.display()))
        .arg("--set")
        .arg(format!("fetch.videos=\"{}\"", videos.path().display()))
        .arg("--set")
        .arg(format!(
            "fetch.annotations=\"{}\"",
            annotations.path().display()
        ))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let validation: serde_json::Value =
        serde_json::from_slice(&fs::read(data.path().join("slowfast/validation.json")).unwrap())
            .unwrap();
    assert_eq!(validation["passed"], true, "{validation}");
    let reference: BTreeMap<String, Vec<u8>> = frames(fetched.path())
        .into_iter()
        .map(|(key, bytes)| (rename(&key), bytes))
        .collect();
    let made = frames(data.path());
    assert_eq!(
        made.keys().collect::<Vec<_>>(),
        reference.keys().collect::<Vec<_>>()
    );
    assert!(
        made == reference,
        "the frames differ from the fetched path's"
    );
    let lists = fs::read_to_string(data.path().join("frame_lists/train.csv")).unwrap();
    assert!(
        renamed.values().any(|id| lists.contains(&format!("{id} "))),
        "{lists}"
    );
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        match path.is_dir() {
            true => files.extend(walk(&path)),
            false => files.push(path),
        }
    }
    files
}
