//! The mmaction2 view (`lists --mmaction2`): what mmaction2 1.x's `AVADataset` reads unchanged,
//! at the extracted rate (its `fps` argument), with no copied frame bytes.
//!
//! - `mmaction2/rawframes/<id>/img_%05d.jpg`: link `k` points at the extracted frame of the instant
//!   `timestamp_start + k / fps` (see [`Mmaction2View`] for the loader's arithmetic and why the
//!   config sets `start_index = 0`); only extracted instants have a link.
//! - `mmaction2/annotations/`: links to the filtered tables and label maps in
//!   `slowfast/annotations/`, and each split's person-detector boxes as the proposals pickle
//!   `AVADataset` loads (`proposal_file`).
//! - `mmaction2/ava.py`: the dataset half of an mmaction2 config, in its Python format.
//! - `mmaction2/view.json`: the view's timing, read by `validate`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{base_name, replace_folder, write_file};
use crate::annotations::{KeyframeRange, ReadOptions, parse_predicted_boxes};
use crate::frame_index::{DEFAULT_CLIP_FRAMES, DEFAULT_CLIP_STRIDE, FrameIndex};
use crate::layout::{DataLayout, frame_file_name};
use crate::pipeline::ItemError;
use crate::records::{Mmaction2View, PlannedVideo, VideoPlan};

/// The splits the config gives a dataloader, with the dataloader's name.
const SPLITS: [(&str, &str); 2] = [("train", "train_dataloader"), ("val", "val_dataloader")];

/// The view's timing for frames extracted every `period` seconds over `segment`: mmaction2 counts
/// frames with an integer `fps` from an integer second.
pub fn view_for(segment: [f64; 2], period: f64) -> Result<Mmaction2View, ItemError> {
    let rate = 1.0 / period;
    let fps = rate.round();
    if !(fps >= 1.0 && (rate - fps).abs() < 1e-6) {
        return Err(ItemError::usage(format!(
            "the frames were extracted at {rate:.4} a second; mmaction2's AVADataset counts frames with a whole number a second: extract with a whole --fps (e.g. `avaprep extract --fps 5`) for `lists --mmaction2`"
        )));
    }
    Ok(Mmaction2View {
        fps: fps as u32,
        timestamp_start: segment[0].floor() as i64,
        timestamp_end: segment[1].ceil() as i64,
        clip_len: DEFAULT_CLIP_FRAMES as u32,
        frame_interval: DEFAULT_CLIP_STRIDE,
    })
}

/// One video's folder of links, built beside the old one and renamed over it. Every index a
/// clip of one of the video's keyframes can take, in training or test, must have a link.
pub fn write_video(
    layout: &DataLayout,
    video: &PlannedVideo,
    segment: [f64; 2],
    index: &FrameIndex,
    view: &Mmaction2View,
) -> Result<(), ItemError> {
    let id = video.id.as_str();
    // mmaction2 clamps a clip to the dataset's indices, not the video's: a video shorter than
    // the dataset needs links past its end, as far as its last keyframe's clip reaches, each to
    // the last frame.
    let reach = video
        .keyframes
        .iter()
        .flat_map(|&second| view.training_indices(i64::from(second)))
        .max()
        .unwrap_or(0);
    let shown = |k: i64| video.shown_at(segment, view.instant(k), index.period);
    let linked = |k: i64| (video.span.is_none() || k <= reach) && index.covers(shown(k));
    for &second in &video.keyframes {
        if let Some(k) = view
            .training_indices(i64::from(second))
            .into_iter()
            .find(|&k| !linked(k))
        {
            return Err(ItemError::usage(format!(
                "video {id}: mmaction2's clip of keyframe {second} ({} frames {} apart at {} a second) reaches {:.2} s, which was not extracted; extract with a larger --margin",
                view.clip_len,
                view.frame_interval,
                view.fps,
                view.instant(k)
            )));
        }
    }
    let folder = layout.mmaction2().join("rawframes").join(id);
    replace_folder(&folder, |staging| {
        for k in (0..view.index_count()).filter(|&k| linked(k)) {
            let frame = index.nearest(shown(k));
            let target = Path::new("../../../frames")
                .join(id)
                .join(frame_file_name(id, frame));
            let link = staging.join(Mmaction2View::file_name(k));
            std::os::unix::fs::symlink(&target, &link)
                .map_err(|e| ItemError::output(format!("{}: {e}", link.display())))?;
        }
        Ok(())
    })
}

