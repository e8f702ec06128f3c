//! The miniature's ground truth as annotation tools export it, for `avaprep import` to read as
//! a user's would be: CVAT for video 1.1 (one task a video: a track a person, every frame
//! written out, interpolated between the annotator's keyframes at the keyframe seconds), CVAT
//! for images 1.1 (a keyframe image a second) and a VIA 3 project (a region a person and
//! keyframe, at the keyframe's instant on a browser's timeline). Actions are checkbox attributes named by the action (VIA: options of one `action`
//! attribute); persons are the ground truth's (a `person` attribute; CVAT's track `id` counts
//! from 0, the persons from 1).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::SynthError;
use super::annotations::{GtBox, gt_boxes};
use super::mirror::write_atomic;
use super::plan::{ACTIONS, DatasetPlan, Split, TICKS, VideoSpec};
use avaprep::markup::escape;

/// The folder under the synth output that holds the exports.
pub const EXPORTS_DIR: &str = "exports";
pub const CVAT_VIDEO_DIR: &str = "cvat-video";
pub const CVAT_IMAGES: &str = "cvat-images.xml";
pub const VIA3: &str = "via3.json";

/// Writes every export for the annotated (train and val) videos; returns the files written.
pub fn write_exports(plan: &DatasetPlan, out: &Path) -> Result<Vec<PathBuf>, SynthError> {
    let root = out.join(EXPORTS_DIR);
    let videos: Vec<&VideoSpec> = plan
        .videos
        .iter()
        .filter(|video| video.split != Split::Test && video.keyframes.is_some())
        .collect();
    let mut files = Vec::new();
    for video in &videos {
        let path = root.join(CVAT_VIDEO_DIR).join(format!("{}.xml", video.id));
        write_atomic(&path, cvat_video(video).as_bytes())?;
        files.push(path);
    }
    let path = root.join(CVAT_IMAGES);
    write_atomic(&path, cvat_images(&videos).as_bytes())?;
    files.push(path);
    let path = root.join(VIA3);
    let json = serde_json::to_vec_pretty(&via3(&videos))?;
    write_atomic(&path, &json)?;
    files.push(path);
    Ok(files)
}

fn keyframes(video: &VideoSpec) -> std::ops::RangeInclusive<u32> {
    let (first, last) = video.keyframes.unwrap_or((1, 0));
    first..=last
}

/// The box in whole pixels, as the annotator drew it (the ground truth is whole pixels over the
/// frame size).
fn pixels(video: &VideoSpec, b: &GtBox) -> [f64; 4] {
    let (w, h) = (f64::from(video.width), f64::from(video.height));
    [b.x1 * w, b.y1 * h, b.x2 * w, b.y2 * h].map(f64::round)
}

fn action_names(b: &GtBox) -> Vec<&'static str> {
    let ids = b.action_ids();
    ACTIONS
        .iter()
        .filter(|action| ids.contains(&action.1))
        .map(|action| action.2)
        .collect()
}

/// The label `person` with a checkbox attribute per action, as CVAT writes a task's labels.
fn cvat_labels() -> String {
    let names: Vec<&str> = ACTIONS.iter().map(|action| action.2).collect();
    avaprep::import::keyframes::cvat_person_label(&names)
}

fn cvat_attributes(actions: &[&str]) -> String {
    let mut text = String::new();
    for (_, _, name, _, _) in ACTIONS {
        let _ = writeln!(
            text,
            "      <attribute name=\"{}\">{}</attribute>",
            escape(name),
            actions.contains(&name)
        );
    }
    text
}

/// The frame shown nearest second `t` (the earlier on a tie).
fn frame_nearest(video: &VideoSpec, t: u32) -> usize {
    let at = i64::from(t) * TICKS;
    let ticks = &video.frame_ticks;
    let after = ticks.partition_point(|&tick| tick < at);
    match after {
        0 => 0,
        i if i == ticks.len() => i - 1,
        i if at - ticks[i - 1] <= ticks[i] - at => i - 1,
        i => i,
    }
}

/// One shape of a track at a frame: the box (none where the person is not in view) and its
/// actions.
#[derive(Clone)]
struct Key {
    frame: usize,
    corners: Option<[f64; 4]>,
    actions: Vec<&'static str>,
}

