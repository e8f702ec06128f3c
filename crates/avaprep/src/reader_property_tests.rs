//! Property tests of every reader of user-supplied or on-disk text (annotation CSVs, label maps,
//! name and id lists, manifests, pipeline files, state files, video plans): valid files mutated at
//! random, and random bytes, never panic, and every rejection names the file (and, for the
//! line-based formats, the line: `file:LINE: ...`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use crate::annotations::{
    KeyframeRange, ReadOptions, parse_detections, parse_excluded_timestamps, parse_ground_truth,
    parse_included_timestamps, parse_label_map, parse_predicted_boxes, parse_video_file_names,
    parse_video_ids,
};
use crate::testing::Rng;

const CASES: usize = 400;
const FILE: &str = "input.txt";

/// Bytes that break formats: separators, quotes, line ends, a BOM, NUL, invalid UTF-8, signs,
/// exponents and digits.
const NASTY: &[&[u8]] = &[
    b",",
    b"\"",
    b"'",
    b"\n",
    b"\r\n",
    b"\r",
    b"\xEF\xBB\xBF",
    b"\0",
    b"\xFF",
    b"-",
    b"+",
    b".",
    b"e",
    b"E",
    b"9",
    b"0",
    b" ",
    b"\t",
    b"nan",
    b"inf",
    b"99999999999999999999",
    b"-1",
    b"=",
    b"[",
    b"]",
    b"{",
    b"}",
    b"#",
    b"/",
    b"..",
    b"../",
];

/// One to three random edits of `valid`: deletions, insertions, duplicated, swapped or dropped
/// lines, truncation.
fn mutate(rng: &mut Rng, valid: &[u8]) -> Vec<u8> {
    let mut bytes = valid.to_vec();
    for _ in 0..rng.range(1, 3) {
        let at = |rng: &mut Rng, bytes: &Vec<u8>| rng.range(0, bytes.len() as u32) as usize;
        match rng.range(0, 6) {
            0 if !bytes.is_empty() => {
                let start = at(rng, &bytes).min(bytes.len() - 1);
                let end = (start + rng.range(1, 8) as usize).min(bytes.len());
                bytes.drain(start..end);
            }
            1 => {
                let position = at(rng, &bytes);
                let nasty = NASTY[rng.range(0, NASTY.len() as u32 - 1) as usize];
                bytes.splice(position..position, nasty.iter().copied());
            }
            2 => {
                let position = at(rng, &bytes);
                bytes.truncate(position);
            }
            3 if !bytes.is_empty() => {
                let position = at(rng, &bytes).min(bytes.len() - 1);
                bytes[position] = (rng.next() & 0xFF) as u8;
            }
            _ => {
                let mut lines: Vec<Vec<u8>> =
                    bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
                let count = lines.len() as u32;
                let (a, b) = (
                    rng.range(0, count - 1) as usize,
                    rng.range(0, count - 1) as usize,
                );
                match rng.range(0, 2) {
                    0 => lines.swap(a, b),
                    1 => {
                        let copy = lines[a].clone();
                        lines.insert(b, copy);
                    }
                    _ => {
                        lines.remove(a);
                    }
                }
                bytes = lines.join(&b'\n');
            }
        }
    }
    bytes
}

fn random_bytes(rng: &mut Rng) -> Vec<u8> {
    let length = rng.range(0, 200) as usize;
    (0..length).map(|_| (rng.next() & 0xFF) as u8).collect()
}

/// Runs `read` on mutations of `valid` and on random bytes: it must not panic, and its errors
/// must satisfy `names_the_place`.
fn check_reader(
    name: &str,
    seed: u64,
    valid: &[u8],
    read: impl Fn(&[u8]) -> Result<(), String>,
    names_the_place: impl Fn(&str) -> bool,
) {
    assert!(
        read(valid).is_ok(),
        "{name}: the valid input is rejected: {:?}",
        read(valid)
    );
    let mut rng = Rng::seeded(seed);
    let mut rejected = 0;
    for case in 0..CASES {
        let input = match case % 8 {
            7 => random_bytes(&mut rng),
            _ => mutate(&mut rng, valid),
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| read(&input)));
        let shown = String::from_utf8_lossy(&input);
        match outcome {
            Err(_) => panic!("{name}: panicked on {shown:?}"),
            Ok(Err(message)) => {
                rejected += 1;
                assert!(
                    names_the_place(&message),
                    "{name}: the error does not say where: {message:?} (input {shown:?})"
                );
            }
            Ok(Ok(())) => {}
        }
    }
    assert!(
        rejected > CASES / 10,
        "{name}: only {rejected} of {CASES} inputs rejected"
    );
}

/// `input.txt:LINE: ...` or, for a problem of the whole file, `input.txt: ...`.
fn names_file_and_line(message: &str) -> bool {
    let Some(rest) = message.strip_prefix(FILE) else {
        return false;
    };
    match rest.strip_prefix(':') {
        Some(after) => after.starts_with(' ') || after.starts_with(|c: char| c.is_ascii_digit()),
        None => false,
    }
}

fn names_file(message: &str) -> bool {
    message.contains(FILE)
}

