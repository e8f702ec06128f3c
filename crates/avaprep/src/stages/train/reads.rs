//! What training reads of the dataset, as one digest: a run folder that recorded the same one was
//! trained on exactly this data, so its weights stand for a training now.
//!
//! The engine keys the train stage on everything made before it, so videos added only to
//! predict on (the test split) make it due again. The trainer reads less: the run's settings,
//! the plan's entries of its train and val videos, their annotation files, the label maps and
//! those videos' frames. Training again on the same would redo hours of work to make the same
//! model, so the stage keeps the run whose digest is the same.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::StageId;
use crate::fsutil::{FileKind, read_regular};
use crate::layout::DataLayout;
use crate::pipeline::StateStore;
use crate::pipeline::state::Peeked;
use crate::records::VideoPlan;
use crate::trainer_protocol::run_files;
use crate::trainer_settings::TrainConfig;

/// The digest of everything the trainer reads under `config` (and the stage's `params`), or
/// `None` where part of it cannot be read or was made outside the pipeline (frames without
/// extraction's records): such a run is never kept for another.
pub fn training_reads(
    data_dir: &Path,
    params: &serde_json::Value,
    config: &TrainConfig,
) -> Option<String> {
    let layout = DataLayout::new(data_dir);
    let plan = VideoPlan::load(&layout.video_plan()).ok()?;
    let frames = match StateStore::new(data_dir, None)
        .peek(StageId::Extract.name())
        .ok()?
    {
        Peeked::Valid(state) => state,
        Peeked::Missing | Peeked::Corrupt(_) => return None,
    };
    let splits: Vec<&str> = std::iter::once(&config.train_split)
        .chain(config.val_split.as_ref())
        .map(|split| split.as_str())
        .collect();
    let mut digest = Digester::default();
    // The version too: another release may build its clips from the same files otherwise.
    digest.text(concat!(
        "avaprep training reads 1, ",
        env!("CARGO_PKG_VERSION")
    ));
    digest.text(&params.to_string());
    digest.text(&toml::to_string(config).ok()?);
    if let Some(path) = &config.init_weights {
        digest.bytes(&std::fs::read(path).ok()?);
    }
    digest.text(&serde_json::to_string(&training_part(plan.clone(), &splits)).ok()?);
    let annotations = layout.annotations();
    for name in [&plan.files.label_map, &plan.files.scored_label_map] {
        digest.file(&annotations, name)?;
    }
    for split in &splits {
        let files = plan.files.splits.get(*split)?;
        for name in [
            &files.ground_truth,
            &files.excluded_timestamps,
            &files.detected_boxes,
        ] {
            match name {
                Some(name) => digest.file(&annotations, name)?,
                None => digest.text("none"),
            }
        }
        // Frames are read by what extraction recorded of them (their bytes, by content).
        for video in plan.videos.iter().filter(|video| video.split == *split) {
            digest.text(&frames.items.get(video.id.as_str())?.identity());
        }
    }
    Some(digest.finish())
}

/// The plan as far as training reads it: its train and val videos and files. Its segment goes,
/// which training does not read, and its keyframe range, which only makes rows outside it
/// errors (the rows are in the digest): both grow with a longer video to predict on. So does
/// the folder of videos on disk: training reads their frames (by content), and a project
/// copied or moved elsewhere is the same data.
fn training_part(mut plan: VideoPlan, splits: &[&str]) -> VideoPlan {
    if let Some(on_disk) = &mut plan.videos_on_disk {
        on_disk.folder = PathBuf::new();
    }
    plan.videos
        .retain(|video| splits.contains(&video.split.as_str()));
    plan.files
        .splits
        .retain(|split, _| splits.contains(&split.as_str()));
    plan.segment = [0.0; 2];
    plan.keyframes = [0; 2];
    plan
}

/// Each part hashed with its length, so that parts never run into one another.
#[derive(Default)]
struct Digester(Sha256);

impl Digester {
    fn text(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    /// A file of the annotations folder (the plan's names were checked to stay in it).
    fn file(&mut self, annotations: &Path, name: &str) -> Option<()> {
        self.text(name);
        self.bytes(&read_regular(&annotations.join(name), FileKind::Table).ok()?);
        Some(())
    }

    fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }
}