fn cvat_video(video: &VideoSpec) -> String {
    let frames = video.frame_ticks.len();
    let mut text = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<annotations>\n  <version>1.1</version>\n  <meta>\n    <task>\n      <id>{}</id>\n      <name>{}</name>\n      <size>{frames}</size>\n      <mode>interpolation</mode>\n      <overlap>5</overlap>\n      <bugtracker></bugtracker>\n      <created>2026-01-01 00:00:00.000000+00:00</created>\n      <updated>2026-01-01 00:00:00.000000+00:00</updated>\n      <subset>default</subset>\n      <start_frame>0</start_frame>\n      <stop_frame>{}</stop_frame>\n      <frame_filter></frame_filter>\n{}      <original_size>\n        <width>{}</width>\n        <height>{}</height>\n      </original_size>\n    </task>\n    <dumped>2026-01-01 00:00:00.000000+00:00</dumped>\n    <source>{}</source>\n  </meta>\n",
        video.index + 1,
        video.id,
        frames - 1,
        cvat_labels(),
        video.width,
        video.height,
        video.file_name(),
    );
    let mut tracks: BTreeMap<u32, Vec<Key>> = BTreeMap::new();
    for t in keyframes(video) {
        let boxes = gt_boxes(video, t);
        for actor in &video.actors {
            let found = boxes.iter().find(|b| b.person_id == actor.person_id);
            let keys = tracks.entry(actor.person_id).or_default();
            if found.is_none() && keys.is_empty() {
                continue;
            }
            keys.push(Key {
                frame: frame_nearest(video, t),
                corners: found.map(|b| pixels(video, b)),
                actions: found.map(action_names).unwrap_or_default(),
            });
        }
    }
    for (person, mut keys) in tracks {
        // The track ends after its last keyframe: the annotator marks the person outside.
        if let Some(last) = keys.last().cloned()
            && last.corners.is_some()
            && last.frame + 1 < frames
        {
            keys.push(Key {
                frame: last.frame + 1,
                corners: None,
                actions: Vec::new(),
            });
        }
        // CVAT numbers tracks from 0; the ground truth's persons from 1.
        let _ = writeln!(
            text,
            "  <track id=\"{}\" label=\"person\" source=\"manual\">",
            person - 1
        );
        write_track_frames(&mut text, &keys);
        text.push_str("  </track>\n");
    }
    text.push_str("</annotations>\n");
    text
}

/// Every frame from the track's first keyframe to its last, as CVAT dumps a track: the
/// annotator's keyframes, the frames between them interpolated, an outside shape holding the
/// last box seen.
fn write_track_frames(text: &mut String, keys: &[Key]) {
    let mut last_seen = [0.0; 4];
    for (index, key) in keys.iter().enumerate() {
        let next = keys.get(index + 1);
        let end = next.map_or(key.frame + 1, |next| next.frame);
        for frame in key.frame..end {
            let (corners, outside, keyframe) = match (key.corners, next.and_then(|n| n.corners)) {
                (Some(from), Some(to)) if frame > key.frame => {
                    let share = (frame - key.frame) as f64 / (end - key.frame) as f64;
                    let corners = std::array::from_fn(|i| from[i] + (to[i] - from[i]) * share);
                    (corners, false, false)
                }
                (Some(from), _) => (from, false, frame == key.frame),
                (None, _) if frame == key.frame => (last_seen, true, true),
                (None, _) => continue,
            };
            if !outside {
                last_seen = corners;
            }
            let [xtl, ytl, xbr, ybr] = corners;
            let _ = write!(
                text,
                "    <box frame=\"{frame}\" keyframe=\"{}\" outside=\"{}\" occluded=\"0\" xtl=\"{xtl:.2}\" ytl=\"{ytl:.2}\" xbr=\"{xbr:.2}\" ybr=\"{ybr:.2}\" z_order=\"0\">\n{}    </box>\n",
                u8::from(keyframe),
                u8::from(outside),
                cvat_attributes(&key.actions),
            );
        }
    }
}

