//! The real official files copied into `tests/data/ava/` must all parse, with the
//! counts the dataset documentation gives.

use std::path::PathBuf;
use std::time::Instant;

use super::*;
use crate::testing::generate_ground_truth_csv;

/// Copies of official AVA files, kept in the repository (see `tests/data/ava/README.md`).
fn ava(name: &str) -> PathBuf {
    crate::testing::repo_root()
        .join("tests/data/ava")
        .join(name)
}

const UNSCORED: [u16; 20] = [
    2, 16, 18, 19, 21, 23, 25, 31, 32, 33, 35, 39, 40, 42, 44, 50, 53, 55, 71, 75,
];

#[test]
fn full_label_map_has_80_typed_labels() {
    let map = read_label_map(&ava("ava_action_list_v2.2.pbtxt")).unwrap();
    assert_eq!(map.len(), 80);
    let ids: Vec<u16> = map.ids().map(|a| a.0).collect();
    assert_eq!(ids, (1..=80).collect::<Vec<_>>());
    assert!(map.labels().iter().all(|l| l.kind.is_some()));
    assert_eq!(map.name(ActionId(1)), Some("bend/bow (at the waist)"));
    assert_eq!(
        map.name(ActionId(79)),
        Some("talk to (e.g., self, a person, a group)")
    );
    assert_eq!(
        map.get(ActionId(80)).unwrap().kind,
        Some(LabelKind::PersonInteraction)
    );
    assert_eq!(
        map.get(ActionId(4)).unwrap().kind,
        Some(LabelKind::PersonMovement)
    );
}

#[test]
fn scored_label_map_has_60_labels_without_the_unscored_ids() {
    let full = read_label_map(&ava("ava_action_list_v2.2.pbtxt")).unwrap();
    let map = read_label_map(&ava("ava_action_list_v2.2_for_activitynet_2019.pbtxt")).unwrap();
    assert_eq!(map.len(), 60);
    for id in 1..=80 {
        assert_eq!(
            map.contains(ActionId(id)),
            !UNSCORED.contains(&id),
            "id {id}"
        );
    }
    for label in map.labels() {
        assert_eq!(label.kind, None);
        assert_eq!(
            full.name(label.id),
            Some(label.name.as_str()),
            "names agree"
        );
    }
}

#[test]
fn included_timestamps_are_902_to_1798() {
    let seconds =
        read_included_timestamps(&ava("ava_included_timestamps_v2.2.txt"), KeyframeRange::AVA)
            .unwrap();
    assert_eq!(seconds.len(), 897);
    assert_eq!(seconds, (902..=1798).collect::<Vec<u32>>());
}

#[test]
fn trainval_file_names() {
    let names = read_video_file_names(&ava("ava_file_names_trainval_v2.1.txt")).unwrap();
    assert_eq!(names.len(), 299);
    let count = |e| names.iter().filter(|n| n.extension == e).count();
    assert_eq!(count(VideoExtension::Mkv), 205);
    assert_eq!(count(VideoExtension::Mp4), 84);
    assert_eq!(count(VideoExtension::Webm), 10);
    assert_eq!(names[0].to_string(), "_-Z6wFjXtGQ.mkv");
}

#[test]
fn test_file_names_without_trailing_newline() {
    let path = ava("ava_file_names_test_v2.1.txt");
    let bytes = std::fs::read(&path).unwrap();
    assert_ne!(bytes.last(), Some(&b'\n'), "fixture lost its quirk");
    let names = read_video_file_names(&path).unwrap();
    assert_eq!(names.len(), 131);
    assert_eq!(names[130].to_string(), "zvxnOrzTg0M.mp4");
}

#[test]
fn test_ids_match_test_file_names() {
    let ids = read_video_ids(&ava("ava_test_v2.2.txt")).unwrap();
    assert_eq!(ids.len(), 131);
    assert_eq!(ids[0].as_str(), "--205wugM18");
    let names = read_video_file_names(&ava("ava_file_names_test_v2.1.txt")).unwrap();
    let mut from_names: Vec<VideoId> = names.iter().map(|n| n.id).collect();
    let mut sorted = ids.clone();
    from_names.sort();
    sorted.sort();
    assert_eq!(sorted, from_names);
}

#[test]
fn val_ground_truth_first_50_rows() {
    let map = read_label_map(&ava("ava_action_list_v2.2.pbtxt")).unwrap();
    let options = ReadOptions::new(KeyframeRange::AVA, Some(&map));
    let rows = read_ground_truth(&ava("ava_val_v2.2.first50.csv"), &options).unwrap();
    assert_eq!(rows.len(), 50);
    assert!(rows.iter().all(|r| r.key.video.as_str() == "1j20qq1JyX4"));
    let first = rows[0].entry.unwrap();
    assert_eq!(rows[0].key.second, 902);
    assert_eq!(first.bbox.to_array(), [0.002, 0.118, 0.714, 0.977]);
    assert_eq!(first.action, ActionId(12));
    assert_eq!(first.person, Some(1));
    assert_eq!(rows[49].key.second, 916);
}

#[test]
fn val_predicted_boxes_first_30_rows() {
    let path = ava("ava_val_predicted_boxes.first30.csv");
    let rows = read_predicted_boxes(&path, &ReadOptions::AVA).unwrap();
    assert_eq!(rows.len(), 30);
    assert!(rows.iter().all(|r| r.label == BoxLabel::Unlabelled));
    assert_eq!(rows[0].score, 0.995518);
    assert_eq!(rows[0].bbox.to_array(), [0.036, 0.098, 0.550, 0.979]);
    assert_eq!(rows[29].key.second, 921);
    // The same file is not a valid detections file: it has no action ids.
    let e = read_detections(&path, &ReadOptions::AVA).unwrap_err();
    assert_eq!(e.line(), Some(1));
    assert!(
        e.to_string()
            .contains("ava_val_predicted_boxes.first30.csv:1: column 7 (action_id)")
    );
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn bench_parse_ground_truth_1m() {
    let bytes = generate_ground_truth_csv(1_000_000, 42);
    let start = Instant::now();
    let rows = parse_ground_truth(&bytes, "generated.csv", &ReadOptions::AVA).unwrap();
    let elapsed = start.elapsed();
    assert_eq!(rows.len(), 1_000_000);
    println!(
        "parsed {} rows ({:.1} MB) in {:.3} s: {:.0} rows/s",
        rows.len(),
        bytes.len() as f64 / 1e6,
        elapsed.as_secs_f64(),
        rows.len() as f64 / elapsed.as_secs_f64()
    );
}
