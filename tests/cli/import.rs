//! `avaprep import` as a user runs it: the synthetic miniature's ground truth exported as a
//! labelling tool would (`synth --exports`: CVAT for video 1.1, CVAT for images 1.1, VIA 3, on
//! each video's own clock), imported with the videos where they are, then the own-videos
//! pipeline, PySlowFast's and mmaction2's own loaders, and training beside the AVA-format path.

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use avaprep_testbed::serve::{self, ServeConfig};

use crate::lists::reference_report;
use crate::support::{LOSSLESS_H264, avaprep, ffmpeg, mirror, stderr, stdout};

fn exports() -> PathBuf {
    mirror().join("exports")
}

fn videos() -> PathBuf {
    mirror().join("ava-dataset/trainval")
}

/// `avaprep import EXPORTS --videos <the mirror's> --out OUT --action-from checkboxes`.
fn import_checkboxes(out: &Path, exports: &[PathBuf]) -> Output {
    avaprep(out)
        .arg("import")
        .args(exports)
        .arg("--videos")
        .arg(videos())
        .arg("--out")
        .arg(out)
        .args(["--action-from", "checkboxes"])
        .output()
        .unwrap()
}

/// The `--set`s that point `pipelines/own-videos.toml`'s `[import]` at the mirror's CVAT video
/// exports and at `videos`.
fn own_videos_pointed_at(videos: &Path) -> [String; 2] {
    let exports: Vec<String> = cvat_video_exports()
        .iter()
        .map(|export| format!("{:?}", export.display().to_string()))
        .collect();
    [
        format!("import.exports=[{}]", exports.join(", ")),
        format!("import.videos={:?}", videos.display().to_string()),
    ]
}

/// The synth report: which videos are val, where the dataset's clock puts the files' start.
fn report() -> serde_json::Value {
    serde_json::from_slice(&fs::read(mirror().join("synth-report.json")).unwrap()).unwrap()
}

fn val_videos() -> Vec<String> {
    report()["videos"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|video| video["split"] == "val")
        .map(|video| video["id"].as_str().unwrap().to_string())
        .collect()
}

/// A file of the miniature's own annotation zip.
fn synth_file(name: &str) -> String {
    let file = fs::File::open(mirror().join("ava-dataset/annotations/ava_v2.2.zip")).unwrap();
    let mut zip = zip::ZipArchive::new(file).unwrap();
    let mut text = String::new();
    zip.by_name(name)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    text
}

/// A person-detector file of the miniature's PySlowFast bundle.
fn synth_detections(name: &str) -> String {
    let file =
        fs::File::open(mirror().join("pyslowfast/annotation/ava/ava_annotations.tar")).unwrap();
    let mut archive = tar::Archive::new(file);
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().ends_with(name) {
            let mut text = String::new();
            entry.read_to_string(&mut text).unwrap();
            return text;
        }
    }
    panic!("{name} is not in the bundle");
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// `avaprep import` of `files` into `out`, the miniature's label maps put there first so the
/// import keeps their (sparse) ids and scored subset, as it keeps those of an earlier import.
fn import(out: &Path, files: &[PathBuf], extra: &[&str]) -> Output {
    let annotations = out.join("annotations");
    fs::create_dir_all(&annotations).unwrap();
    for labels in LABEL_MAPS {
        fs::write(annotations.join(labels), synth_file(labels)).unwrap();
    }
    avaprep(out)
        .arg("import")
        .args(files)
        .arg("--videos")
        .arg(videos())
        .arg("--out")
        .arg(out)
        .args(["--val", &val_videos().join(",")])
        .args(extra)
        .output()
        .unwrap()
}

/// `avaprep import` of the VIA project alone into `out`, with `args` (the split's settings), as
/// a user who imports again would run it; it must succeed.
fn import_via_into(out: &Path, args: &[&str]) {
    let output = avaprep(out)
        .arg("import")
        .arg(exports().join("via3.json"))
        .arg("--videos")
        .arg(videos())
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

/// A re-import by `--val-fraction` keeps each video in the split the earlier import into the
/// folder put it in (as its `import.json` says), so adding videos never moves one; with another
/// seed the videos are chosen afresh.
#[test]
fn a_reimport_keeps_each_video_in_the_split_it_had() {
    let out = tempfile::tempdir().unwrap();
    let record = out.path().join("import.json");
    let import = |seed: &str| {
        import_via_into(out.path(), &["--val-fraction", "0.3", "--seed", seed]);
        json(&record)["splits"].clone()
    };
    let chosen = import("0");
    let (train, val) = (&chosen["train"], &chosen["val"]);
    assert!(!val.as_array().unwrap().is_empty(), "{chosen}");
    // As if an earlier import had put the first train video in val, and the first val one in
    // train.
    let mut earlier = json(&record);
    let (to_val, to_train) = (train[0].clone(), val[0].clone());
    let moved = |list: &serde_json::Value, out: &serde_json::Value, with: &serde_json::Value| {
        let mut ids: Vec<serde_json::Value> = list
            .as_array()
            .unwrap()
            .iter()
            .filter(|id| *id != out)
            .cloned()
            .collect();
        ids.push(with.clone());
        ids
    };
    earlier["splits"]["train"] = moved(train, &to_val, &to_train).into();
    earlier["splits"]["val"] = moved(val, &to_train, &to_val).into();
    fs::write(&record, earlier.to_string()).unwrap();
    let kept = import("0");
    let val_now = kept["val"].as_array().unwrap();
    assert!(
        val_now.contains(&to_val) && !val_now.contains(&to_train),
        "{kept}"
    );
    // Another seed: chosen afresh, not kept.
    let afresh = import("1");
    fs::remove_file(&record).unwrap();
    assert_eq!(afresh, import("1"));
}

/// An import into a folder an earlier import made is the dataset of the exports it is given: the
/// videos only the earlier exports labelled are named as gone (they once went without a word, as
/// if the second import added to the first).
#[test]
fn a_reimport_of_other_exports_names_the_videos_it_no_longer_holds() {
    let out = tempfile::tempdir().unwrap();
    let exports = cvat_video_exports();
    let import = |exports: &[PathBuf]| {
        let output = import_checkboxes(out.path(), exports);
        assert!(output.status.success(), "{}", stderr(&output));
        stderr(&output)
    };
    import(&exports[..3]);
    let stem = |export: &PathBuf| export.file_stem().unwrap().to_str().unwrap().to_string();
    let said = import(&exports[2..]);
    let gone: Vec<String> = exports[..2].iter().map(stem).collect();
    assert!(
        said.contains("2 videos of the earlier import")
            && gone.iter().all(|video| said.contains(video.as_str())),
        "{said}"
    );
    assert_eq!(
        json(&out.path().join("import.json"))["gone_videos"],
        serde_json::json!(gone)
    );
    let again = import(&exports[2..]);
    assert!(!again.contains("earlier import"), "{again}");
}

/// An action renamed in the tool (`stand still` to `standing`) and imported again: the label map
/// keeps the old name, as ids never change, so it is still a class with no example. The import
/// says so, with how to number the actions afresh (it said nothing, and val mAP fell).
#[test]
fn an_action_renamed_in_the_tool_is_named_as_a_class_no_box_has() {
    let out = tempfile::tempdir().unwrap();
    let edited = tempfile::tempdir().unwrap();
    let import = |export: &Path| {
        let output = avaprep(out.path())
            .arg("import")
            .arg(export)
            .arg("--videos")
            .arg(videos())
            .arg("--out")
            .arg(out.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        output
    };
    let first = import(&exports().join("via3.json"));
    assert!(!stderr(&first).contains("no box has"), "{}", stderr(&first));
    let source = fs::read_to_string(exports().join("via3.json")).unwrap();
    assert_eq!(source.matches("\"stand still\"").count(), 1);
    let renamed = edited.path().join("via3.json");
    fs::write(&renamed, source.replace("\"stand still\"", "\"standing\"")).unwrap();
    let again = import(&renamed);
    assert!(
        stderr(&again).contains(
            "no box has `stand still` of the label map (kept from an earlier import, as an action keeps its id)"
        ) && stderr(&again).contains("import into an empty --out"),
        "{}",
        stderr(&again)
    );
    let record = json(&out.path().join("import.json"));
    assert_eq!(
        record["actions_without_boxes"],
        serde_json::json!(["stand still"])
    );
    assert!(
        record["actions"]["standing"].as_u64().unwrap()
            > record["actions"]["stand still"].as_u64().unwrap()
    );
}

/// After an export is imported again, a command on a data directory made from the import by
/// single commands names the `extract` that reads it again, with the data directory, the
/// videos, the dataset and the frames' settings; run as named, it works. It named `avaprep
/// fetch`, then `extract --videos DIR`, which read AVA's manifest.
#[test]
fn a_hint_after_a_reimport_names_the_extract_that_made_the_data_directory() {
    let own = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let import = |seed: &str| import_via_into(own.path(), &["--seed", seed]);
    import("0");
    let extracted = avaprep(data.path())
        .args(["extract", "--height", "120", "--videos"])
        .arg(videos())
        .arg("--dataset")
        .arg(own.path().join("dataset.toml"))
        .output()
        .unwrap();
    assert!(extracted.status.success(), "{}", stderr(&extracted));
    let lists = || avaprep(data.path()).arg("lists").output().unwrap();
    assert!(lists().status.success());
    // Another seed puts other videos in val: the annotation files change.
    import("1");
    let refused = lists();
    assert_eq!(refused.status.code(), Some(1), "{}", stdout(&refused));
    let said = stdout(&refused) + &stderr(&refused);
    let hint = said
        .split("run `")
        .nth(1)
        .and_then(|rest| rest.split("` first").next())
        .unwrap_or_else(|| panic!("no command named: {said}"));
    let expected = format!(
        "avaprep --data-dir {} extract --videos {} --dataset {} --height 120",
        data.path().display(),
        videos().display(),
        own.path().join("dataset.toml").display()
    );
    assert_eq!(hint, expected, "{said}");
    let words: Vec<&str> = hint.split(' ').collect();
    let remade = std::process::Command::new(env!("CARGO_BIN_EXE_avaprep"))
        .args(&words[1..])
        .env_remove("AVAPREP_DATA_DIR")
        .output()
        .unwrap();
    assert!(remade.status.success(), "{hint}: {}", stderr(&remade));
    let listed = lists();
    assert!(listed.status.success(), "{}", stdout(&listed));
}

const LABEL_MAPS: [&str; 2] = [
    "ava_action_list_v2.2.pbtxt",
    "ava_action_list_v2.2_for_activitynet_2019.pbtxt",
];

/// A video whose file name is no video id (a space in it, as a camera or a person names files)
/// is named with the name to give it, and left out (exit 1) while the others are imported; the
/// file renamed so, the same export is read, its video under that id.
#[test]
fn a_video_named_with_a_space_is_left_out_by_name_until_renamed() {
    let source = fs::read_to_string(exports().join("via3.json")).unwrap();
    let at = source.find("\"fname\": \"").unwrap() + 10;
    let name = &source[at..at + source[at..].find('"').unwrap()];
    let (stem, extension) = name.rsplit_once('.').unwrap();
    let spaced = format!("{stem} take 2.{extension}");
    let work = tempfile::tempdir().unwrap();
    let export = work.path().join("via3.json");
    let renamed = source.replace(&format!("\"{name}\""), &format!("\"{spaced}\""));
    assert_ne!(renamed, source);
    fs::write(&export, renamed).unwrap();
    let clips = work.path().join("clips");
    fs::create_dir(&clips).unwrap();
    for entry in fs::read_dir(videos()).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap();
        let linked = if file == name { spaced.as_str() } else { file };
        std::os::unix::fs::symlink(&path, clips.join(linked)).unwrap();
    }
    let import_into = |out: &Path| {
        avaprep(out)
            .arg("import")
            .arg(&export)
            .arg("--videos")
            .arg(&clips)
            .arg("--out")
            .arg(out)
            .args(["--val-fraction", "0"])
            .output()
            .unwrap()
    };
    let id = format!("{stem}_take_2");
    let train_ids = |out: &Path| -> Vec<String> {
        let summary = json(&out.join("import.json"));
        let ids = summary["splits"]["train"].as_array().unwrap();
        ids.iter()
            .map(|id| id.as_str().unwrap().to_string())
            .collect()
    };

    let out = work.path().join("spaced");
    let output = import_into(&out);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "error: video {id}: {spaced}: its name is not a video id (character {} is ' '",
            stem.len() + 1
        )),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains(&format!(
            "rename it `{id}.{extension}` in {}, and import again (the export may keep its name); left out",
            clips.display()
        )),
        "{}",
        stderr(&output)
    );
    let train = train_ids(&out);
    assert_eq!(train.len(), 3, "{train:?}");
    assert!(!train.contains(&id), "{train:?}");

    fs::rename(clips.join(&spaced), clips.join(format!("{id}.{extension}"))).unwrap();
    let out = work.path().join("renamed");
    let output = import_into(&out);
    assert!(output.status.success(), "{}", stderr(&output));
    let train = train_ids(&out);
    assert_eq!(train.len(), 4, "{train:?}");
    assert!(train.contains(&id), "{train:?}");
    let rows = fs::read_to_string(out.join("annotations/ava_train_v2.2.csv")).unwrap();
    assert!(
        rows.lines().any(|row| row.starts_with(&format!("{id},"))),
        "{rows}"
    );
}