/// The annotations, the config and the timing record; returns the files written.
pub fn write_files(
    layout: &DataLayout,
    plan: &VideoPlan,
    view: &Mmaction2View,
) -> Result<Vec<PathBuf>, ItemError> {
    let root = layout.mmaction2();
    let annotations = root.join("annotations");
    let mut files = Vec::new();
    let link = |name: &str| -> Result<PathBuf, ItemError> {
        let path = annotations.join(name);
        link_atomic(&Path::new("../../slowfast/annotations").join(name), &path)?;
        Ok(path)
    };
    let label_file = link(base_name(&plan.files.scored_label_map))?;
    files.push(label_file.clone());
    files.push(link(base_name(&plan.files.label_map))?);
    let mut datasets = Vec::new();
    for (split, loader) in SPLITS {
        let Some(split_files) = plan.files.splits.get(split) else {
            continue;
        };
        let Some(ground_truth) = &split_files.ground_truth else {
            continue;
        };
        let ann_file = link(base_name(ground_truth))?;
        files.push(ann_file.clone());
        let exclude_file = match &split_files.excluded_timestamps {
            Some(name) => Some(link(base_name(name))?),
            None => None,
        };
        files.extend(exclude_file.clone());
        let proposal_file = match &split_files.detected_boxes {
            Some(name) => {
                let boxes = layout.slowfast().join("annotations").join(base_name(name));
                let path = annotations.join(format!("ava_dense_proposals_{split}.pkl"));
                write_file(&path, &proposals_pickle(&boxes, plan)?)?;
                files.push(path.clone());
                Some(path)
            }
            None => None,
        };
        datasets.push(SplitDataset {
            split,
            loader,
            ann_file,
            exclude_file,
            proposal_file,
        });
    }
    // Index 0 is unused: the class of action id `a` is index `a`.
    let num_classes = super::largest_action_id(layout, plan)? + 1;
    let config = root.join("ava.py");
    let text = config_py(layout, view, &label_file, num_classes, &datasets);
    write_file(&config, text.as_bytes())?;
    files.push(config);
    let record = root.join(Mmaction2View::RECORD);
    write_file(
        &record,
        &serde_json::to_vec_pretty(view).expect("the view serialises"),
    )?;
    files.push(record);
    Ok(files)
}

struct SplitDataset {
    split: &'static str,
    loader: &'static str,
    ann_file: PathBuf,
    exclude_file: Option<PathBuf>,
    proposal_file: Option<PathBuf>,
}

/// A split's person-detector boxes as `AVADataset` loads them: a pickled dict from
/// `"<video>,<second:04>"` to an N x 5 float64 array of `x1, y1, x2, y2, score`, one row per
/// distinct box (a train box list repeats a box once per label).
fn proposals_pickle(boxes_csv: &Path, plan: &VideoPlan) -> Result<Vec<u8>, ItemError> {
    let bytes = std::fs::read(boxes_csv)
        .map_err(|error| ItemError::input(format!("{}: {error}", boxes_csv.display())))?;
    let keyframes = KeyframeRange::new(plan.keyframes[0], plan.keyframes[1]).unwrap_or_default();
    let options = ReadOptions {
        keyframes,
        actions: None,
    };
    // The typed reader checks every line (and names a bad one); the values are then taken from
    // the text itself so the pickle holds the file's decimals, not their f32 rounding.
    // A split whose every video was dropped has no rows: no proposals, not a truncated file.
    if !bytes.is_empty() {
        parse_predicted_boxes(&bytes, &boxes_csv.display().to_string(), &options)
            .map_err(ItemError::input)?;
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut proposals: BTreeMap<String, Vec<[f64; 5]>> = BTreeMap::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let number = |i: usize| fields[i].parse::<f64>().unwrap_or(f64::NAN);
        let second: u32 = fields[1].parse().unwrap_or(0);
        let key = format!("{},{second:04}", fields[0]);
        let row = [number(2), number(3), number(4), number(5), number(7)];
        let rows = proposals.entry(key).or_default();
        match rows.iter_mut().find(|seen| seen[..4] == row[..4]) {
            Some(seen) => seen[4] = seen[4].max(row[4]),
            None => rows.push(row),
        }
    }
    Ok(super::pickle::dict_of_arrays(&proposals))
}

/// A link written under a temporary name and renamed over `path`.
fn link_atomic(target: &Path, path: &Path) -> Result<(), ItemError> {
    let io = |error: std::io::Error| ItemError::output(format!("{}: {error}", path.display()));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let temporary = crate::fsutil::temporary_path(path);
    let _ = std::fs::remove_file(&temporary);
    std::os::unix::fs::symlink(target, &temporary).map_err(io)?;
    std::fs::rename(&temporary, path).map_err(io)
}