fn cvat_images(videos: &[&VideoSpec]) -> String {
    let count: usize = videos.iter().map(|video| keyframes(video).count()).sum();
    let mut text = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<annotations>\n  <version>1.1</version>\n  <meta>\n    <task>\n      <id>1</id>\n      <name>keyframes</name>\n      <size>{count}</size>\n      <mode>annotation</mode>\n      <overlap>0</overlap>\n      <start_frame>0</start_frame>\n      <stop_frame>{}</stop_frame>\n      <frame_filter></frame_filter>\n{}    </task>\n    <dumped>2026-01-01 00:00:00.000000+00:00</dumped>\n  </meta>\n",
        count.saturating_sub(1),
        cvat_labels(),
    );
    let mut id = 0;
    for video in videos {
        for t in keyframes(video) {
            let _ = writeln!(
                text,
                "  <image id=\"{id}\" name=\"{}/{t:06}.jpg\" width=\"{}\" height=\"{}\">",
                video.id, video.width, video.height
            );
            for b in gt_boxes(video, t) {
                let [xtl, ytl, xbr, ybr] = pixels(video, &b);
                let _ = write!(
                    text,
                    "    <box label=\"person\" source=\"manual\" occluded=\"0\" xtl=\"{xtl:.2}\" ytl=\"{ytl:.2}\" xbr=\"{xbr:.2}\" ybr=\"{ybr:.2}\" z_order=\"0\">\n      <attribute name=\"person\">{}</attribute>\n{}    </box>\n",
                    b.person_id,
                    cvat_attributes(&action_names(&b)),
                );
            }
            text.push_str("  </image>\n");
            id += 1;
        }
    }
    text.push_str("</annotations>\n");
    text
}

/// A VIA 3 project: a file and a view per video, an `action` checkbox attribute with an option
/// per action and a `person` text attribute, and a region per person and keyframe.
fn via3(videos: &[&VideoSpec]) -> serde_json::Value {
    use serde_json::{Map, Value, json};
    let options: Map<String, Value> = ACTIONS
        .iter()
        .enumerate()
        .map(|(index, action)| (index.to_string(), json!(action.2)))
        .collect();
    let mut files = Map::new();
    let mut views = Map::new();
    let mut metadata = Map::new();
    for (index, video) in videos.iter().enumerate() {
        let fid = (index + 1).to_string();
        files.insert(
            fid.clone(),
            json!({"fid": fid, "fname": video.file_name(), "type": 4, "loc": 1, "src": ""}),
        );
        views.insert(fid.clone(), json!({"fid_list": [fid]}));
        // VIA stores the `<video>` element's times: Chromium's media timeline (import's default)
        // puts a frame at the file's own timestamp.
        let player_start = (video.start_ticks as f64 / TICKS as f64).max(0.0);
        for t in keyframes(video) {
            for b in gt_boxes(video, t) {
                let [x1, y1, x2, y2] = pixels(video, &b);
                let names = action_names(&b);
                let ticked: Vec<String> = ACTIONS
                    .iter()
                    .enumerate()
                    .filter(|(_, action)| names.contains(&action.2))
                    .map(|(index, _)| index.to_string())
                    .collect();
                metadata.insert(
                    format!("{fid}_{t}_{}", b.person_id),
                    json!({
                        "vid": fid,
                        "flg": 0,
                        "z": [player_start + f64::from(t)],
                        "xy": [2, x1, y1, x2 - x1, y2 - y1],
                        "av": {"1": ticked.join(","), "2": b.person_id.to_string()},
                    }),
                );
            }
        }
    }
    let vid_list: Vec<Value> = views.keys().map(|key| json!(key)).collect();
    json!({
        "project": {
            "pid": "__VIA_PROJECT_ID__",
            "rev": "__VIA_PROJECT_REV_ID__",
            "rev_timestamp": "__VIA_PROJECT_REV_TIMESTAMP__",
            "pname": "avaprep synthetic AVA",
            "creator": "VGG Image Annotator (http://www.robots.ox.ac.uk/~vgg/software/via)",
            "created": 1_767_225_600_000_u64,
            "vid_list": vid_list,
        },
        "config": {"file": {"loc_prefix": {"1": "", "2": "", "3": "", "4": ""}}, "ui": {}},
        "attribute": {
            "1": {"aname": "action", "anchor_id": "FILE1_Z1_XY1", "type": 2, "desc": "", "options": options, "default_option_id": ""},
            "2": {"aname": "person", "anchor_id": "FILE1_Z1_XY1", "type": 1, "desc": "", "options": {}, "default_option_id": ""},
        },
        "file": files,
        "view": views,
        "metadata": metadata,
    })
}