fn cvat_video_exports() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(exports().join("cvat-video"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files
}

/// Each export, imported, gives the miniature's own ground truth row for row (the same seconds,
/// boxes, actions and persons), and its label map unchanged; the proposals are the ground
/// truth's boxes with score 1.0, and the manifest puts the files' start where synth did.
#[test]
fn each_tool_s_export_imports_to_the_miniature_s_own_tables() {
    let formats: [(&str, Vec<PathBuf>, &[&str]); 3] = [
        (
            "cvat-video",
            cvat_video_exports(),
            &["--action-from", "checkboxes"],
        ),
        (
            "cvat-images",
            vec![exports().join("cvat-images.xml")],
            &["--action-from", "checkboxes"],
        ),
        ("via3", vec![exports().join("via3.json")], &[]),
    ];
    let video_start = report()["video_start"].as_u64().unwrap();
    for (format, files, extra) in formats {
        let out = tempfile::tempdir().unwrap();
        let output = import(out.path(), &files, extra);
        assert!(output.status.success(), "{format}: {}", stderr(&output));
        let annotations = out.path().join("annotations");
        for split in ["train", "val"] {
            let name = format!("ava_{split}_v2.2.csv");
            let imported = fs::read_to_string(annotations.join(&name)).unwrap();
            assert_eq!(
                sorted_lines(&imported),
                sorted_lines(&synth_file(&name)),
                "{format} {split}"
            );
        }
        for labels in LABEL_MAPS {
            assert_eq!(
                fs::read_to_string(annotations.join(labels)).unwrap(),
                synth_file(labels),
                "{format}: {labels} is kept"
            );
        }
        let truth = fs::read_to_string(annotations.join("ava_val_v2.2.csv")).unwrap();
        let proposals = fs::read_to_string(
            annotations.join("person_box_67091280_iou90/ava_detection_val_boxes_and_labels.csv"),
        )
        .unwrap();
        for line in proposals.lines() {
            let (key, score) = line.rsplit_once(",,").unwrap();
            assert_eq!(score, "1.0", "{format}: {line}");
            assert!(truth.contains(&format!("{key},")), "{format}: {line}");
        }
        let summary: serde_json::Value =
            serde_json::from_slice(&fs::read(out.path().join("import.json")).unwrap()).unwrap();
        // Each video's clock puts its first annotated keyframe on 902, as synth's does.
        let starts = summary["file_starts"].as_object().unwrap();
        assert_eq!(starts.len(), 4, "{format}: {summary}");
        for start in starts.values() {
            assert_eq!(start.as_u64(), Some(video_start), "{format}: {summary}");
        }
        assert_eq!(summary["proposals"], "ground truth (score 1.0)");
        let spans = fs::read_to_string(annotations.join("video_spans.csv")).unwrap();
        for line in spans.lines() {
            let start = line.split(',').nth(1).unwrap();
            assert_eq!(start, video_start.to_string(), "{format}: {spans}");
        }
    }
}

/// Boxes off the frame are cut to it and counted, an annotated video the folder lacks is listed
/// and left out (the others are imported), detector boxes of a video not imported are named,
/// actions read from the wrong place get a note, an export with no box says so, and a malformed
/// export names its file and line.
#[test]
fn an_import_clips_boxes_lists_missing_videos_and_names_bad_exports() {
    let source = fs::read_to_string(&cvat_video_exports()[0]).unwrap();
    let exports = tempfile::tempdir().unwrap();
    // The first box (a keyframe's) reaching 50 pixels past the left edge.
    let first_xtl = source.find("xtl=\"").unwrap() + 5;
    let end = first_xtl + source[first_xtl..].find('"').unwrap();
    let clipped = format!("{}-50.00{}", &source[..first_xtl], &source[end..]);
    let clipped_path = exports.path().join("clipped.xml");
    fs::write(&clipped_path, clipped).unwrap();
    let absent = source.replace(
        &source[source.find("<source>").unwrap()..source.find("</source>").unwrap()],
        "<source>not_here.mp4",
    );
    let absent_path = exports.path().join("absent.xml");
    fs::write(&absent_path, absent).unwrap();
    // A detector that boxes every second: its boxes before the first keyframe are left out.
    let video = cvat_video_exports()[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // A video named in the export in another case than its file's: named, with the file.
    let shouted = source.replace(
        &source[source.find("<source>").unwrap()..source.find("</source>").unwrap()],
        &format!("<source>{}.mp4", video.to_uppercase()),
    );
    let shouted_path = exports.path().join("shouted.xml");
    fs::write(&shouted_path, shouted).unwrap();
    let detections = exports.path().join("detections.csv");
    // And a video not imported, whose boxes are left out by name.
    fs::write(
        &detections,
        format!(
            "{video},0000,0.1,0.1,0.5,0.9,,0.8\n{video},0010,0.1,0.1,0.5,0.9,,0.8\n\
             nosuch,0010,0.1,0.1,0.5,0.9,,0.8\n"
        ),
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let output = avaprep(out.path())
        .arg("import")
        .args([&clipped_path, &absent_path, &shouted_path])
        .arg("--detections")
        .arg(&detections)
        .arg("--videos")
        .arg(videos())
        .arg("--out")
        .arg(out.path())
        .args(["--action-from", "checkboxes", "--val-fraction", "0"])
        .output()
        .unwrap();
    // The others are imported, and the exit code says some were not (it said all was done).
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(out.path().join("dataset.toml").is_file());
    assert!(
        stderr(&output).contains("video not_here is annotated but not in"),
        "{}",
        stderr(&output)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&fs::read(out.path().join("import.json")).unwrap()).unwrap();
    let upper = video.to_uppercase();
    assert_eq!(
        summary["missing_videos"],
        serde_json::json!(["not_here", upper])
    );
    let file = summary["missing_videos_other_case"][&upper]
        .as_str()
        .unwrap();
    assert!(file.starts_with(&format!("{video}.")), "{summary}");
    assert!(
        stderr(&output).contains(&format!(
            "video {upper} is annotated but not in {}; its boxes are left out ({file} there differs only in case",
            videos().display()
        )),
        "{}",
        stderr(&output)
    );
    assert_eq!(summary["clipped_boxes"], 1, "{summary}");
    assert_eq!(summary["detections_off_keyframes"], 1, "{summary}");
    assert_eq!(
        summary["detections_of_other_videos"],
        serde_json::json!(["nosuch"])
    );
    assert_eq!(summary["videos_without_detections"], serde_json::json!([]));
    assert!(
        stderr(&output).contains(
            "the detections name videos that are not imported, their boxes left out: nosuch"
        ),
        "{}",
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("1 detector box at seconds that are no keyframe, left out"),
        "{}",
        stdout(&output)
    );
    let proposals = fs::read_to_string(out.path().join(
        "annotations/person_box_67091280_iou90/ava_detection_train_boxes_and_labels_include_negative_v2.2.csv",
    ))
    .unwrap();
    let second = 10 + summary["file_starts"][video.as_str()].as_u64().unwrap();
    assert_eq!(
        proposals,
        format!("{video},{second:04},0.100,0.100,0.500,0.900,,0.800000\n")
    );
    // Named with its video, to find it in the tool.
    assert!(
        stdout(&output).contains(&format!("1 box clipped to the frame ({video} 1)")),
        "{}",
        stdout(&output)
    );
    assert_eq!(
        summary["box_counts_by_video"][video.as_str()]["clipped"],
        1,
        "{summary}"
    );
    let train = fs::read_to_string(out.path().join("annotations/ava_train_v2.2.csv")).unwrap();
    assert!(
        train
            .lines()
            .any(|line| line.split(',').nth(2) == Some("0.000"))
    );

    // A corner that is not a number, in the third box.
    let lines: Vec<&str> = source.lines().collect();
    let line = lines
        .iter()
        .enumerate()
        .filter(|(_, text)| text.contains("<box "))
        .nth(2)
        .unwrap()
        .0
        + 1;
    assert!(lines[line - 1].contains("xtl=\""), "{}", lines[line - 1]);
    let corrupted = lines[line - 1].replacen("xtl=\"", "xtl=\"left", 1);
    let broken = exports.path().join("broken.xml");
    let text: Vec<&str> = lines
        .iter()
        .enumerate()
        .map(|(index, text)| match index + 1 == line {
            true => corrupted.as_str(),
            false => text,
        })
        .collect();
    fs::write(&broken, text.join("\n")).unwrap();
    let output = import_checkboxes(out.path(), std::slice::from_ref(&broken));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("broken.xml"), "{message}");
    assert!(message.contains(&format!("line {line}")), "{message}");
    assert!(message.contains("xtl"), "{message}");
    // Read by label, the task's boxes all have the action `person`: a note says where the
    // actions are more likely read from.
    let by_label = tempfile::tempdir().unwrap();
    let output = imported(&clipped_path, &videos(), by_label.path(), &[]);
    assert!(
        stdout(&output).contains("actions: 1 person"),
        "{}",
        stdout(&output)
    );
    assert!(
        stderr(&output).contains("boxes' action is `person`")
            && stderr(&output).contains("--action-from checkboxes"),
        "{}",
        stderr(&output)
    );
    // An export with no box at all, as an untouched task exports, says so.
    let tracks_from = source.find("<track").unwrap();
    let tracks_to = source.rfind("</track>").unwrap() + "</track>".len();
    let empty = exports.path().join("empty.xml");
    fs::write(
        &empty,
        [&source[..tracks_from], &source[tracks_to..]].concat(),
    )
    .unwrap();
    let output = avaprep(out.path())
        .arg("import")
        .arg(&empty)
        .arg("--videos")
        .arg(videos())
        .arg("--out")
        .arg(by_label.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("the exports have no box"),
        "{}",
        stderr(&output)
    );
    let unknown = avaprep(out.path())
        .args(["import", "labels.txt", "--videos"])
        .arg(videos())
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
    assert!(stderr(&unknown).contains("CVAT"), "{}", stderr(&unknown));
    // An attribute the export does not have is the flag's mistake, not the file's (exit 2),
    // and the error lists those it has.
    let misspelt = avaprep(out.path())
        .arg("import")
        .arg(&clipped_path)
        .arg("--videos")
        .arg(videos())
        .arg("--out")
        .arg(by_label.path())
        .args(["--action-from", "attribute:moveleft"])
        .output()
        .unwrap();
    assert_eq!(misspelt.status.code(), Some(2), "{}", stderr(&misspelt));
    assert!(
        stderr(&misspelt).contains("no attribute is named \"moveleft\"")
            && stderr(&misspelt).contains("move left"),
        "{}",
        stderr(&misspelt)
    );
}

/// The own-videos pipeline on an imported dataset (videos read where they are), with the
/// miniature's detector as `--detections` and its exclusions as `--excluded`: every stage runs, validation (consumer-clock
/// included) passes, PySlowFast's and mmaction2's own loaders read every keyframe's clip
/// centred on it, and the val mAP is within 0.03 of the same training on the AVA-format path.
#[test]
fn the_own_videos_pipeline_trains_on_an_import_as_on_the_ava_format_path() {
    let video_start = report()["video_start"].as_i64().unwrap();
    let detections = tempfile::tempdir().unwrap();
    let detections_path = own_clock_detections(detections.path());
    // And the keyframes the miniature excludes, which no labelling tool exports.
    let excluded: String = ["train", "val"]
        .iter()
        .flat_map(|split| {
            synth_file(&format!("ava_{split}_excluded_timestamps_v2.2.csv"))
                .lines()
                .map(|line| {
                    let (video, second) = line.split_once(',').unwrap();
                    let second: i64 = second.parse().unwrap();
                    format!("{video},{:04}\n", second - video_start)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let excluded_path = detections.path().join("excluded.csv");
    fs::write(&excluded_path, excluded).unwrap();

    // The template pipeline with its [import] pointed at the exports, as a user edits it; the
    // miniature's label maps are in place first, so the import keeps its action ids.
    let epochs = "40";
    let imported = tempfile::tempdir().unwrap();
    let annotations = imported.path().join("import/annotations");
    fs::create_dir_all(&annotations).unwrap();
    for labels in LABEL_MAPS {
        fs::write(annotations.join(labels), synth_file(labels)).unwrap();
    }
    let exports: Vec<String> = cvat_video_exports()
        .iter()
        .map(|export| format!("{:?}", export.display().to_string()))
        .collect();
    let val: Vec<String> = val_videos()
        .iter()
        .map(|video| format!("{video:?}"))
        .collect();
    let import_settings = [
        format!("import.exports=[{}]", exports.join(", ")),
        format!("import.videos={:?}", videos().display().to_string()),
        "import.action_from=\"checkboxes\"".to_string(),
        format!("import.val=[{}]", val.join(", ")),
        format!(
            "import.detections={:?}",
            detections_path.display().to_string()
        ),
        format!("import.excluded={:?}", excluded_path.display().to_string()),
    ];
    let own_videos = |command: &[&str]| {
        avaprep(imported.path())
            .args(command)
            .arg("pipelines/own-videos.toml")
            .args(
                import_settings
                    .iter()
                    .flat_map(|setting| ["--set", setting.as_str()]),
            )
            .args(own_settings(epochs))
            .output()
            .unwrap()
    };
    let run_own = || own_videos(&["--json", "run"]);
    let output = run_own();
    assert!(output.status.success(), "{}", stderr(&output));
    let first = stage_outcomes(&output);
    for stage in [
        "import", "extract", "lists", "validate", "train", "eval", "report",
    ] {
        assert_eq!(
            first.get(stage).map(String::as_str),
            Some("completed"),
            "{first:?}"
        );
    }
    assert!(imported.path().join("report/index.html").is_file());
    // One run, one summary, last: a script reads the run's outcome once.
    let records: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let summaries = records.iter().filter(|record| record["type"] == "summary");
    assert_eq!(summaries.count(), 1, "{records:?}");
    assert_eq!(records.last().unwrap()["succeeded"], true, "{records:?}");
    // Run again: the import and everything after it are up to date.
    let again = run_own();
    assert!(again.status.success(), "{}", stderr(&again));
    let second = stage_outcomes(&again);
    assert_eq!(second.len(), first.len(), "{second:?}");
    assert!(
        second.values().all(|outcome| outcome == "up_to_date"),
        "{second:?}"
    );
    // `status` reads the import's state and then the stages built on what it imported.
    let status = own_videos(&["status"]);
    let lines = String::from_utf8_lossy(&status.stdout).to_string();
    let stages: Vec<(&str, &str)> = lines
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?, words.next()?))
        })
        .collect();
    assert_eq!(stages.len(), first.len(), "{lines}");
    assert_eq!(stages[0].0, "import", "{lines}");
    assert!(
        stages.iter().all(|(_, condition)| *condition == "done"),
        "{lines}"
    );
    // A table of the import edited by hand is imported again from the exports, and the run
    // says the edit belongs in the exports, not in the tables it was made in.
    let table = imported.path().join("import/annotations/ava_val_v2.2.csv");
    let original = fs::read(&table).unwrap();
    fs::write(
        &table,
        [&original[..], b"edited,0902,0,0,1,1,1,0\n"].concat(),
    )
    .unwrap();
    let remade = run_own();
    assert!(remade.status.success(), "{}", stderr(&remade));
    let said = stdout(&remade) + &stderr(&remade);
    assert!(
        said.contains("changed since made")
            && said.contains("made again from the exports that [import] names")
            && !said.contains("edit annotations in"),
        "{said}"
    );
    assert_eq!(fs::read(&table).unwrap(), original);
    let validation = json(&imported.path().join("slowfast/validation.json"));
    assert_eq!(validation["passed"], true, "{validation}");
    let clock = validation["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "consumer-clock")
        .unwrap();
    assert!(clock["checked"].as_u64().unwrap() > 0, "{clock}");
    for split in ["train", "val"] {
        for script in ["pyslowfast_ava.py", "mmaction2_ava.py"] {
            let report = reference_report(script, imported.path(), &[split]);
            assert!(report["clips"].as_u64().unwrap() > 0, "{script} {split}");
        }
    }

    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let ava_format = tempfile::tempdir().unwrap();
    let output = crate::support::demo_run(ava_format.path())
        .arg("--set")
        .arg(format!("fetch.base_url=[\"{}\"]", server.url()))
        .args(own_settings(epochs))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let map = |data: &Path| {
        json(&data.join("work/eval.json"))["splits"][0]["mean_ap"]
            .as_f64()
            .unwrap()
    };
    // Beside the detections the evaluator scores, the same rows on the files' own seconds.
    let evaluated = json(&imported.path().join("work/eval.json"));
    let on_dataset_clock = fs::read_to_string(
        imported
            .path()
            .join(evaluated["splits"][0]["detections"].as_str().unwrap()),
    )
    .unwrap();
    let own_seconds = fs::read_to_string(
        imported
            .path()
            .join(evaluated["splits"][0]["own_seconds"].as_str().unwrap()),
    )
    .unwrap();
    let shifted: Vec<String> = on_dataset_clock
        .lines()
        .map(|line| {
            let mut fields: Vec<String> = line.split(',').map(str::to_string).collect();
            let second: i64 = fields[1].parse().unwrap();
            fields[1] = (second - video_start).to_string();
            fields.join(",")
        })
        .collect();
    assert!(!shifted.is_empty());
    assert_eq!(own_seconds.lines().collect::<Vec<_>>(), shifted);
    let page = report_page(imported.path(), video_start);
    assert!(
        !page.contains("the boxes scored are the ground truth"),
        "{page}"
    );

    let (own, ava) = (map(imported.path()), map(ava_format.path()));
    eprintln!("val mAP: imported {own:.4}, AVA format {ava:.4}");
    assert!(
        (own - ava).abs() <= 0.03,
        "imported {own}, AVA format {ava}"
    );
}

/// The miniature's person-detector boxes (train and val) on the files' own seconds, as a user's
/// detector writes them: `folder/detections.csv`.
pub(crate) fn own_clock_detections(folder: &Path) -> PathBuf {
    let video_start = report()["video_start"].as_i64().unwrap();
    let rows: String = [
        "ava_detection_train_boxes_and_labels_include_negative_v2.2.csv",
        "ava_detection_val_boxes_and_labels.csv",
    ]
    .iter()
    .flat_map(|name| {
        synth_detections(name)
            .lines()
            .map(|line| {
                let mut fields: Vec<String> = line.split(',').map(str::to_string).collect();
                let second: i64 = fields[1].parse().unwrap();
                fields[1] = format!("{:04}", second - video_start);
                fields.join(",") + "\n"
            })
            .collect::<Vec<_>>()
    })
    .collect();
    let path = folder.join("detections.csv");
    fs::write(&path, rows).unwrap();
    path
}

/// `avaprep keyframes` on the miniature's videos with its detector's boxes: an image at each
/// keyframe second, the source frame nearest it (its burned-in code) at the height asked, the
/// same images in the archive for CVAT, a CVAT task drawing every detector box with a checkbox
/// per action, and a VIA 3 project drawing them on the videos (for Chromium, and for Firefox
/// with `--via-browser firefox`). Ticked as a person would and imported, the task and the
/// projects each give those boxes with those actions.
#[test]
fn keyframe_images_a_cvat_task_and_a_via_project_go_out_and_come_back_through_import() {
    let work = tempfile::tempdir().unwrap();
    let detections = own_clock_detections(work.path());
    let out = work.path().join("keyframes");
    let output = avaprep(work.path())
        .args(["--json", "keyframes", "--videos"])
        .arg(videos())
        .arg("--out")
        .arg(&out)
        .args(["--actions", "stand,walk", "--height", "240", "--detections"])
        .arg(&detections)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let summary: serde_json::Value = stdout(&output)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|record| record["type"] == "keyframes")
        .unwrap();

    // Every second of a 30 fps video from 0: the frame at that instant, 240 rows high.
    let mut images = std::collections::BTreeSet::new();
    for video in report()["videos"].as_array().unwrap() {
        if video["split"] == "test" {
            continue;
        }
        let id = video["id"].as_str().unwrap();
        let folder = out.join("images").join(id);
        let mut seconds: Vec<String> = fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        seconds.sort();
        images.extend(seconds.iter().map(|name| format!("{id}/{name}")));
        let exact = video["frame_rate"] == "30/1" && video["start_time_s"].as_f64() == Some(0.0);
        if !exact {
            continue;
        }
        let duration = video["duration_s"].as_f64().unwrap();
        assert_eq!(seconds.len(), duration.ceil() as usize, "{id}: {seconds:?}");
        for (second, name) in seconds.iter().enumerate() {
            assert_eq!(name, &format!("{second:06}.jpg"));
            let image = image::open(folder.join(name)).unwrap().to_luma8();
            assert_eq!(image.height(), 240, "{id}/{name}");
            let code = avaprep_testbed::synth::read_frame_code(
                image.as_raw(),
                image.width(),
                240,
                image.width() as usize,
            );
            assert_eq!(code, Some(second as u32 * 30), "{id}/{name}");
        }
    }
    assert_eq!(
        summary["images"].as_u64(),
        Some(images.len() as u64),
        "{summary}"
    );
    let archive = zip::ZipArchive::new(fs::File::open(out.join("images.zip")).unwrap()).unwrap();
    let archived: std::collections::BTreeSet<String> = archive
        .file_names()
        .map(|name| name.unwrap().into_owned())
        .collect();
    assert_eq!(archived, images);

    // The task: each image's size, and each detector box once, every checkbox clear.
    let task = fs::read_to_string(out.join("annotations.xml")).unwrap();
    let document = roxmltree::Document::parse(&task).unwrap();
    let boxes: Vec<roxmltree::Node> = document
        .descendants()
        .filter(|node| node.has_tag_name("box"))
        .collect();
    assert!(!boxes.is_empty());
    assert_eq!(
        summary["boxes"].as_u64(),
        Some(boxes.len() as u64),
        "{summary}"
    );
    for node in document
        .descendants()
        .filter(|node| node.has_tag_name("image"))
    {
        let name = node.attribute("name").unwrap();
        let (width, height) = image::image_dimensions(out.join("images").join(name)).unwrap();
        assert_eq!(
            node.attribute("width"),
            Some(width.to_string().as_str()),
            "{name}"
        );
        assert_eq!(
            node.attribute("height"),
            Some(height.to_string().as_str()),
            "{name}"
        );
    }
    let unticked = task.matches(">false</attribute>").count();
    assert_eq!(unticked, 2 * boxes.len());

    // A person ticks `walk` on every box, exports, and imports.
    let ticked = task.replace(
        "<attribute name=\"walk\">false</attribute>",
        "<attribute name=\"walk\">true</attribute>",
    );
    let import_ticked = |name: &str, ticked: String, browser: &str| {
        let export = work.path().join(name);
        fs::write(&export, ticked).unwrap();
        let dataset = work.path().join(format!("{name}.dataset"));
        let val = val_videos().join(",");
        imported(
            &export,
            &videos(),
            &dataset,
            &[
                "--action-from",
                "checkboxes",
                "--val",
                &val,
                "--via-browser",
                browser,
            ],
        );
        assert_boxes_are_the_detectors_with_walk(&dataset, &detections);
    };
    import_ticked("labelled.xml", ticked, "chromium");

    // Every box ticked but one video's, left to predict on: its boxes, drawn and never ticked,
    // are no labels, so `--test` takes it (before, "test video ... is labelled").
    let val = val_videos();
    let to_predict = report()["videos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|video| video["id"].as_str().unwrap().to_string())
        .find(|id| !val.contains(id) && task.contains(&format!("name=\"{id}/")))
        .unwrap();
    let ticked_but = |left: &str| -> String {
        task.split_inclusive("</image>")
            .map(|image| match image.contains(&format!("name=\"{left}/")) {
                true => image.to_string(),
                false => image.replace(
                    "<attribute name=\"walk\">false</attribute>",
                    "<attribute name=\"walk\">true</attribute>",
                ),
            })
            .collect()
    };
    let export = work.path().join("all-but-one.xml");
    fs::write(&export, ticked_but(&to_predict)).unwrap();
    // The detector's rows as a person detector writes them: no action in the label column.
    let unlabelled = work.path().join("unlabelled-detections.csv");
    let rows: String = fs::read_to_string(&detections)
        .unwrap()
        .lines()
        .map(|line| {
            let mut fields: Vec<&str> = line.split(',').collect();
            fields[6] = "";
            fields.join(",") + "\n"
        })
        .collect();
    fs::write(&unlabelled, rows).unwrap();
    let dataset = work.path().join("all-but-one");
    let output = imported(
        &export,
        &videos(),
        &dataset,
        &[
            "--action-from",
            "checkboxes",
            "--val",
            &val.join(","),
            "--detections",
            unlabelled.to_str().unwrap(),
            "--test",
            &to_predict,
        ],
    );
    assert!(
        !stdout(&output).contains("without an action"),
        "{}",
        stdout(&output)
    );
    let splits = &json(&dataset.join("import.json"))["splits"];
    assert_eq!(splits["test"], serde_json::json!([to_predict]));
    // A test video misspelt is named with the videos nobody labelled; read by label (the
    // default), the untouched boxes all say `person`, and the error says where the actions are.
    let refused = |test: &str, action_from: &str| {
        let output = avaprep(work.path())
            .arg("import")
            .arg(&export)
            .arg("--videos")
            .arg(videos())
            .arg("--out")
            .arg(work.path().join("refused"))
            .args(["--action-from", action_from, "--val", &val.join(",")])
            .arg("--detections")
            .arg(&unlabelled)
            .args(["--test", test])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        stderr(&output)
    };
    let said = refused("no_such_video", "checkboxes");
    assert!(
        said.contains(&format!("the videos there no export labels: {to_predict})")),
        "{said}"
    );
    let said = refused(&to_predict, "label");
    assert!(
        said.contains("its boxes' only action is `person`")
            && said.contains("--action-from checkboxes"),
        "{said}"
    );

    // The VIA project: every video's file, the same boxes, no action ticked yet.
    let mut project = json(&out.join("via_project.json"));
    let stems: std::collections::BTreeSet<&str> = project["file"]
        .as_object()
        .unwrap()
        .values()
        .map(|file| file["fname"].as_str().unwrap().rsplit_once('.').unwrap().0)
        .collect();
    let keyframed: std::collections::BTreeSet<&str> = images
        .iter()
        .map(|name| name.split('/').next().unwrap())
        .collect();
    assert_eq!(stems, keyframed);
    assert_eq!(project["attribute"]["1"]["type"], 2, "a checkbox");
    assert_eq!(project["attribute"]["1"]["anchor_id"], "FILE1_Z1_XY1");
    let views: Vec<&String> = project["view"].as_object().unwrap().keys().collect();
    let mut listed: Vec<&str> = project["project"]["vid_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|view| view.as_str().unwrap())
        .collect();
    listed.sort();
    assert_eq!(listed, views);
    assert_eq!(
        project["attribute"]["1"]["options"],
        serde_json::json!({"0": "stand", "1": "walk"})
    );
    let metadata = project["metadata"].as_object_mut().unwrap();
    assert_eq!(metadata.len() as u64, summary["boxes"].as_u64().unwrap());
    // A person ticks `walk` on every box in VIA and saves the project.
    for region in metadata.values_mut() {
        assert_eq!(region["av"], serde_json::json!({}));
        assert_eq!(region["z"].as_array().unwrap().len(), 1, "{region}");
        assert_eq!(region["xy"][0], 2, "a rectangle: {region}");
        region["av"] = serde_json::json!({"1": "1"});
    }
    import_ticked("labelled_via.json", project.to_string(), "chromium");

    // For VIA in Firefox, which starts every video at 0 on its timeline: each box earlier by
    // its video's first timestamp (the miniature has videos starting at 1.4 s and 0.5 s).
    let for_firefox = work.path().join("keyframes_firefox");
    let output = avaprep(work.path())
        .args(["keyframes", "--videos"])
        .arg(videos())
        .arg("--out")
        .arg(&for_firefox)
        .args([
            "--actions",
            "stand,walk",
            "--height",
            "48",
            "--via-browser",
            "firefox",
        ])
        .arg("--detections")
        .arg(&detections)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let next = stdout(&output);
    assert!(
        next.contains("--action-from checkboxes --via-browser firefox"),
        "the import to run next reads the project as Firefox's: {next}"
    );
    let mut firefox_project = json(&for_firefox.join("via_project.json"));
    let starts: std::collections::BTreeMap<String, f64> = report()["videos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|video| {
            let start = video["start_time_s"].as_f64().unwrap();
            (video["id"].as_str().unwrap().to_string(), start)
        })
        .collect();
    assert!(starts.values().any(|start| *start > 0.1), "{starts:?}");
    let video_of_view = |project: &serde_json::Value, view: &str| -> String {
        let file = project["view"][view]["fid_list"][0].as_str().unwrap();
        let name = project["file"][file]["fname"].as_str().unwrap();
        name.rsplit_once('.').unwrap().0.to_string()
    };
    let chromium_regions = project["metadata"].as_object().unwrap();
    let firefox_view = firefox_project.clone();
    let firefox_regions = firefox_project["metadata"].as_object_mut().unwrap();
    assert_eq!(firefox_regions.len(), chromium_regions.len());
    for (key, region) in firefox_regions.iter_mut() {
        let video = video_of_view(&firefox_view, region["vid"].as_str().unwrap());
        let chromium = &chromium_regions[key];
        assert_eq!(
            video_of_view(&project, chromium["vid"].as_str().unwrap()),
            video
        );
        let earlier = chromium["z"][0].as_f64().unwrap() - region["z"][0].as_f64().unwrap();
        assert!(
            (earlier - starts[&video].max(0.0)).abs() < 1e-4,
            "{key} of {video}: {earlier} s earlier in Firefox"
        );
        assert_eq!(region["xy"], chromium["xy"], "{key}");
        region["av"] = serde_json::json!({"1": "1"});
    }
    import_ticked(
        "labelled_via_firefox.json",
        firefox_project.to_string(),
        "firefox",
    );
}

/// Each box of the import in `dataset` is one of `detections`' boxes at its video and second
/// (within the rounding of an export's pixels), each once, with `walk` (action 1) alone.
fn assert_boxes_are_the_detectors_with_walk(dataset: &Path, detections: &Path) {
    let imported = json(&dataset.join("import.json"));
    let shift = |video: &str| imported["file_starts"][video].as_i64().unwrap();
    let mut truth: Vec<(String, i64, Vec<f64>)> = ["train", "val"]
        .iter()
        .flat_map(|split| {
            fs::read_to_string(dataset.join(format!("annotations/ava_{split}_v2.2.csv")))
                .unwrap()
                .lines()
                .map(|line| {
                    let fields: Vec<&str> = line.split(',').collect();
                    assert_eq!(fields[6], "1", "walk, the one action: {line}");
                    let corners = fields[2..6].iter().map(|f| f.parse().unwrap()).collect();
                    (
                        fields[0].to_string(),
                        fields[1].parse::<i64>().unwrap() - shift(fields[0]),
                        corners,
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut drawn: Vec<(String, i64, Vec<f64>)> = fs::read_to_string(detections)
        .unwrap()
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            let corners = fields[2..6].iter().map(|f| f.parse().unwrap()).collect();
            (fields[0].to_string(), fields[1].parse().unwrap(), corners)
        })
        .collect();
    let order = |a: &(String, i64, Vec<f64>), b: &(String, i64, Vec<f64>)| {
        (&a.0, a.1)
            .cmp(&(&b.0, b.1))
            .then(a.2.partial_cmp(&b.2).unwrap())
    };
    drawn.sort_by(order);
    drawn.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1 && a.2 == b.2);
    truth.sort_by(order);
    assert_eq!(truth.len(), drawn.len());
    for (got, want) in truth.iter().zip(&drawn) {
        assert_eq!((&got.0, got.1), (&want.0, want.1));
        for (g, w) in got.2.iter().zip(&want.2) {
            assert!(
                (g - w).abs() <= 0.002,
                "{got:?} against the detector's {want:?}"
            );
        }
    }
}

/// The same small training for both paths: the demo's tiny SlowFast on the CPU at 240p.
fn own_settings(epochs: &str) -> Vec<String> {
    [
        "extract.height=240",
        "train.preset=\"synthetic-tiny\"",
        &format!("train.settings.epochs={epochs}"),
        "train.settings.eval_every=1",
        "train.settings.patience=6",
        "train.settings.device=\"cpu\"",
    ]
    .iter()
    .flat_map(|setting| ["--set".to_string(), setting.to_string()])
    .collect()
}

/// Each stage's outcome in a `--json` run's records, by stage.
fn stage_outcomes(output: &Output) -> std::collections::BTreeMap<String, String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|record| record["type"] == "stage")
        .map(|record| {
            let text = |key: &str| record[key].as_str().unwrap_or_default().to_string();
            (text("stage"), text("outcome"))
        })
        .collect()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(path).unwrap())
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Clips of their own lengths, as a user's are (12 and 20 s from second 0, cut from the
/// miniature's 30 fps video, named as a camera names files, and 300 of its frames at 29.97 fps,
/// a phone's 10.010 s), labelled whole-clip (`video,start_frame,label`): each video's lists end
/// where its file does, its last keyframe (in its last second) keeps its clip, validation
/// passes (the 29.97 fps clip's last frame shows the instants after it, to its end), and
/// PySlowFast's own loader reads every keyframe's clip centred on it.
#[test]
fn clips_of_their_own_lengths_are_listed_to_their_ends_and_no_further() {
    let source = thirty_fps_video();
    let clips = tempfile::tempdir().unwrap();
    let lengths = [
        ("clip12", 12),
        ("cam3_2024-05-01_1200", 20),
        ("phone10", 10),
    ];
    for (name, seconds) in lengths {
        // Lossless and without B-frames: the frames keep their burned-in codes exactly.
        let out = clips.path().join(format!("{name}.mp4"));
        let source = source.to_str().unwrap();
        let length = seconds.to_string();
        let cut = match name {
            // The same frames, timed at 29.97 a second: 300 of them end at 10.010 s.
            "phone10" => vec!["-r", "30000/1001", "-i", source, "-frames:v", "300"],
            _ => vec!["-i", source, "-t", &length],
        };
        ffmpeg(&[&cut[..], &LOSSLESS_H264, &["-an", out.to_str().unwrap()]].concat());
    }
    let labels = clips.path().join("labels.csv");
    fs::write(
        &labels,
        "video,start_frame,label\nclip12,0,wave\nclip12,180,fall\n\
         cam3_2024-05-01_1200,0,fight\ncam3_2024-05-01_1200,300,wave\n\
         cam3_2024-05-01_1200,300,fall\nphone10,0,fall\n",
    )
    .unwrap();
    let own = tempfile::tempdir().unwrap();
    let output = imported(
        &labels,
        clips.path(),
        own.path(),
        &["--val", "cam3_2024-05-01_1200"],
    );
    assert!(
        stdout(&output).contains("actions: 1 wave, 2 fall, 3 fight"),
        "{}",
        stdout(&output)
    );
    // The pipeline written beside the dataset is the one to run, from any folder.
    let pipeline = own.path().join("pipeline.toml");
    assert!(
        stdout(&output).contains(&format!(
            "next: avaprep --data-dir work run {}",
            pipeline.display()
        )),
        "{}",
        stdout(&output)
    );
    let truth = fs::read_to_string(own.path().join("annotations/ava_train_v2.2.csv")).unwrap();
    let seconds: std::collections::BTreeSet<&str> = truth
        .lines()
        .map(|line| line.split(',').nth(1).unwrap())
        .collect();
    // Own seconds 0..=11 of a 12-second clip, on AVA's clock from 902.
    let expected: std::collections::BTreeSet<String> =
        (902..=913).map(|second| format!("{second:04}")).collect();
    assert_eq!(
        seconds,
        expected.iter().map(String::as_str).collect(),
        "{truth}"
    );
    assert!(
        truth.contains("clip12,0908,0.000,0.000,1.000,1.000,2,1"),
        "{truth}"
    );

    let data = tempfile::tempdir().unwrap();
    validated_run(data.path(), own.path(), "extract.height=240");

    let spans = fs::read_to_string(own.path().join("annotations/video_spans.csv")).unwrap();
    for (name, seconds) in lengths {
        let line = spans
            .lines()
            .find(|line| line.starts_with(&format!("{name},")))
            .unwrap();
        let end: f64 = line.rsplit(',').next().unwrap().parse().unwrap();
        assert!((end - 902.0 - f64::from(seconds)).abs() < 0.1, "{line}");
        let split = match name.starts_with("cam3") {
            true => "val",
            false => "train",
        };
        let list =
            fs::read_to_string(data.path().join(format!("frame_lists/{split}.csv"))).unwrap();
        let rows: Vec<&str> = list
            .lines()
            .filter(|row| row.starts_with(&format!("{name} ")))
            .collect();
        // Rows from second 900 to the file's end at 30 a second, not to the dataset's end.
        assert_eq!(
            rows.len(),
            ((end - 900.0) * 30.0).round() as usize,
            "{name}"
        );
        let last_target = last_frame_instant(data.path(), name);
        assert!(
            last_target < end,
            "{name}: a frame at {last_target} past {end}"
        );
    }
    // Train: a clip per keyframe of clip12 and phone10, the last in each one's last second;
    // val: PySlowFast evaluates every fourth second (904, 908, ..., 920 of cam3's 902..921).
    for (split, clips) in [("train", 12 + 10), ("val", 5)] {
        let report = reference_report("pyslowfast_ava.py", data.path(), &[split]);
        assert_eq!(report["clips"].as_u64(), Some(clips), "{split}: {report}");
    }
    // pytorchvideo takes a clip from the frames a folder has: its view runs on past a file's
    // end, so a keyframe in a file's last second keeps its whole clip (3 s, AVA's label context).
    for split in ["train", "val"] {
        let report = reference_report("pytorchvideo_ava.py", data.path(), &[split, "90"]);
        assert_eq!(
            report["frames_per_clip"],
            serde_json::json!([90]),
            "{split}: {report}"
        );
        assert!(report["clips"].as_u64().unwrap() > 0, "{split}: {report}");
    }
    // Without a detector, the page says the proposals are the ground truth's.
    let page = report_page(data.path(), 902);
    assert!(
        page.contains("<th>proposals</th><td>the boxes scored are the ground truth"),
        "{page}"
    );

    // Labelling more and importing again: the next run takes the new tables, the ids stay, and
    // the pipeline as its user edited it stays.
    let more = fs::read_to_string(&labels).unwrap() + "clip12,300,fight\n";
    fs::write(&labels, more).unwrap();
    let edited = fs::read_to_string(&pipeline).unwrap() + "# edited\n";
    fs::write(&pipeline, &edited).unwrap();
    imported(
        &labels,
        clips.path(),
        own.path(),
        &["--val", "cam3_2024-05-01_1200"],
    );
    assert_eq!(fs::read_to_string(&pipeline).unwrap(), edited);
    validated_run(data.path(), own.path(), "extract.height=240");
    let truth =
        fs::read_to_string(data.path().join("slowfast/annotations/ava_train_v2.2.csv")).unwrap();
    assert!(
        truth.contains("clip12,0912,0.000,0.000,1.000,1.000,3,1"),
        "{truth}"
    );
    assert!(
        !truth.contains("clip12,0912,0.000,0.000,1.000,1.000,2,1"),
        "{truth}"
    );
}

/// An import with no val split (`--val-fraction 0`) into a folder whose name has a space: its
/// summary's `next:` command, quoted for a shell, runs the pipeline written beside the dataset,
/// which trains on every video through its whole schedule and scores nothing.
#[test]
fn an_import_without_val_writes_a_pipeline_that_trains_on_every_video() {
    let (clips, labels) = cut_clips(&[("walk_a", "6"), ("walk_b", "4")]);
    let work = tempfile::tempdir().unwrap();
    let own = work.path().join("own data");
    let output = imported(&labels, clips.path(), &own, &["--val-fraction", "0"]);
    let said = stdout(&output);
    let pipeline = own.join("pipeline.toml");
    assert!(said.contains("no val split"), "{said}");
    let next = format!("next: avaprep --data-dir work run '{}'", pipeline.display());
    assert!(said.contains(&next), "{said}");
    let data = work.path().join("data");
    let run = tiny_run(&data, &pipeline);
    assert!(run.status.success(), "{}", stderr(&run));
    let evaluation = json(&data.join("work/eval.json"));
    assert_eq!(evaluation["splits"], serde_json::json!([]), "{evaluation}");
    // Nothing scored: nothing said of what the scores measure.
    assert!(
        !stdout(&run).contains("the boxes scored are"),
        "{}",
        stdout(&run)
    );
    let trained = fs::read_to_string(
        data.join("runs")
            .read_dir()
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join("config.toml"),
    )
    .unwrap();
    assert!(trained.contains("val_split = \"\""), "{trained}");
    assert!(data.join("report/index.html").is_file());
}

/// A clip whose frames come faster at its end than at its start is extracted to its last frame.
/// The import once recorded where the file ends from the mean frame period, later than the end
/// extraction finds from the last frame, and the frames of the last keyframe's clip failed as
/// "the video ends at 10.0 s".
#[test]
fn a_clip_of_a_variable_frame_rate_is_extracted_to_its_end() {
    let source = thirty_fps_video();
    let clips = tempfile::tempdir().unwrap();
    let clip = clips.path().join("speeding.mkv");
    // 100 frames at 20 a second, then 125 at 25: the last at 9.96 s, each shown for 33 ms as
    // the packets say; the mean period reaches past 10.0 s, a frame instant at 5 fps.
    let timing = "settb=1/1000,setpts='if(lt(N,100),N/20,5+(N-100)/25)/TB'";
    let speeding = [
        "-i",
        source.to_str().unwrap(),
        "-frames:v",
        "225",
        "-vf",
        timing,
        "-fps_mode",
        "passthrough",
        "-enc_time_base",
        "1/1000",
    ];
    ffmpeg(
        &[
            &speeding[..],
            &LOSSLESS_H264,
            &["-an", clip.to_str().unwrap()],
        ]
        .concat(),
    );
    let labels = clips.path().join("labels.csv");
    fs::write(&labels, "video,start_frame,label\nspeeding,0,walk\n").unwrap();
    let own = tempfile::tempdir().unwrap();
    imported(&labels, clips.path(), own.path(), &[]);
    let spans = fs::read_to_string(own.path().join("annotations/video_spans.csv")).unwrap();
    let end: f64 = spans.trim().rsplit(',').next().unwrap().parse().unwrap();
    assert!((end - 911.993).abs() < 1e-6, "{spans}");
    let data = tempfile::tempdir().unwrap();
    let output = avaprep(data.path())
        .arg("run")
        .arg(own.path().join("pipeline.toml"))
        .args(["--until", "extract", "--set", "extract.height=64"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let last_target = last_frame_instant(data.path(), "speeding");
    // 9.8 s from the file's start, the last instant of the 5 fps grid before its end.
    assert!((last_target - 911.8).abs() < 1e-6, "{last_target}");
}

/// The instant of a video's last extracted frame, on the dataset's clock (its frame index).
fn last_frame_instant(data: &Path, video: &str) -> f64 {
    let index = fs::read_to_string(data.join(format!("frame_index/{video}.csv"))).unwrap();
    let last = index.lines().last().unwrap();
    last.split(',').nth(1).unwrap().parse().unwrap()
}

/// A video taken out of the folder after a run is dropped everywhere: the lists leave it out
/// and so does training, which says so (it once failed on the video's missing frame index while
/// the lists and validate passed). With the val split's only video gone, the lists still serve
/// the train split (they once failed on the empty proposals as "a truncated download"), and
/// training names the split and its video without frames.
#[test]
fn a_video_taken_away_is_left_out_of_training_and_a_split_of_none_is_named() {
    let (clips, _) = cut_clips(&[("walk_a", "3"), ("walk_b", "3"), ("walk_c", "3")]);
    let labels = clips.path().join("labels.csv");
    fs::write(
        &labels,
        "video,start_frame,label\nwalk_a,0,walk\nwalk_b,0,stand\nwalk_c,0,walk\n",
    )
    .unwrap();
    let own = tempfile::tempdir().unwrap();
    imported(&labels, clips.path(), own.path(), &["--val", "walk_c"]);
    let pipeline = own.path().join("pipeline.toml");
    let data = tempfile::tempdir().unwrap();
    let prepared = avaprep(data.path())
        .arg("run")
        .arg(&pipeline)
        .args(["--until", "validate", "--set", "extract.height=120"])
        .output()
        .unwrap();
    assert!(prepared.status.success(), "{}", stderr(&prepared));

    fs::remove_file(clips.path().join("walk_b.mp4")).unwrap();
    let trained = tiny_run(data.path(), &pipeline);
    let said = format!("{}{}", stdout(&trained), stderr(&trained));
    assert!(
        said.contains("1 video without frames left out (walk_b), as the lists do"),
        "{said}"
    );
    let recorded = json(&data.path().join("work/train.json"));
    let weights = data.path().join(recorded["weights"].as_str().unwrap());
    assert!(weights.is_file(), "{recorded}");
    // `status` names the video gone beside its done stage (it once showed only "done 3/3").
    let status = avaprep(data.path())
        .arg("status")
        .arg(&pipeline)
        .args(["--set", "extract.height=120"])
        .output()
        .unwrap();
    let fetch_line = stdout(&status)
        .lines()
        .find(|line| line.starts_with("fetch-videos"))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(
        fetch_line.contains("done")
            && fetch_line.contains("(1 missing: video walk_b: no walk_b.mkv"),
        "{}",
        stdout(&status)
    );

    fs::remove_file(clips.path().join("walk_c.mp4")).unwrap();
    let refused = tiny_run(data.path(), &pipeline);
    assert_eq!(refused.status.code(), Some(1), "{}", stdout(&refused));
    let message = stderr(&refused);
    assert!(
        message.contains("split `val` has no clips: its videos without frames: walk_c (slowfast/dropped_videos.txt says why)")
            && !message.contains("truncated"),
        "{message}"
    );
    let dropped = fs::read_to_string(data.path().join("slowfast/dropped_videos.txt")).unwrap();
    assert!(
        dropped.contains("walk_c: missing: video walk_c: no walk_c.mkv"),
        "{dropped}"
    );
}

/// A video labelled later, longer than the others, moves the dataset's last keyframe: only it is
/// extracted (every video once was, as the segment's end moved), and the others' frames stay.
#[test]
fn a_longer_video_labelled_later_extracts_alone() {
    let (clips, labels) = cut_clips(&[("walk_a", "4"), ("walk_b", "8")]);
    fs::write(&labels, "video,start_frame,label\nwalk_a,0,walk\n").unwrap();
    let own = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let extracted = || {
        imported(&labels, clips.path(), own.path(), &["--val-fraction", "0"]);
        let output = avaprep(data.path())
            .args(["--json", "run"])
            .arg(own.path().join("pipeline.toml"))
            .args(["--until", "extract", "--set", "extract.height=120"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output)
    };
    let made = |video: &str| {
        use std::os::unix::fs::MetadataExt;
        let index = fs::metadata(data.path().join(format!("frame_index/{video}.csv"))).unwrap();
        (index.ino(), index.mtime_nsec(), index.mtime())
    };
    extracted();
    let walk_a = made("walk_a");
    assert!((last_frame_instant(data.path(), "walk_a") - 905.8).abs() < 1e-6);

    fs::write(
        &labels,
        "video,start_frame,label\nwalk_a,0,walk\nwalk_b,0,stand\n",
    )
    .unwrap();
    let said = extracted();
    assert_eq!(made("walk_a"), walk_a, "{said}");
    assert!((last_frame_instant(data.path(), "walk_b") - 909.8).abs() < 1e-6);
}

/// Clips cut from the miniature's 30 fps video (name, seconds), and whole-clip labels of two of
/// them: `walk_a` walks, `walk_b` stands.
fn cut_clips(lengths: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let source = thirty_fps_video();
    let clips = tempfile::tempdir().unwrap();
    for (name, seconds) in lengths {
        let out = clips.path().join(format!("{name}.mp4"));
        let cut = ["-i", source.to_str().unwrap(), "-t", seconds];
        ffmpeg(&[&cut[..], &LOSSLESS_H264, &["-an", out.to_str().unwrap()]].concat());
    }
    let labels = clips.path().join("labels.csv");
    fs::write(
        &labels,
        "video,start_frame,label\nwalk_a,0,walk\nwalk_b,0,stand\n",
    )
    .unwrap();
    (clips, labels)
}

/// `avaprep run PIPELINE` with small frames and the tiny network for two epochs.
fn tiny_run(data: &Path, pipeline: &Path) -> Output {
    avaprep(data)
        .arg("run")
        .arg(pipeline)
        .args(["--set", "extract.height=120"])
        .args(["--set", "train.preset=\"synthetic-tiny\""])
        .args(["--set", "train.settings.epochs=2"])
        .output()
        .unwrap()
}

/// Videos named `--test` (not labelled) are the test split: their keyframes are the seconds the
/// detector boxes someone at within the file (a box past a 3 s clip's end is left out and
/// counted), each on a clock of its own, and the pipeline import writes predicts on them: eval's
/// test detections are the detector's boxes at exactly those seconds, on the files' own seconds.
/// A test video that is labelled, not in the folder, or named without detections is a usage
/// error, and so are test videos the detections box nobody in and a split they box nobody in
/// (its file would be empty); one test video of several left out is named with why. Importing
/// again says nothing of edits.
#[test]
fn test_videos_are_predicted_on_at_the_detector_s_boxes_on_their_own_seconds() {
    let lengths = [
        ("walk_a", "6"),
        ("walk_b", "4"),
        ("new_c", "3"),
        ("new_d", "9"),
        ("new_e", "2"),
    ];
    let (clips, labels) = cut_clips(&lengths);
    let detector_box = |video: &str| match video {
        "new_d" => "0.200,0.100,0.600,0.900",
        _ => "0.100,0.200,0.500,0.800",
    };
    let rows = |video: &str, seconds: std::ops::RangeInclusive<u32>| -> String {
        seconds
            .map(|second| format!("{video},{second},{},,0.9\n", detector_box(video)))
            .collect()
    };
    let labelled = rows("walk_a", 0..=5) + &rows("walk_b", 0..=3);
    let detections = clips.path().join("detections.csv");
    fs::write(
        &detections,
        labelled.clone() + &rows("new_c", 0..=5) + &rows("new_d", 1..=8),
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let own = work.path().join("own");
    // `avaprep import` of the labels with walk_b as val, into `out`.
    let import_into = |out: &Path, extra: &[&str]| {
        avaprep(work.path())
            .arg("import")
            .arg(&labels)
            .arg("--videos")
            .arg(clips.path())
            .arg("--out")
            .arg(out)
            .args(["--val", "walk_b"])
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = |extra: &[&str], expected: &str| {
        let output = import_into(&own, extra);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{}", stderr(&output));
        assert!(!own.join("dataset.toml").exists());
    };
    let with_detections = ["--detections", detections.to_str().unwrap()];
    refused(&["--test", "new_c"], "--detections");
    refused(
        &[&with_detections[..], &["--test", "walk_a"]].concat(),
        "test video walk_a is labelled in",
    );
    refused(
        &[&with_detections[..], &["--test", "new_x"]].concat(),
        "test video new_x is not in",
    );
    refused(
        &[&with_detections[..], &["--test", "new_x"]].concat(),
        "the videos there no export labels: new_c, new_d, new_e)",
    );
    // Detections of their own, in a file named `name`, with one test video.
    let refused_with = |name: &str, rows: String, test: &str, expected: &str| {
        let path = clips.path().join(name);
        fs::write(&path, rows).unwrap();
        refused(
            &["--detections", path.to_str().unwrap(), "--test", test],
            expected,
        );
    };
    refused_with(
        "train-only.csv",
        rows("walk_a", 0..=5) + &rows("new_d", 1..=8),
        "new_d",
        "the detections box nobody at a keyframe of the val videos (walk_b)",
    );
    refused_with(
        "past-its-end.csv",
        labelled.clone() + &rows("new_c", 3..=5),
        "new_c",
        "no test video could be used: new_c: a test video, but its boxes scoring 0.8 or more are at seconds 3, 4, 5, none a keyframe within the file",
    );
    // A detector's file joined twice: each repeated row counts once, as PySlowFast reads a
    // box, and the proposals written have no repeat (validate refused them).
    let twice = clips.path().join("twice.csv");
    fs::write(&twice, labelled.clone() + &labelled).unwrap();
    let joined_out = work.path().join("joined");
    let joined = import_into(&joined_out, &["--detections", twice.to_str().unwrap()]);
    assert!(joined.status.success(), "{}", stderr(&joined));
    assert!(
        stdout(&joined).contains(&format!(
            "{} detector rows repeating another (the same box, second, label and score), counted once",
            labelled.lines().count()
        )),
        "{}",
        stdout(&joined)
    );
    for name in [
        "ava_detection_train_boxes_and_labels_include_negative_v2.2.csv",
        "ava_detection_val_boxes_and_labels.csv",
    ] {
        let proposals = fs::read_dir(joined_out.join("annotations"))
            .unwrap()
            .flatten()
            .map(|entry| entry.path().join(name))
            .find(|path| path.is_file())
            .unwrap_or_else(|| panic!("no {name}"));
        let rows = fs::read_to_string(&proposals).unwrap();
        let unique: std::collections::BTreeSet<&str> = rows.lines().collect();
        assert_eq!(unique.len(), rows.lines().count(), "{rows}");
    }
    // A test video the detector boxes nobody in with PySlowFast's score is left out, named
    // with why (not as a video the import does not know), and the others are imported.
    let faint = clips.path().join("faint.csv");
    let faint_rows = rows("new_e", 0..=1).replace(",0.9\n", ",0.5\n");
    fs::write(
        &faint,
        labelled.clone() + &rows("new_c", 0..=2) + &faint_rows,
    )
    .unwrap();
    let partly = import_into(
        &work.path().join("partly"),
        &[
            "--test",
            "new_c,new_e",
            "--detections",
            faint.to_str().unwrap(),
        ],
    );
    let said = stdout(&partly) + &stderr(&partly);
    assert_eq!(partly.status.code(), Some(1), "{said}");
    assert!(
        said.contains("new_e: a test video, but the detections have no box of it scoring 0.8")
            && said.contains("test: 1 video to predict on")
            && !said.contains("not imported"),
        "{said}"
    );

    let extra = [
        &with_detections[..],
        &["--val", "walk_b", "--test", "new_c,new_d"],
    ]
    .concat();
    let output = imported(&labels, clips.path(), &own, &extra);
    // walk_a's action is on no val box: the val mAP cannot score it, and the import says so;
    // whole-clip labels are whole-frame boxes, which no detector box overlaps enough to score.
    assert!(
        stderr(&output).contains("no val box has walk: the val mAP scores only the other actions")
            && stderr(&output).contains("labelled boxes are the whole frame"),
        "{}",
        stderr(&output)
    );
    let said = stdout(&output);
    // new_c's keyframes are 0..2 (its boxes at 3..5 are past its end), new_d's 1..8.
    assert!(
        said.contains("test: 2 videos to predict on, at the 11 keyframes"),
        "{said}"
    );
    assert!(
        said.contains("3 detector boxes at seconds that are no keyframe"),
        "{said}"
    );
    let summary = json(&own.join("import.json"));
    assert_eq!(
        summary["splits"]["test"],
        serde_json::json!(["new_c", "new_d"])
    );
    // Each on its own clock: new_d's first keyframe (its second 1) on 902.
    assert_eq!(summary["file_starts"]["new_d"], 901, "{summary}");
    assert_eq!(summary["file_starts"]["walk_a"], 902, "{summary}");

    let data = work.path().join("data");
    let run = tiny_run(&data, &own.join("pipeline.toml"));
    assert!(run.status.success(), "{}", stderr(&run));
    let run_dir = fs::read_dir(data.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let predicted =
        fs::read_to_string(run_dir.join("eval/test_detections.own-seconds.csv")).unwrap();
    let mut places = std::collections::BTreeSet::new();
    for line in predicted.lines() {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), 8, "{line}");
        assert_eq!(fields[2..6].join(","), detector_box(fields[0]), "{line}");
        assert!(["1", "2"].contains(&fields[6]), "{line}");
        places.insert((fields[0].to_string(), fields[1].parse::<u32>().unwrap()));
    }
    let expected: std::collections::BTreeSet<(String, u32)> = (0..=2)
        .map(|second| ("new_c".to_string(), second))
        .chain((1..=8).map(|second| ("new_d".to_string(), second)))
        .collect();
    assert_eq!(places, expected, "{predicted}");

    // The report draws the model's actions on a test keyframe, named by the dataset's second
    // (new_d's second 1 is 902); given the file's second, it says which to give.
    let page = work.path().join("page");
    let report = |keyframe: &str| {
        avaprep(&data)
            .args(["report", "--keyframe", keyframe, "--out"])
            .arg(&page)
            .output()
            .unwrap()
    };
    let drawn = report("new_d,0902");
    assert!(drawn.status.success(), "{}", stderr(&drawn));
    let html = fs::read_to_string(page.join("index.html")).unwrap();
    let figure = html
        .split("<figure ")
        .find(|figure| figure.contains("data-video=\"new_d\" data-second=\"902\""))
        .unwrap_or_else(|| panic!("no figure of new_d,902: {html}"));
    assert!(
        figure.contains("(test): no ground truth (a video to predict on)")
            && figure.contains("class=\"detections\""),
        "{figure}"
    );
    let file_second = report("new_d,1");
    assert_ne!(file_second.status.code(), Some(0));
    assert!(
        stderr(&file_second).contains("the file's second 1 is new_d,0902"),
        "{}",
        stderr(&file_second)
    );

    // Importing again (one test video fewer) is how the dataset is changed: the run redoes
    // what changed and says nothing of edits belonging elsewhere.
    let extra = [
        &with_detections[..],
        &["--val", "walk_b", "--test", "new_c"],
    ]
    .concat();
    imported(&labels, clips.path(), &own, &extra);
    let again = avaprep(&data)
        .arg("run")
        .arg(own.join("pipeline.toml"))
        .args(["--until", "validate"])
        .args(["--set", "extract.height=120"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", stderr(&again));
    let said = stdout(&again) + &stderr(&again);
    assert!(
        said.contains("changed since made")
            && !said.contains("edit the exports")
            && !said.contains("the folder they are copied from"),
        "{said}"
    );

    // The whole pipeline then predicts on the test videos left without training again: nothing
    // training reads changed, so the run folder and its weights are kept as they were.
    let runs = || -> Vec<PathBuf> {
        let mut runs: Vec<PathBuf> = fs::read_dir(data.join("runs"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        runs.sort();
        runs
    };
    let weights = |run_dir: &Path| -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
        let mut files: Vec<_> = fs::read_dir(run_dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "safetensors"))
            .map(|path| {
                let modified = fs::metadata(&path).unwrap().modified().unwrap();
                (path.clone(), fs::read(&path).unwrap(), modified)
            })
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no weights in {}", run_dir.display());
        files
    };
    let trained = weights(&run_dir);
    let kept = tiny_run(&data, &own.join("pipeline.toml"));
    let said = stdout(&kept) + &stderr(&kept);
    assert!(kept.status.success(), "{said}");
    assert!(said.contains("its weights are kept, no training"), "{said}");
    assert_eq!(runs(), std::slice::from_ref(&run_dir), "{said}");
    assert!(weights(&run_dir) == trained, "the weights changed: {said}");
    let predicted =
        fs::read_to_string(run_dir.join("eval/test_detections.own-seconds.csv")).unwrap();
    let videos: std::collections::BTreeSet<&str> = predicted
        .lines()
        .map(|line| line.split(',').next().unwrap())
        .collect();
    assert_eq!(videos, ["new_c"].into(), "{predicted}");

    // Continuing the run by hand changes its weights: the pipeline no longer keeps it.
    let reads = run_dir.join("reads.sha256");
    assert!(reads.is_file(), "{said}");
    let continued = avaprep(&data)
        .args(["train", "--resume", "--run-dir"])
        .arg(&run_dir)
        .args(["--set", "epochs=3"])
        .output()
        .unwrap();
    assert!(continued.status.success(), "{}", stderr(&continued));
    assert!(
        !reads.exists(),
        "a continued run still says what it was trained on"
    );
    assert!(run_dir.join("trained-by-hand.txt").is_file());
    let trained = weights(&run_dir);

    // Another val video (walk_a for walk_b) changes what training reads: it trains afresh,
    // beside the first run, which it leaves as it was.
    let extra = [
        &with_detections[..],
        &["--val", "walk_a", "--test", "new_c"],
    ]
    .concat();
    imported(&labels, clips.path(), &own, &extra);
    let retrained = tiny_run(&data, &own.join("pipeline.toml"));
    let said = stdout(&retrained) + &stderr(&retrained);
    assert!(retrained.status.success(), "{said}");
    assert!(!said.contains("no training"), "{said}");
    let runs = runs();
    assert_eq!(runs.len(), 2, "{said}");
    assert!(
        weights(&run_dir) == trained,
        "the first run changed: {said}"
    );
    let recorded = json(&data.join("work/train.json"));
    let second = runs.iter().find(|run| **run != run_dir).unwrap();
    assert_eq!(
        data.join(recorded["run_dir"].as_str().unwrap()),
        *second,
        "{recorded}"
    );
    assert!(second.join("reads.sha256").is_file());

    // The first import again: the pipeline's own folder for it is the one continued by hand, on
    // other settings, so it trains in the next folder instead of continuing that checkpoint.
    let extra = [
        &with_detections[..],
        &["--val", "walk_b", "--test", "new_c,new_d"],
    ]
    .concat();
    imported(&labels, clips.path(), &own, &extra);
    let beside = tiny_run(&data, &own.join("pipeline.toml"));
    let said = stdout(&beside) + &stderr(&beside);
    assert!(beside.status.success(), "{said}");
    let next = PathBuf::from(format!("{}-2", run_dir.display()));
    assert!(
        said.contains("was trained by hand since the pipeline made it") && next.is_dir(),
        "{said}"
    );
    assert!(!said.contains("resumed from the checkpoint"), "{said}");
    assert!(
        weights(&run_dir) == trained,
        "the run trained by hand changed: {said}"
    );
    // `predict --out /dev/stdout > log`: the rows, then the summary after them; the rows on
    // the files' own seconds go beside a file --out names, and /dev/stdout is none (they once
    // went to /dev/stdout.own-seconds.csv, and the summary overwrote the first rows).
    let trained = json(&data.join("work/train.json"));
    let log = work.path().join("predicted.log");
    let predicted = avaprep(&data)
        .args(["predict", "--split", "test", "--weights"])
        .arg(data.join(trained["weights"].as_str().unwrap()))
        .args(["--out", "/dev/stdout"])
        .stdout(fs::File::create(&log).unwrap())
        .output()
        .unwrap();
    assert!(predicted.status.success(), "{}", stderr(&predicted));
    assert!(
        stderr(&predicted).contains("go beside a file --out names"),
        "{}",
        stderr(&predicted)
    );
    let logged = fs::read_to_string(&log).unwrap();
    let rows: Vec<&str> = logged
        .lines()
        .take_while(|line| line.split(',').count() == 8)
        .collect();
    let summary = format!("{} detections of", rows.len());
    assert!(!rows.is_empty() && logged.contains(&summary), "{logged}");
    assert!(!Path::new("/dev/stdout.own-seconds.csv").exists());
    // `validate` checks the test split's list and frames too (predict reads them), which no
    // PySlowFast config names: a damaged frame of new_d fails it by name.
    let mut frames: Vec<_> = fs::read_dir(data.join("frames/new_d"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    frames.sort();
    fs::write(&frames[0], b"not a JPEG").unwrap();
    let validated = avaprep(&data)
        .args(["validate", "--quick"])
        .output()
        .unwrap();
    let said = stdout(&validated) + &stderr(&validated);
    let damaged = frames[0].file_name().unwrap().to_str().unwrap();
    assert_eq!(validated.status.code(), Some(1), "{said}");
    assert!(
        said.contains("train.csv, val.csv, test.csv") && said.contains("FAIL frames-decode"),
        "{said}"
    );
    assert!(
        said.contains(&format!("new_d/{damaged}: does not decode")),
        "{said}"
    );
}

/// `keyframes` on a folder with files named as videos that cannot be used as named (a space, a
/// dot in the stem, an upper-case extension) names each with what to rename it to and exits 1,
/// having written the others; detector boxes of a video not written are named by video, apart
/// from those at no keyframe; a `--videos` that is no folder is a usage error naming the flag; and
/// Ctrl-C stops it between videos, leaving the task and project of the last whole run.
#[test]
fn keyframes_names_misnamed_videos_and_stops_at_ctrl_c() {
    let source = thirty_fps_video();
    let work = tempfile::tempdir().unwrap();
    let clip = work.path().join("clip.mp4");
    let cut = ["-i", source.to_str().unwrap(), "-t", "3"];
    ffmpeg(&[&cut[..], &LOSSLESS_H264, &["-an", clip.to_str().unwrap()]].concat());
    let odd = work.path().join("odd");
    fs::create_dir(&odd).unwrap();
    // `._good.mp4`: what macOS writes beside a file on some drives, no video.
    for name in [
        "good.mp4",
        "my clip.mp4",
        "take.2.mp4",
        "IMG_0042.MOV",
        "notes.txt",
        "._good.mp4",
    ] {
        fs::copy(&clip, odd.join(name)).unwrap();
    }
    let out = work.path().join("tolabel");
    let keyframes = |videos: &Path| {
        let mut command = avaprep(work.path());
        command
            .args(["keyframes", "--videos"])
            .arg(videos)
            .arg("--out")
            .arg(&out)
            .args(["--actions", "walk", "--height", "48"]);
        command
    };
    let output = keyframes(&odd).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stderr(&output);
    for (name, what) in [
        ("my clip.mp4", "rename it `my_clip.mp4`"),
        ("take.2.mp4", "rename it `take_2.mp4`"),
        (
            "IMG_0042.MOV",
            "the extension must be .mp4; rename it `IMG_0042.mp4`",
        ),
    ] {
        assert!(
            said.contains(&format!("{name}: ")) && said.contains(what),
            "{name}: {said}"
        );
    }
    assert!(
        !said.contains("notes.txt") && !said.contains("._good"),
        "{said}"
    );
    let written: Vec<String> = fs::read_dir(out.join("images"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written, ["good"]);
    // A detector's rows: one on a keyframe of the 3 s clip, one past its end, one of a video
    // spelt wrong.
    let detections = work.path().join("boxes.csv");
    let row = |video: &str, second: &str| format!("{video},{second},0.1,0.1,0.5,0.9,,0.9\n");
    let rows = row("good", "0001") + &row("good", "0009") + &row("wlak_01", "0001");
    fs::write(&detections, rows).unwrap();
    let output = keyframes(&odd)
        .arg("--detections")
        .arg(&detections)
        .output()
        .unwrap();
    let said = stdout(&output) + &stderr(&output);
    assert!(
        said.contains("1 person box drawn")
            && said.contains("their boxes left out: wlak_01")
            && said.contains("1 detector box at seconds that are no keyframe, left out"),
        "{said}"
    );
    let task = fs::read(out.join("annotations.xml")).unwrap();

    let nowhere = keyframes(&work.path().join("nowhere")).output().unwrap();
    assert_eq!(nowhere.status.code(), Some(2), "{}", stderr(&nowhere));
    assert!(
        stderr(&nowhere).contains("--videos") && stderr(&nowhere).contains("not a folder"),
        "{}",
        stderr(&nowhere)
    );

    // Many videos: Ctrl-C once the first images are in place.
    let many = work.path().join("many");
    fs::create_dir(&many).unwrap();
    let count = 200;
    for n in 0..count {
        fs::copy(&clip, many.join(format!("cam{n:03}.mp4"))).unwrap();
    }
    let mut child = keyframes(&many)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !out.join("images/cam000").is_dir() {
        assert!(started.elapsed().as_secs() < 60, "no images written");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SAFETY: a signal to the child this test started and has not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut errors = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut errors)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{errors}");
    assert!(errors.contains("interrupted: the images of"), "{errors}");
    let folders: Vec<String> = fs::read_dir(out.join("images"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(folders.len() < count, "every video was done after Ctrl-C");
    assert!(
        folders.iter().all(|name| !name.starts_with('.')),
        "{folders:?}"
    );
    assert_eq!(fs::read(out.join("annotations.xml")).unwrap(), task);

    // Run again, it keeps the images of the videos done before Ctrl-C (their files and
    // settings are as they were) and makes the rest; a video replaced since is made again.
    let done: Vec<&String> = folders
        .iter()
        .filter(|name| name.starts_with("cam"))
        .collect();
    let first_image = |video: &str| out.join(format!("images/{video}/000000.jpg"));
    let made_at = |video: &str| {
        fs::metadata(first_image(video))
            .unwrap()
            .modified()
            .unwrap()
    };
    let before = made_at(done[0]);
    let again = keyframes(&many).output().unwrap();
    let said = stdout(&again) + &stderr(&again);
    assert!(again.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "{} keyframe images of {count} videos (the images of {} kept from an earlier run",
            3 * count,
            done.len()
        )),
        "{said}"
    );
    assert_eq!(made_at(done[0]), before, "the kept images were made again");
    let replaced = many.join(format!("{}.mp4", done[0]));
    fs::remove_file(&replaced).unwrap();
    ffmpeg(
        &[
            &["-i", clip.to_str().unwrap(), "-t", "2"][..],
            &LOSSLESS_H264,
            &["-an", replaced.to_str().unwrap()],
        ]
        .concat(),
    );
    let after_edit = keyframes(&many).output().unwrap();
    let said = stdout(&after_edit) + &stderr(&after_edit);
    assert!(
        said.contains(&format!(
            "{} keyframe images of {count} videos (the images of {} kept",
            3 * count - 1,
            count - 1
        )),
        "{said}"
    );
    assert_ne!(made_at(done[0]), before);
}

/// `avaprep report`'s page for `data`, whose captions name each keyframe's second on the file's
/// own clock too (the dataset's minus `video_start`).
fn report_page(data: &Path, video_start: i64) -> String {
    let output = avaprep(data).arg("report").output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let page = fs::read_to_string(data.join("report/index.html")).unwrap();
    let captions: Vec<&str> = page
        .split("<figcaption>")
        .skip(1)
        .map(|rest| rest.split("</figcaption>").next().unwrap())
        .collect();
    assert!(!captions.is_empty(), "{page}");
    for caption in captions {
        let mut words = caption.split(' ');
        let second: i64 = words.nth(2).unwrap().parse().unwrap();
        assert!(
            caption.contains(&format!("(the file's {} s)", second - video_start)),
            "{caption}"
        );
    }
    page
}

/// A file annotated over more than AVA's 897 keyframe seconds (the miniature's 30 fps video
/// looped to 16 minutes, labelled every 10 s) is cut into parts, each on a clock of its own,
/// while a short video keeps the shared clock: each part's frames come from its place in the
/// file, validation (consumer-clock included) passes, and PySlowFast's own loader reads every
/// keyframe's clip centred on it.
#[test]
fn a_long_video_is_cut_into_parts_on_clocks_of_their_own() {
    let source = thirty_fps_video();
    let clips = tempfile::tempdir().unwrap();
    let cut = |name: &str, args: &[&str]| {
        let out = clips.path().join(format!("{name}.mp4"));
        ffmpeg(&[args, &[out.to_str().unwrap()]].concat());
    };
    let source = source.to_str().unwrap();
    cut(
        "long_cam",
        &["-stream_loop", "26", "-i", source, "-c", "copy"],
    );
    cut("short", &["-i", source, "-t", "12", "-c", "copy"]);
    let labels = clips.path().join("labels.csv");
    fs::write(
        &labels,
        "video,start_frame,label\nlong_cam,0,wave\nshort,0,fall\n",
    )
    .unwrap();
    let own = tempfile::tempdir().unwrap();
    let output = imported(
        &labels,
        clips.path(),
        own.path(),
        &["--val", "short", "--keyframe-interval", "10"],
    );
    assert!(
        stdout(&output).contains("long_cam: annotated over more than"),
        "{}",
        stdout(&output)
    );
    let summary = json(&own.path().join("import.json"));
    assert_eq!(
        summary["parts"],
        serde_json::json!({"long_cam": ["long_cam_part1", "long_cam_part2"]}),
        "{summary}"
    );
    // Part 1 from the file's second 0, part 2 from its second 900, each on 902; short shares
    // the clock of the earliest keyframe.
    assert_eq!(
        summary["file_starts"],
        serde_json::json!({"long_cam_part1": 902, "long_cam_part2": 2, "short": 902}),
        "{summary}"
    );
    let spans = fs::read_to_string(own.path().join("annotations/video_spans.csv")).unwrap();
    assert!(spans.contains("\nlong_cam_part2,2,"), "{spans}");
    assert!(
        spans
            .lines()
            .any(|line| line.starts_with("long_cam_part2,") && line.ends_with(",long_cam")),
        "{spans}"
    );

    let data = tempfile::tempdir().unwrap();
    validated_run(data.path(), own.path(), "extract.height=120");
    // The frame each part shows at its first keyframe, 902, is its place in the file.
    for (part, file_second) in [("long_cam_part1", 0.0), ("long_cam_part2", 900.0)] {
        let index =
            fs::read_to_string(data.path().join(format!("frame_index/{part}.csv"))).unwrap();
        let header: Vec<&str> = index.lines().next().unwrap().split(',').collect();
        let column = |name: &str| header.iter().position(|field| *field == name).unwrap();
        let (target, file) = (column("target_seconds"), column("source_file_seconds"));
        let row = index
            .lines()
            .skip(1)
            .map(|line| line.split(',').collect::<Vec<_>>())
            .find(|fields| fields[target].parse::<f64>().unwrap() == 902.0)
            .unwrap_or_else(|| panic!("{part}: no frame at 902"));
        let shown: f64 = row[file].parse().unwrap();
        assert!((shown - file_second).abs() <= 1.0 / 60.0, "{part}: {shown}");
    }
    let loaded = reference_report("pyslowfast_ava.py", data.path(), &["train"]);
    assert_eq!(loaded["clips"].as_u64(), Some(98), "{loaded}");
}

/// The own-dataset pipeline on the import in `own`, up to validation, which passes.
fn validated_run(data: &Path, own: &Path, setting: &str) {
    let output = avaprep(data)
        .args(["--json", "run"])
        .arg(own.join("pipeline.toml"))
        .args(["--until", "validate"])
        .args(["--set", setting])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let validation = json(&data.join("slowfast/validation.json"));
    assert_eq!(validation["passed"], true, "{validation}");
}

/// A train or val video of the miniature at 30 frames a second, whose frames carry their codes.
fn thirty_fps_video() -> PathBuf {
    let report = report();
    let video = report["videos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|video| video["frame_rate"] == "30/1" && video["split"] != "test")
        .expect("a 30 fps video");
    mirror().join(video["path"].as_str().unwrap())
}

/// `avaprep import EXPORT --videos VIDEOS --out OUT EXTRA..`, which succeeds.
fn imported(export: &Path, videos: &Path, out: &Path, extra: &[&str]) -> Output {
    let output = avaprep(out)
        .arg("import")
        .arg(export)
        .arg("--videos")
        .arg(videos)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    output
}

/// A CVAT video export imported with a shorter cut of its video (or one at a lower frame rate)
/// is refused by name: its frame numbers would be timed by the wrong frames. It once imported
/// the boxes that fell inside the file and dropped the rest, an action with them, without a word.
#[test]
fn a_cvat_export_with_another_cut_of_its_video_is_refused() {
    let source = thirty_fps_video();
    let id = source.file_stem().unwrap().to_str().unwrap().to_string();
    let export = cvat_video_exports()
        .into_iter()
        .find(|export| export.file_stem().unwrap().to_str() == Some(id.as_str()))
        .expect("the video's export");
    let clips = tempfile::tempdir().unwrap();
    let cut = clips.path().join(format!("{id}.mp4"));
    let shorter = ["-i", source.to_str().unwrap(), "-t", "10"];
    ffmpeg(
        &[
            &shorter[..],
            &LOSSLESS_H264,
            &["-an", cut.to_str().unwrap()],
        ]
        .concat(),
    );
    let out = tempfile::tempdir().unwrap();
    let output = avaprep(out.path())
        .arg("import")
        .arg(&export)
        .arg("--videos")
        .arg(clips.path())
        .arg("--out")
        .arg(out.path().join("own"))
        .args(["--action-from", "checkboxes"])
        .output()
        .unwrap();
    assert_ne!(output.status.code(), Some(0), "{}", stdout(&output));
    let message = stderr(&output);
    assert!(
        message.contains(&format!("{id}.mp4 has "))
            && message.contains("not the video file the task was made from"),
        "{message}"
    );
}

/// A pipeline's import that leaves a video out (not in the folder) fails the run that finds it,
/// as `avaprep import` does, with the others prepared; the next run, with nothing new to import,
/// passes. A shard before any import names the unsharded run it needs, with the settings typed.
#[test]
fn a_pipeline_import_that_leaves_a_video_out_fails_its_run() {
    let data = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    let mut copied = 0;
    for entry in fs::read_dir(videos()).unwrap() {
        let path = entry.unwrap().path();
        if copied == 0 {
            copied += 1;
            continue;
        }
        fs::copy(&path, folder.path().join(path.file_name().unwrap())).unwrap();
        copied += 1;
    }
    let pointed = own_videos_pointed_at(folder.path());
    let run = |extra: &[&str]| {
        avaprep(data.path())
            .args(["run", "pipelines/own-videos.toml"])
            .args(
                pointed
                    .iter()
                    .flat_map(|setting| ["--set", setting.as_str()]),
            )
            .args(extra)
            .output()
            .unwrap()
    };
    let sharded = run(&["--shard", "1/2", "--until", "lists"]);
    assert_eq!(sharded.status.code(), Some(2), "{}", stderr(&sharded));
    let named = crate::support::named_command(&stderr(&sharded));
    assert!(
        named.contains("--set 'import.videos=")
            && named.ends_with("--until import")
            && !named.contains("--shard"),
        "{named}"
    );
    let found = crate::support::run_named(&named);
    assert_eq!(found.status.code(), Some(1), "{}", stderr(&found));
    assert!(
        stderr(&found).contains("import left out 1 video"),
        "{}",
        stderr(&found)
    );
    assert!(data.path().join("import/dataset.toml").is_file());
    let again = run(&["--until", "import"]);
    assert!(again.status.success(), "{}", stderr(&again));
}

/// A pipeline that imports is checked whole before its import reads anything: a bad `[import]`
/// value names its key (not a flag), a val split the import would not make stops it, a misspelt
/// training setting stops the run too, and `--until import` on a pipeline without an import is
/// a usage error. A pipeline file named without a folder is read from the working directory.
#[test]
fn an_import_pipeline_is_checked_before_any_video_is_read() {
    let data = tempfile::tempdir().unwrap();
    let pointed = own_videos_pointed_at(&videos());
    let run = |settings: &[&str]| {
        avaprep(data.path())
            .args(["run", "pipelines/own-videos.toml"])
            .args(
                pointed
                    .iter()
                    .flat_map(|setting| ["--set", setting.as_str()]),
            )
            .args(settings.iter().flat_map(|setting| ["--set", *setting]))
            .output()
            .unwrap()
    };
    for (setting, named) in [
        ("import.keyframe_interval=0", "[import] keyframe_interval 0"),
        ("import.val_fraction=1.5", "[import] val_fraction 1.5"),
        ("import.via_browser=\"safari\"", "via_browser"),
        (
            "import.val_fraction=0.0",
            "val_fraction 0 makes no val split",
        ),
        ("train.settings.epochz=3", "epochz"),
    ] {
        let refused = run(&[setting]);
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{setting}: {}",
            stderr(&refused)
        );
        assert!(
            stderr(&refused).contains(named),
            "{setting}: {}",
            stderr(&refused)
        );
        assert!(
            !data.path().join("import").exists(),
            "{setting}: imported anyway"
        );
    }
    // `status own-videos.toml` in the pipeline's own folder.
    let folder = tempfile::tempdir().unwrap();
    fs::copy(
        crate::support::repo_root().join("pipelines/own-videos.toml"),
        folder.path().join("own-videos.toml"),
    )
    .unwrap();
    let status = avaprep(data.path())
        .current_dir(folder.path())
        .args(["status", "own-videos.toml"])
        .args(
            pointed
                .iter()
                .flat_map(|setting| ["--set", setting.as_str()]),
        )
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", stderr(&status));
    assert!(stdout(&status).contains("import"), "{}", stdout(&status));
    // An export that is gone fails the import, and status says so: it said "pending", as if
    // the run had not been.
    let gone = [
        format!(
            "import.exports=[{:?}]",
            data.path().join("gone.xml").display().to_string()
        ),
        pointed[1].clone(),
    ];
    let with_gone = |command: &str| {
        avaprep(data.path())
            .args([command, "pipelines/own-videos.toml"])
            .args(gone.iter().flat_map(|setting| ["--set", setting.as_str()]))
            .output()
            .unwrap()
    };
    let failed = with_gone("run");
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    let status = with_gone("status");
    let import_line = stdout(&status)
        .lines()
        .find(|line| line.starts_with("import "))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{}", stdout(&status)));
    assert!(
        import_line.contains("failed") && import_line.contains("gone.xml"),
        "{import_line}"
    );
    let until = avaprep(data.path())
        .args(["run", "pipelines/own-dataset.toml", "--until", "import"])
        .output()
        .unwrap();
    assert_eq!(until.status.code(), Some(2), "{}", stderr(&until));
    assert!(
        stderr(&until).contains("no [import] table"),
        "{}",
        stderr(&until)
    );
}

/// A phone video stores its frames on their side with a display rotation, a cut clip may start
/// at 1.5 s on its file's timeline (in MP4 or Matroska, its audio perhaps earlier), and old
/// footage may have pixels twice as wide as tall. VIA stores what the browser shows: pixels of
/// the upright picture with square pixels, and times on the `<video>` element's timeline, where
/// Chromium puts a frame at its own timestamp and Firefox at its time from the video's first
/// frame (MP4) or from the earliest stream's start (Matroska); each is asked here, by seeking to
/// where the clip's second 1, green after a red second 0, begins. A project labelled in either,
/// imported with `--via-browser` naming it, puts each box where a plain clip from 0 puts the same
/// box: the same corners, at the same keyframe; and the import names the videos whose boxes
/// depended on the browser.
#[test]
fn via_boxes_are_read_as_each_browser_shows_the_video() {
    let clips = tempfile::tempdir().unwrap();
    let landscape = clips.path().join("landscape.mp4");
    let landscape = landscape.to_str().unwrap();
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "color=red:size=160x96:rate=30:duration=1",
        "-f",
        "lavfi",
        "-i",
        "color=green:size=160x96:rate=30:duration=3",
        "-filter_complex",
        "[0][1]concat=n=2",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        landscape,
    ]);
    let late = |name: &str, extra: &[&str]| {
        let path = clips.path().join(name);
        let mut args = vec!["-itsoffset", "1.5", "-i", landscape, "-c", "copy"];
        args.extend(extra);
        args.push(path.to_str().unwrap());
        ffmpeg(&args);
        path
    };
    let phone = late("IMG_0042.mp4", &["-metadata:s:v:0", "rotate=90"]);
    let late_mkv = late("late.mkv", &[]);
    // Sound from 0.75 s, before the video: the file's clock starts with it, so the video's
    // second 1 is the file's 1.76 s, nearest keyframe 2.
    let voiced = |name: &str, codec: &str| {
        let path = clips.path().join(name);
        ffmpeg(&[
            "-itsoffset",
            "1.5",
            "-i",
            landscape,
            "-itsoffset",
            "0.75",
            "-f",
            "lavfi",
            "-i",
            "sine=duration=5",
            "-map",
            "0:v",
            "-map",
            "1:a",
            "-c:v",
            "copy",
            "-c:a",
            codec,
            path.to_str().unwrap(),
        ]);
        path
    };
    let voiced_mp4 = voiced("audio_first.mp4", "aac");
    let voiced_mkv = voiced("audio_first_mkv.mkv", "libopus");
    let wide = clips.path().join("wide_pixels.mp4");
    ffmpeg(&[
        "-i",
        landscape,
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        "-vf",
        "setsar=2/1",
        wide.to_str().unwrap(),
    ]);
    let names = [
        "landscape.mp4",
        "IMG_0042.mp4",
        "late.mkv",
        "wide_pixels.mp4",
        "audio_first.mp4",
        "audio_first_mkv.mkv",
    ];
    let shown = |browser: &str| -> Vec<Shown> {
        let output =
            std::process::Command::new(crate::support::repo_root().join(".venv/bin/python"))
                .arg(crate::support::repo_root().join("tests/support/video_clock.py"))
                .arg(browser)
                .args([
                    Path::new(landscape),
                    &phone,
                    &late_mkv,
                    &wide,
                    &voiced_mp4,
                    &voiced_mkv,
                ])
                .output()
                .unwrap();
        assert!(output.status.success(), "{browser}: {}", stderr(&output));
        stdout(&output)
            .lines()
            .zip(names)
            .map(|(line, name)| {
                let seen: serde_json::Value = serde_json::from_str(line).unwrap();
                assert_eq!(seen["video"], name, "{browser}");
                let number = |key: &str| seen[key].as_f64().unwrap();
                Shown {
                    name,
                    second_one_at: number("change_at"),
                    size: (number("width"), number("height")),
                }
            })
            .collect()
    };
    // Where each browser shows second 1 of each clip. The Matroska clip with sound starts its
    // file at 0.737 s (Opus starts 13 ms before the sound), so Firefox shows its second 1 at
    // 1.763 s.
    for (browser, second_one) in [
        ("chromium", [1.0, 2.5, 2.5, 1.0, 2.5, 2.5]),
        ("firefox", [1.0, 1.0, 1.0, 1.0, 1.0, 1.763]),
    ] {
        let seen = shown(browser);
        assert_eq!(
            seen.len(),
            names.len(),
            "{browser}: one answer a video: {seen:?}"
        );
        for clip in &seen {
            let size = match clip.name {
                "IMG_0042.mp4" => (96.0, 160.0),
                "wide_pixels.mp4" => (320.0, 96.0),
                _ => (160.0, 96.0),
            };
            assert_eq!(
                clip.size, size,
                "{browser} shows {} (upright, with square pixels)",
                clip.name
            );
        }
        // Within a tenth of a second: Firefox shows Matroska with B-frames, and MP4 with sound,
        // up to 0.09 s later still (measured), far less than the 1.5 s the browsers differ by.
        for (clip, expected) in seen.iter().zip(second_one) {
            assert!(
                (clip.second_one_at - expected).abs() < 0.1,
                "{browser} shows second 1 of {} from {} s, not {expected}",
                clip.name,
                clip.second_one_at
            );
        }
        let output = import_one_box_a_video(clips.path(), browser, &seen);
        let other = match browser {
            "chromium" => "--via-browser firefox",
            _ => "--via-browser chromium",
        };
        let note = stderr(&output);
        let named = [
            "IMG_0042 by 1.500 s",
            "audio_first by 1.500 s",
            "audio_first_mkv by 0.737 s",
            "late by 1.500 s",
            other,
        ];
        assert!(
            named.iter().all(|part| note.contains(part)) && !note.contains("landscape by"),
            "{browser}: the note names the videos that browsers time differently and the other browser's flag: {note}"
        );
    }
}

/// What a browser showed of a clip: where its second 1 begins on the element's timeline, and
/// the picture's size.
#[derive(Debug)]
struct Shown {
    name: &'static str,
    second_one_at: f64,
    size: (f64, f64),
}

/// Imports a VIA project, labelled in `browser`, of the same box on each video where the
/// browser showed its second 1 (a quarter of each side in from the edges of the picture as
/// shown), and checks that each lands on the same corners at the same keyframe.
fn import_one_box_a_video(clips: &Path, browser: &str, shown: &[Shown]) -> Output {
    let mut files = serde_json::Map::new();
    let mut views = serde_json::Map::new();
    let mut metadata = serde_json::Map::new();
    for (index, clip) in shown.iter().enumerate() {
        let id = (index + 1).to_string();
        let (w, h) = clip.size;
        files.insert(
            id.clone(),
            serde_json::json!({"fid": id, "fname": clip.name, "type": 4, "loc": 1, "src": ""}),
        );
        views.insert(id.clone(), serde_json::json!({"fid_list": [id]}));
        metadata.insert(
            format!("{id}_a"),
            serde_json::json!({"vid": id, "flg": 0, "z": [clip.second_one_at],
                               "xy": [2, w / 4.0, h / 4.0, w / 2.0, h / 2.0], "av": {"1": "0"}}),
        );
    }
    let project = serde_json::json!({
        "project": {"pname": "phone", "vid_list": views.keys().collect::<Vec<_>>()},
        "attribute": {"1": {"aname": "action", "anchor_id": "FILE1_Z1_XY1", "type": 4,
                            "options": {"0": "wave"}, "default_option_id": ""}},
        "file": files,
        "view": views,
        "metadata": metadata,
    });
    let export = clips.join(format!("via_project_{browser}.json"));
    fs::write(&export, project.to_string()).unwrap();
    let own = tempfile::tempdir().unwrap();
    let output = imported(
        &export,
        clips,
        own.path(),
        &[
            "--val",
            "landscape",
            "--action-from",
            "label",
            "--via-browser",
            browser,
        ],
    );
    let truth: String = ["train", "val"]
        .iter()
        .map(|split| {
            fs::read_to_string(own.path().join(format!("annotations/ava_{split}_v2.2.csv")))
                .unwrap()
        })
        .collect();
    // Each at its second 1, the earliest keyframe annotated: dataset second 902; the clips whose
    // sound starts first at their file's second 2, 903.
    let expected: String = [
        "IMG_0042,0902",
        "audio_first,0903",
        "audio_first_mkv,0903",
        "late,0902",
        "wide_pixels,0902",
        "landscape,0902",
    ]
    .iter()
    .map(|row| format!("{row},0.250,0.250,0.750,0.750,1,1\n"))
    .collect();
    assert_eq!(truth, expected, "labelled in {browser}");
    output
}