/// The run folders under `runs` whose training read `reads`, `preferred` (the stage's own) first;
/// only a training of the pipeline that finished records it.
pub fn runs_trained_on(runs: &Path, reads: &str, preferred: &Path) -> Vec<PathBuf> {
    let recorded = |dir: &Path| {
        std::fs::read_to_string(dir.join(run_files::READS)).is_ok_and(|text| text.trim() == reads)
    };
    let Ok(entries) = std::fs::read_dir(runs) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .map(|entry| entry.path())
        .filter(|dir| {
            dir.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(super::RUN_PREFIX))
        })
        .filter(|dir| recorded(dir) && !dir.join(run_files::BY_HAND).exists())
        .collect();
    found.sort_by_key(|dir| (dir != preferred, dir.clone()));
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::ItemRecord;
    use crate::pipeline::state::StageState;
    use crate::trainer_settings::Preset;

    /// A data directory with a train, a val and a test video, their annotation files, frames
    /// and extraction's records of them.
    fn dataset() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            (
                "annotations/labels.pbtxt",
                "label { name: \"walk\" label_id: 1 }\n",
            ),
            (
                "annotations/scored.pbtxt",
                "item { name: \"walk\" id: 1 }\n",
            ),
            ("annotations/train.csv", "walk_a,0902,0.1,0.1,0.5,0.5,1,0\n"),
            ("annotations/train_excluded.csv", ""),
            (
                "annotations/train_boxes.csv",
                "walk_a,0902,0.1,0.1,0.5,0.5,,0.9\n",
            ),
            ("annotations/val.csv", "walk_b,0902,0.1,0.1,0.5,0.5,1,0\n"),
            (
                "annotations/val_boxes.csv",
                "walk_b,0902,0.1,0.1,0.5,0.5,,0.9\n",
            ),
            (
                "annotations/test_boxes.csv",
                "new_c,0902,0.1,0.1,0.5,0.5,,0.9\n",
            ),
            ("frames/walk_a/000001.jpg", "a"),
            ("frames/walk_b/000001.jpg", "b"),
            ("frames/new_c/000001.jpg", "c"),
        ] {
            write(dir.path(), name, text);
        }
        write_plan(
            dir.path(),
            &[("walk_a", "train"), ("walk_b", "val"), ("new_c", "test")],
        );
        record_frames(dir.path());
        dir
    }

    fn write(data_dir: &Path, relative: &str, text: &str) {
        let path = data_dir.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn write_plan(data_dir: &Path, videos: &[(&str, &str)]) {
        let videos: Vec<serde_json::Value> = videos
            .iter()
            .map(|(id, split)| {
                serde_json::json!({"id": id, "file_name": format!("{id}.mp4"),
                    "folder": "trainval", "split": split, "keyframes": [902, 903]})
            })
            .collect();
        let plan = serde_json::json!({
            "segment": [900.0, 906.0], "keyframes": [902, 903], "videos": videos,
            "files": {"label_map": "labels.pbtxt", "scored_label_map": "scored.pbtxt",
                "splits": {
                    "train": {"ground_truth": "train.csv",
                        "excluded_timestamps": "train_excluded.csv",
                        "detected_boxes": "train_boxes.csv"},
                    "val": {"ground_truth": "val.csv", "detected_boxes": "val_boxes.csv"},
                    "test": {"detected_boxes": "test_boxes.csv"}}},
            "video_start": 900.0, "own_clock": true
        });
        write(
            data_dir,
            "work/videos.json",
            &serde_json::to_string_pretty(&plan).unwrap(),
        );
    }

    fn edit_plan(data_dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
        let path = data_dir.join("work/videos.json");
        let mut plan: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        edit(&mut plan);
        std::fs::write(path, plan.to_string()).unwrap();
    }

    /// Extraction's records of the frames as they are now.
    fn record_frames(data_dir: &Path) {
        let mut state = StageState::new(StageId::Extract.name(), "key", serde_json::json!({}));
        for entry in std::fs::read_dir(data_dir.join("frames")).unwrap() {
            let id = entry.unwrap().file_name().to_string_lossy().to_string();
            let frames = format!("frames/{id}");
            let record = ItemRecord::of_files(data_dir, &[&frames], &[]).unwrap();
            state.items.insert(id, record);
        }
        StateStore::new(data_dir, None).save(&state).unwrap();
    }

    fn config(settings: &str) -> TrainConfig {
        let preset = Preset::from_name("synthetic-tiny").unwrap();
        crate::trainer_settings::resolve_table(preset, &settings.parse().unwrap()).unwrap()
    }

    fn reads(data_dir: &Path, settings: &str) -> Option<String> {
        let params = serde_json::json!({"preset": "synthetic-tiny"});
        training_reads(data_dir, &params, &config(settings))
    }

    #[test]
    fn what_only_the_test_split_has_leaves_it_the_same() {
        let data = dataset();
        let before = reads(data.path(), "").expect("a digest");
        write(
            data.path(),
            "annotations/test_boxes.csv",
            "new_c,0903,0,0,1,1,,0.9\n",
        );
        write(data.path(), "frames/new_c/000001.jpg", "c, made again");
        write(data.path(), "frames/new_d/000001.jpg", "d");
        write_plan(
            data.path(),
            &[
                ("walk_a", "train"),
                ("walk_b", "val"),
                ("new_c", "test"),
                ("new_d", "test"),
            ],
        );
        // A longer video to predict on widens the plan's segment and keyframe range.
        edit_plan(data.path(), |plan| {
            plan["segment"] = serde_json::json!([900.0, 913.0]);
            plan["keyframes"] = serde_json::json!([902, 910]);
        });
        record_frames(data.path());
        assert_eq!(reads(data.path(), ""), Some(before));
    }

    #[test]
    fn the_videos_read_from_another_folder_leave_it_the_same() {
        let data = dataset();
        let on_disk = |folder: &str| {
            edit_plan(data.path(), |plan| {
                plan["videos_on_disk"] =
                    serde_json::json!({"folder": folder, "start_seconds": 0.0});
            });
            reads(data.path(), "").expect("a digest")
        };
        let here = on_disk("/home/me/project/clips");
        assert_eq!(on_disk("/mnt/copy/project/clips"), here);
        edit_plan(data.path(), |plan| {
            plan["videos_on_disk"]["start_seconds"] = serde_json::json!(900.0);
        });
        assert_ne!(reads(data.path(), ""), Some(here));
    }

    /// What a change is, and how to make it to a data directory.
    type Change = (&'static str, fn(&Path));

    #[test]
    fn each_thing_training_reads_changes_it() {
        let train_frame = |data: &Path| {
            write(data, "frames/walk_a/000001.jpg", "a, made again");
            record_frames(data);
        };
        let val_frame = |data: &Path| {
            write(data, "frames/walk_b/000002.jpg", "b");
            record_frames(data);
        };
        let changes: [Change; 11] = [
            ("a train frame", train_frame),
            ("a val frame", val_frame),
            ("the train labels", |data| {
                write(
                    data,
                    "annotations/train.csv",
                    "walk_a,0903,0.1,0.1,0.5,0.5,1,0\n",
                )
            }),
            ("the train keyframes excluded", |data| {
                write(data, "annotations/train_excluded.csv", "walk_a,0903\n")
            }),
            ("the train detector boxes", |data| {
                write(
                    data,
                    "annotations/train_boxes.csv",
                    "walk_a,0903,0,0,1,1,,0.9\n",
                )
            }),
            ("the proposals' kind", |data| {
                edit_plan(data, |plan| {
                    plan["ground_truth_proposals"] = serde_json::json!(true)
                })
            }),
            ("the val detector boxes", |data| {
                write(
                    data,
                    "annotations/val_boxes.csv",
                    "walk_b,0902,0,0,1,1,,0.9\n",
                )
            }),
            ("the label map", |data| {
                write(
                    data,
                    "annotations/labels.pbtxt",
                    "label { name: \"run\" label_id: 1 }\n",
                )
            }),
            ("the scored label map", |data| {
                write(
                    data,
                    "annotations/scored.pbtxt",
                    "item { name: \"run\" id: 1 }\n",
                )
            }),
            ("a train video's keyframes", |data| {
                edit_plan(data, |plan| {
                    plan["videos"][0]["keyframes"] = serde_json::json!([902])
                })
            }),
            ("a video moved from test to val", |data| {
                write_plan(
                    data,
                    &[("walk_a", "train"), ("walk_b", "val"), ("new_c", "val")],
                )
            }),
        ];
        for (change, make) in changes {
            let data = dataset();
            let before = reads(data.path(), "").expect("a digest");
            make(data.path());
            let after = reads(data.path(), "").expect("a digest");
            assert_ne!(before, after, "{change}");
        }
        let data = dataset();
        let before = reads(data.path(), "");
        assert_ne!(reads(data.path(), "max_epochs = 1"), before, "a setting");
        assert_ne!(
            reads(data.path(), "val_split = \"\""),
            before,
            "no val split"
        );
    }

    #[test]
    fn frames_without_extraction_s_records_are_never_taken_as_the_same() {
        let data = dataset();
        std::fs::remove_file(StateStore::new(data.path(), None).path(StageId::Extract.name()))
            .unwrap();
        assert_eq!(reads(data.path(), ""), None);
        let data = dataset();
        write_plan(
            data.path(),
            &[("walk_a", "train"), ("walk_b", "val"), ("walk_x", "train")],
        );
        assert_eq!(
            reads(data.path(), ""),
            None,
            "a train video with no frames recorded"
        );
    }

    #[test]
    fn the_runs_that_recorded_the_same_reads_are_found_the_stage_s_own_first() {
        let runs = tempfile::tempdir().unwrap();
        let run = |name: &str, reads: &str| {
            let dir = runs.path().join(name);
            write(&dir, run_files::READS, reads);
            dir
        };
        let own = runs.path().join("pipeline-own");
        let (a, b) = (run("pipeline-a", "d1"), run("pipeline-b", "d1\n"));
        run("pipeline-c", "d2");
        run("preset-run", "d3");
        let by_hand = run("pipeline-d", "d1");
        write(&by_hand, run_files::BY_HAND, "avaprep train --resume\n");
        assert_eq!(
            runs_trained_on(runs.path(), "d1", &own),
            [a.clone(), b.clone()]
        );
        assert_eq!(
            runs_trained_on(runs.path(), "d3", &own),
            [] as [PathBuf; 0],
            "not the pipeline's"
        );
        assert_eq!(runs_trained_on(runs.path(), "d4", &own), [] as [PathBuf; 0]);
        let own = run("pipeline-own", "d1");
        assert_eq!(runs_trained_on(runs.path(), "d1", &own), [own, a, b]);
        assert!(runs_trained_on(&runs.path().join("none"), "d1", Path::new("x")).is_empty());
    }
}