fn ava(name: &str) -> Vec<u8> {
    let path = crate::testing::repo_root()
        .join("tests/data/ava")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn ok<T, E: std::fmt::Display>(result: Result<T, E>) -> Result<(), String> {
    result.map(|_| ()).map_err(|error| error.to_string())
}

#[test]
fn annotation_readers_never_panic_and_name_file_and_line() {
    let options = ReadOptions::AVA;
    let gt = ava("ava_val_v2.2.first50.csv");
    check_reader(
        "ground truth",
        1,
        &gt,
        |b| ok(parse_ground_truth(b, FILE, &options)),
        names_file_and_line,
    );
    let boxes = ava("ava_val_predicted_boxes.first30.csv");
    check_reader(
        "predicted boxes",
        2,
        &boxes,
        |b| ok(parse_predicted_boxes(b, FILE, &options)),
        names_file_and_line,
    );
    // Two detections in the official submission format.
    let detections = b"-5KQ66BBWC4,0902,0.077,0.151,0.283,0.811,80,0.9\n-5KQ66BBWC4,0903,0.1,0.2,0.3,0.4,12,0.25\n";
    check_reader(
        "detections",
        3,
        detections,
        |b| ok(parse_detections(b, FILE, &options)),
        names_file_and_line,
    );
    let excluded = b"-5KQ66BBWC4,0902\n-5KQ66BBWC4,0905\n1j20qq1JyX4,1798\n";
    check_reader(
        "excluded timestamps",
        4,
        excluded,
        |b| ok(parse_excluded_timestamps(b, FILE, KeyframeRange::AVA)),
        names_file_and_line,
    );
    let included = ava("ava_included_timestamps_v2.2.txt");
    check_reader(
        "included timestamps",
        5,
        &included,
        |b| ok(parse_included_timestamps(b, FILE, KeyframeRange::AVA)),
        names_file_and_line,
    );
    let names = ava("ava_file_names_trainval_v2.1.txt");
    check_reader(
        "video file names",
        6,
        &names,
        |b| ok(parse_video_file_names(b, FILE)),
        names_file_and_line,
    );
    let ids = ava("ava_test_v2.2.txt");
    check_reader(
        "video ids",
        7,
        &ids,
        |b| ok(parse_video_ids(b, FILE)),
        names_file_and_line,
    );
    for (seed, name) in [
        (8, "ava_action_list_v2.2.pbtxt"),
        (9, "ava_action_list_v2.2_for_activitynet_2019.pbtxt"),
    ] {
        check_reader(
            name,
            seed,
            &ava(name),
            |b| ok(parse_label_map(b, FILE)),
            names_file_and_line,
        );
    }
}

#[test]
fn manifest_and_pipeline_readers_never_panic_and_name_the_file() {
    let root = crate::testing::repo_root();
    let manifest = std::fs::read(root.join("manifests/ava-v2.2.toml")).unwrap();
    check_reader(
        "manifest",
        10,
        &manifest,
        |b| {
            ok(crate::manifest::DatasetManifest::parse(
                Path::new(FILE),
                &String::from_utf8_lossy(b),
            ))
        },
        names_file,
    );
    let pipeline = std::fs::read(root.join("pipelines/ava22-5fps-480p.toml")).unwrap();
    let tables = crate::stages::StageId::tables();
    check_reader(
        "pipeline file",
        11,
        &pipeline,
        |b| {
            ok(crate::pipeline::PipelineSpec::parse(
                Path::new(FILE),
                &String::from_utf8_lossy(b),
                &[],
                &tables,
            ))
        },
        names_file,
    );
}

#[test]
fn state_and_plan_readers_never_panic_and_never_trust_a_damaged_file() {
    use crate::pipeline::state::{Loaded, StageState};
    let dir = tempfile::tempdir().unwrap();
    let store = crate::pipeline::StateStore::new(dir.path(), None);
    let mut state = StageState::new("extract", "f00d", serde_json::json!({"fps": 5}));
    state
        .items
        .insert("-5KQ66BBWC4".into(), crate::pipeline::ItemRecord::default());
    store.save(&state).unwrap();
    let path = store.path("extract");
    let valid = std::fs::read(&path).unwrap();
    check_reader(
        "state file",
        12,
        &valid,
        |b| {
            std::fs::write(&path, b).unwrap();
            match store.load("extract") {
                Ok(Loaded::Valid(loaded)) if loaded == state => Ok(()),
                Ok(Loaded::Valid(loaded)) => panic!("a damaged state was trusted: {loaded:?}"),
                Ok(Loaded::Missing) => Err(format!("{FILE}: missing")),
                Ok(Loaded::Corrupt(corrupt)) => Err(format!("{FILE}: {}", corrupt.reason)),
                Err(error) => Err(format!("{FILE}: {error}")),
            }
        },
        names_file,
    );

    let plan = br#"{"segment":[900.0,1800.0],"keyframes":[902,1798],"videos":[{"id":"-5KQ66BBWC4","file_name":"-5KQ66BBWC4.mkv","folder":"trainval","split":"train","keyframes":[902,903]}]}"#;
    let plan_path = dir.path().join(FILE);
    check_reader(
        "video plan",
        13,
        plan,
        |b| {
            std::fs::write(&plan_path, b).unwrap();
            ok(crate::records::VideoPlan::load(&plan_path))
        },
        names_file,
    );
}