/// The dataset half of an mmaction2 config. Paths are relative to the config's own folder
/// (mmengine's `{{ fileDirname }}`), so it works from any folder and with the data directory
/// moved or copied.
fn config_py(
    layout: &DataLayout,
    view: &Mmaction2View,
    label_file: &Path,
    num_classes: u32,
    datasets: &[SplitDataset],
) -> String {
    let path = |path: &Path| {
        let beside = match path.strip_prefix(layout.mmaction2()) {
            Ok(inside) => inside.to_path_buf(),
            Err(_) => Path::new("..").join(path.strip_prefix(layout.root()).unwrap_or(path)),
        };
        python_string(&format!(
            "{{{{ fileDirname }}}}/{}",
            beside.to_string_lossy()
        ))
    };
    let optional = |file: &Option<PathBuf>| file.as_ref().map_or("None".to_string(), |p| path(p));
    let mut text = String::new();
    let clip_seconds = f64::from(view.clip_len * view.frame_interval) / f64::from(view.fps);
    writeln!(
        text,
        "# Written by `avaprep lists --mmaction2`: the dataset half of an mmaction2 1.x config for\n\
         # this data directory. Inherit it (`_base_ = ['<this file>']`) in a model config.\n\
         # Frames are read at the extracted rate, {fps} a second: AVADataset counts frames with `fps`\n\
         # from `timestamp_start`, with `start_index = 0` (SampleAVAFrames adds start_index twice, so\n\
         # its default of 1 would centre every clip a frame late). The clip is avaprep's trainer's:\n\
         # {clip} frames {interval} apart ({clip_seconds:.1} s); a SlowFast backbone for it takes\n\
         # `resample_rate=4, speed_ratio=4` (4 Slow frames, {clip} Fast).",
        fps = view.fps,
        clip = view.clip_len,
        interval = view.frame_interval,
    )
    .expect("a string");
    writeln!(text, "dataset_type = 'AVADataset'").expect("a string");
    writeln!(
        text,
        "data_root = {}",
        path(&layout.mmaction2().join("rawframes"))
    )
    .expect("a string");
    writeln!(text, "label_file = {}", path(label_file)).expect("a string");
    writeln!(text, "num_classes = {num_classes}").expect("a string");
    writeln!(
        text,
        "train_pipeline = [\n    dict(type='SampleAVAFrames', clip_len={clip}, frame_interval={interval}),\n    dict(type='RawFrameDecode'),\n    dict(type='RandomRescale', scale_range=(256, 320)),\n    dict(type='RandomCrop', size=224),\n    dict(type='Flip', flip_ratio=0.5),\n    dict(type='FormatShape', input_format='NCTHW', collapse=True),\n    dict(type='PackActionInputs'),\n]\n\
         val_pipeline = [\n    dict(type='SampleAVAFrames', clip_len={clip}, frame_interval={interval}, test_mode=True),\n    dict(type='RawFrameDecode'),\n    dict(type='Resize', scale=(-1, 256)),\n    dict(type='FormatShape', input_format='NCTHW', collapse=True),\n    dict(type='PackActionInputs'),\n]",
        clip = view.clip_len,
        interval = view.frame_interval,
    )
    .expect("a string");
    for dataset in datasets {
        let test_mode = dataset.split != "train";
        let (pipeline, shuffle) = if test_mode {
            ("val_pipeline", "False")
        } else {
            ("train_pipeline", "True")
        };
        writeln!(
            text,
            "{loader} = dict(\n    batch_size=8,\n    num_workers=8,\n    persistent_workers=True,\n    sampler=dict(type='DefaultSampler', shuffle={shuffle}),\n    dataset=dict(\n        type=dataset_type,\n        ann_file={ann_file},\n        exclude_file={exclude_file},\n        proposal_file={proposal_file},\n        pipeline={pipeline},\n        label_file=label_file,\n        num_classes=num_classes,\n        person_det_score_thr={threshold},\n        data_prefix=dict(img=data_root),\n        filename_tmpl={template},\n        start_index=0,\n        fps={fps},\n        timestamp_start={start},\n        timestamp_end={end},\n        test_mode={test_mode}))",
            loader = dataset.loader,
            ann_file = path(&dataset.ann_file),
            exclude_file = optional(&dataset.exclude_file),
            proposal_file = optional(&dataset.proposal_file),
            template = python_string(Mmaction2View::FILENAME_TEMPLATE),
            fps = view.fps,
            start = view.timestamp_start,
            end = view.timestamp_end,
            test_mode = if test_mode { "True" } else { "False" },
            threshold = crate::annotations::DETECTION_SCORE_THRESHOLD,
        )
        .expect("a string");
        if test_mode {
            writeln!(
                text,
                "val_evaluator = dict(\n    type='AVAMetric',\n    ann_file={ann_file},\n    label_file=label_file,\n    exclude_file={exclude_file},\n    num_classes=num_classes)\n\
                 test_dataloader = val_dataloader\ntest_evaluator = val_evaluator",
                ann_file = path(&dataset.ann_file),
                exclude_file = optional(&dataset.exclude_file),
            )
            .expect("a string");
        }
    }
    text
}

/// A Python string literal (JSON's escaping is valid Python).
fn python_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}
