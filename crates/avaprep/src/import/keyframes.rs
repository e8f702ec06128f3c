//! `avaprep keyframes`: the way into a labelling tool, before the import. For a folder of
//! videos it writes the keyframe images (at each keyframe second, the source frame nearest it,
//! chosen and scaled as extraction chooses and scales the frames training reads) and a CVAT for
//! images 1.1 task over them: the label `person` with a checkbox per action, and a person
//! detector's boxes already drawn, so people tick actions and fix boxes instead of drawing them.
//! Beside it, a VIA 3 video annotator project over the videos themselves, with the same boxes at
//! each keyframe's instant. Either tool's export goes back through
//! `avaprep import --action-from checkboxes`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::ImportError;
use super::export::Browser;
use crate::annotations::{NormBox, VideoFileName, VideoId};
use crate::extract::{ExtractSpec, FrameFormat, extract_video};
use crate::markup::escape;
use crate::pipeline::prints::FilePrint;
use crate::progress::Reporter;

/// The task's annotations, beside its images.
pub const TASK_FILE: &str = "annotations.xml";
/// The images as CVAT takes them for a task: `<video>/<second>.jpg` at the archive's top.
pub const IMAGES_ARCHIVE: &str = "images.zip";
/// The VIA 3 project over the videos.
pub const VIA_PROJECT: &str = "via_project.json";
const IMAGES: &str = "images";
/// Each video's record of the images made of it, so a run again keeps them (see [`MadeImages`]).
const MADE: &str = ".avaprep/keyframes";
/// The progress bar's name.
const STAGE: &str = "keyframes";

#[derive(Debug, Clone)]
pub struct KeyframeOptions {
    /// The folder of `<id>.mp4`, `.mkv` or `.webm` videos.
    pub videos: PathBuf,
    pub out: PathBuf,
    /// The actions to tick, one checkbox each.
    pub actions: Vec<String>,
    /// Seconds between keyframes, from each video's second 0.
    pub keyframe_interval: u32,
    /// The images' height; 0 keeps the videos' own.
    pub height: u32,
    /// A person detector's boxes (AVA's detection CSV on the videos' own seconds), drawn in the
    /// task and the project.
    pub detections: Option<PathBuf>,
    /// The browser the VIA project is for: it places the boxes on that browser's timeline.
    pub via_browser: Browser,
}

/// What was written, printed as the summary and recorded with `--json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KeyframeSummary {
    pub videos: usize,
    /// Videos whose images an earlier run made and this one kept: the file and the settings
    /// that chose them are as they were.
    pub kept_videos: usize,
    pub images: usize,
    /// Detector boxes drawn in the task (and the project).
    pub boxes: usize,
    /// Detector boxes at a second that is no keyframe of their video: not drawn.
    pub detections_off_keyframes: usize,
    /// Videos the detections name whose keyframes were not written (not in the folder, or left
    /// out): their boxes are not drawn.
    pub detections_of_other_videos: Vec<String>,
    /// Videos that could not be read, or whose file names cannot be used, with why; the others
    /// are written.
    pub skipped_videos: Vec<String>,
    pub task: PathBuf,
    pub archive: PathBuf,
    pub via_project: PathBuf,
}

/// One keyframe image written: where, its size, and when its frame is shown in the video.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct KeyframeImage {
    name: String,
    video: VideoId,
    second: u32,
    size: (u32, u32),
    shown_at: f64,
}

/// A video whose keyframes were written: its file, and what libav says of it (the shown frame
/// size that a video annotator's pixels are in, and where its first timestamp is).
struct KeyframedVideo {
    file: VideoFileName,
    facts: super::resolve::VideoFacts,
}

/// Writes `out/images/<video>/<second>.jpg`, `out/images.zip` (the same, for CVAT),
/// `out/annotations.xml` and `out/via_project.json`. A video that cannot be read is named in the
/// summary and the others are written; a video's images are replaced only once its new ones are
/// complete, and kept by a run again while its file and the settings are as they were.
/// `cancel` (Ctrl-C) stops it between videos, or within one, discarding its images; the task,
/// archive and project are then left as they were.
pub fn export_keyframes(
    options: &KeyframeOptions,
    reporter: &dyn Reporter,
    cancel: &AtomicBool,
) -> Result<KeyframeSummary, ImportError> {
    check_options(options)?;
    let videos = super::videos_in_folder(&options.videos)?;
    let misnamed: Vec<String> = super::misnamed_videos(&options.videos)
        .iter()
        .map(ToString::to_string)
        .collect();
    if videos.is_empty() {
        let unusable = match misnamed.is_empty() {
            true => String::new(),
            false => format!(" usable as named ({})", misnamed.join("; ")),
        };
        return Err(ImportError::Usage(format!(
            "{}: no video (`<name>.mp4`, `.mkv` or `.webm`) in it{unusable}",
            options.videos.display()
        )));
    }
    let detected = read_detections(options)?;
    let mut summary = KeyframeSummary {
        skipped_videos: misnamed,
        ..KeyframeSummary::default()
    };
    let mut images = Vec::new();
    let mut keyframed = BTreeMap::new();
    reporter.stage_started(STAGE, videos.len(), 0);
    for (id, file) in &videos {
        let outcome = video_keyframes(options, *id, file, cancel);
        if cancel.load(Ordering::SeqCst) {
            reporter.stage_finished(STAGE);
            let done = summary.videos + usize::from(outcome.is_ok());
            return Err(ImportError::Interrupted(format!(
                "the images of {done} of {} videos are in {}; the task, images.zip and the VIA project are not written: run keyframes again (it keeps those images)",
                videos.len(),
                options.out.join(IMAGES).display()
            )));
        }
        reporter.item_finished(
            STAGE,
            &id.to_string(),
            outcome.as_ref().err().map(String::as_str),
        );
        match outcome {
            Ok((facts, written, kept)) => {
                summary.videos += 1;
                summary.kept_videos += usize::from(kept);
                images.extend(written);
                let file = *file;
                keyframed.insert(*id, KeyframedVideo { file, facts });
            }
            Err(message) => summary.skipped_videos.push(format!("{id}: {message}")),
        }
    }
    reporter.stage_finished(STAGE);
    let keys: BTreeSet<(VideoId, u32)> = images.iter().map(|i| (i.video, i.second)).collect();
    summary.images = images.len();
    summary.boxes = detected
        .iter()
        .filter(|(key, _)| keys.contains(key))
        .map(|(_, boxes)| boxes.len())
        .sum();
    let (on_videos_here, elsewhere): (Vec<_>, Vec<_>) = detected
        .iter()
        .filter(|(key, _)| !keys.contains(key))
        .partition(|((video, _), _)| keyframed.contains_key(video));
    summary.detections_off_keyframes = on_videos_here.iter().map(|(_, boxes)| boxes.len()).sum();
    let others: BTreeSet<String> = elsewhere
        .iter()
        .map(|((video, _), _)| video.to_string())
        .collect();
    summary.detections_of_other_videos = others.into_iter().collect();
    summary.archive = options.out.join(IMAGES_ARCHIVE);
    write_archive(&options.out, &images, &summary.archive)?;
    summary.task = options.out.join(TASK_FILE);
    let task = cvat_task(&options.actions, &images, &detected);
    write_file(&summary.task, task.as_bytes())?;
    summary.via_project = options.out.join(VIA_PROJECT);
    let project = via_project(options, &keyframed, &images, &detected);
    write_file(&summary.via_project, project.to_string().as_bytes())?;
    Ok(summary)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ImportError> {
    crate::fsutil::write_atomic(path, bytes).map_err(|source| ImportError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// A keyframe's image: one frame each `1 / fps` seconds, at the best JPEG quality.
fn frame_format(fps: f64, height: u32) -> Result<FrameFormat, crate::bad_setting::BadSetting> {
    FrameFormat::new(fps, height, crate::extract::DEFAULT_QUALITY, false)
}

fn check_options(options: &KeyframeOptions) -> Result<(), ImportError> {
    if !options.videos.is_dir() {
        return Err(ImportError::Usage(format!(
            "--videos {}: not a folder",
            options.videos.display()
        )));
    }
    if options.keyframe_interval == 0 {
        return Err(ImportError::Usage(
            "--keyframe-interval 0: keyframes are whole seconds apart, 1 or more".into(),
        ));
    }
    frame_format(1.0, options.height).map_err(|bad| ImportError::Usage(bad.as_flags()))?;
    if options.actions.is_empty() {
        return Err(ImportError::Usage(
            "name the actions to label (--actions fall,fight,wave): one checkbox each".into(),
        ));
    }
    let mut seen = BTreeSet::new();
    for action in &options.actions {
        let plain =
            !action.is_empty() && action.trim() == action && !action.contains(['"', '\n', '\r']);
        if !plain || !seen.insert(action) {
            return Err(ImportError::Usage(format!(
                "--actions: {action:?} is {}",
                match plain {
                    true => "named twice",
                    false =>
                        "not an action name (empty, with spaces around it, or with a quote or a line break)",
                }
            )));
        }
    }
    Ok(())
}

/// The detector's boxes by video and second, each box once (a detection CSV has a row per box
/// and action).
fn read_detections(
    options: &KeyframeOptions,
) -> Result<BTreeMap<(VideoId, u32), Vec<NormBox>>, ImportError> {
    let Some(path) = &options.detections else {
        return Ok(BTreeMap::new());
    };
    let rows = super::read_own_clock_detections(path)?;
    let mut boxes: BTreeMap<(VideoId, u32), Vec<NormBox>> = BTreeMap::new();
    for row in rows {
        let at = boxes.entry((row.key.video, row.key.second)).or_default();
        if !at.contains(&row.bbox) {
            at.push(row.bbox);
        }
    }
    Ok(boxes)
}

/// What made a video's keyframe images, recorded in `out/.avaprep/keyframes/<video>.json` once
/// they are in place: a run again keeps them while this is still so, rather than decode the
/// video again (after Ctrl-C, or for the other browser's VIA project).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct MadeImages {
    version: String,
    /// The video file's name, size and modification time.
    video: FilePrint,
    keyframe_interval: u32,
    height: u32,
    /// The images' folder as written: an image deleted or edited since is made again.
    folder: FilePrint,
    images: Vec<KeyframeImage>,
}

impl MadeImages {
    fn path(out: &Path, id: VideoId) -> PathBuf {
        out.join(MADE).join(format!("{id}.json"))
    }

    /// The record of `id`'s images as they would be made now, with `images`.
    fn now(
        options: &KeyframeOptions,
        id: VideoId,
        file: &VideoFileName,
        images: Vec<KeyframeImage>,
    ) -> std::io::Result<Self> {
        Ok(MadeImages {
            version: env!("CARGO_PKG_VERSION").to_string(),
            video: FilePrint::take(&options.videos, &file.to_string())?,
            keyframe_interval: options.keyframe_interval,
            height: options.height,
            folder: FilePrint::take(&options.out, &format!("{IMAGES}/{id}"))?,
            images,
        })
    }

    /// The images an earlier run made of `id`, where the record of them still holds.
    fn kept(
        options: &KeyframeOptions,
        id: VideoId,
        file: &VideoFileName,
    ) -> Option<Vec<KeyframeImage>> {
        let bytes = std::fs::read(Self::path(&options.out, id)).ok()?;
        let recorded: MadeImages = serde_json::from_slice(&bytes).ok()?;
        let now = Self::now(options, id, file, recorded.images.clone()).ok()?;
        (now == recorded).then_some(recorded.images)
    }
}

/// What libav says of a video, and its keyframe images, written into a staging folder and moved
/// into place complete (or those an earlier run made, kept: the `bool`).
fn video_keyframes(
    options: &KeyframeOptions,
    id: VideoId,
    file: &VideoFileName,
    cancel: &AtomicBool,
) -> Result<(super::resolve::VideoFacts, Vec<KeyframeImage>, bool), String> {
    let path = options.videos.join(file.to_string());
    let facts = super::probe(&path)?;
    if let Some(images) = MadeImages::kept(options, id, file) {
        return Ok((facts, images, true));
    }
    let images = extract_keyframes(options, id, &path, &facts, cancel)?;
    let failed = |error: &dyn std::fmt::Display| format!("{}: {error}", path.display());
    let record = MadeImages::now(options, id, file, images.clone()).map_err(|e| failed(&e))?;
    let json = serde_json::to_vec_pretty(&record).expect("a record serialises");
    crate::fsutil::write_atomic(&MadeImages::path(&options.out, id), &json)
        .map_err(|e| failed(&e))?;
    Ok((facts, images, false))
}

fn extract_keyframes(
    options: &KeyframeOptions,
    id: VideoId,
    path: &Path,
    facts: &super::resolve::VideoFacts,
    cancel: &AtomicBool,
) -> Result<Vec<KeyframeImage>, String> {
    let seconds = super::resolve::keyframe_seconds(facts.last_instant(), options.keyframe_interval);
    let interval = f64::from(options.keyframe_interval);
    // Extraction's frame k is at (k - 1) / fps from the segment's start: one a keyframe.
    let frames: Vec<u32> = seconds
        .iter()
        .map(|&second| second / options.keyframe_interval + 1)
        .collect();
    let folder = options.out.join(IMAGES).join(id.to_string());
    let staging = crate::fsutil::staging_beside(&folder);
    let failed = |error: &dyn std::fmt::Display| format!("{}: {error}", path.display());
    crate::fsutil::remove_if_present(&staging).map_err(|e| failed(&e))?;
    std::fs::create_dir_all(&staging).map_err(|e| failed(&e))?;
    let format = frame_format(1.0 / interval, options.height).map_err(|e| failed(&e))?;
    let spec = ExtractSpec::new(format, 1);
    let extraction = extract_video(
        path,
        &id.to_string(),
        &frames,
        [0.0, facts.duration],
        &spec,
        &staging,
        &|_, _| !cancel.load(Ordering::SeqCst),
    );
    let extraction = extraction.map_err(|e| {
        let _ = crate::fsutil::remove_if_present(&staging);
        failed(&e)
    })?;
    let mut images = Vec::new();
    for row in &extraction.index {
        let second = (row.frame - 1) * options.keyframe_interval;
        let name = format!("{second:06}.jpg");
        let from = staging.join(crate::layout::frame_file_name(&id.to_string(), row.frame));
        std::fs::rename(&from, staging.join(&name)).map_err(|e| failed(&e))?;
        images.push(KeyframeImage {
            name: format!("{id}/{name}"),
            video: id,
            second,
            size: (row.width, row.height),
            shown_at: row.source_seconds,
        });
    }
    crate::fsutil::replace_dir(&staging, &folder).map_err(|e| failed(&e))?;
    Ok(images)
}

/// The images at the archive's top, as CVAT names a task's images after their paths in it.
fn write_archive(out: &Path, images: &[KeyframeImage], archive: &Path) -> Result<(), ImportError> {
    let failed = |source: std::io::Error| ImportError::Write {
        path: archive.to_path_buf(),
        source,
    };
    // Written beside and renamed into place: a reader never takes half an archive for CVAT.
    let staging = crate::fsutil::staging_beside(archive);
    let file = std::fs::File::create(&staging).map_err(failed)?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    // JPEG does not shrink further: stored.
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for image in images {
        let bytes = std::fs::read(out.join(IMAGES).join(&image.name)).map_err(failed)?;
        zip.start_file(image.name.as_str(), stored)
            .map_err(|e| failed(std::io::Error::other(e)))?;
        zip.write_all(&bytes).map_err(failed)?;
    }
    let mut written = zip.finish().map_err(|e| failed(std::io::Error::other(e)))?;
    written.flush().map_err(failed)?;
    written.get_ref().sync_all().map_err(failed)?;
    std::fs::rename(&staging, archive).map_err(failed)
}

/// The label `person` with a checkbox attribute per action, as CVAT writes a task's labels.
pub fn cvat_person_label(actions: &[&str]) -> String {
    let mut text = String::from(
        "      <labels>\n        <label>\n          <name>person</name>\n          <color>#fa3253</color>\n          <type>rectangle</type>\n          <attributes>\n",
    );
    for name in actions {
        let _ = write!(
            text,
            "            <attribute>\n              <name>{}</name>\n              <mutable>True</mutable>\n              <input_type>checkbox</input_type>\n              <default_value>false</default_value>\n              <values>false</values>\n            </attribute>\n",
            escape(name)
        );
    }
    text.push_str("          </attributes>\n        </label>\n      </labels>\n");
    text
}

/// A CVAT for images 1.1 task: every keyframe image, each detector box on it a `person` with
/// every action's checkbox clear.
fn cvat_task(
    actions: &[String],
    images: &[KeyframeImage],
    detected: &BTreeMap<(VideoId, u32), Vec<NormBox>>,
) -> String {
    let names: Vec<&str> = actions.iter().map(String::as_str).collect();
    let mut text = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<annotations>\n  <version>1.1</version>\n  <meta>\n    <task>\n      <name>keyframes</name>\n      <size>{}</size>\n      <mode>annotation</mode>\n{}    </task>\n  </meta>\n",
        images.len(),
        cvat_person_label(&names),
    );
    let unticked: String = names
        .iter()
        .map(|name| {
            format!(
                "      <attribute name=\"{}\">false</attribute>\n",
                escape(name)
            )
        })
        .collect();
    for (id, image) in images.iter().enumerate() {
        let (width, height) = image.size;
        let _ = writeln!(
            text,
            "  <image id=\"{id}\" name=\"{}\" width=\"{width}\" height=\"{height}\">",
            escape(&image.name)
        );
        for b in detected
            .get(&(image.video, image.second))
            .into_iter()
            .flatten()
        {
            let (w, h) = (f64::from(width), f64::from(height));
            let _ = write!(
                text,
                "    <box label=\"person\" source=\"auto\" occluded=\"0\" xtl=\"{:.2}\" ytl=\"{:.2}\" xbr=\"{:.2}\" ybr=\"{:.2}\" z_order=\"0\">\n{unticked}    </box>\n",
                f64::from(b.x1()) * w,
                f64::from(b.y1()) * h,
                f64::from(b.x2()) * w,
                f64::from(b.y2()) * h,
            );
        }
        text.push_str("  </image>\n");
    }
    text.push_str("</annotations>\n");
    text
}

/// A VIA 3 video annotator project: each video a view of its own file (VIA asks the user to
/// choose it), each detector box a rectangle in the upright video's pixels at the instant of the
/// frame its keyframe image shows (on the browser's timeline, where VIA shows regions), and one
/// checkbox attribute whose options are the actions.
fn via_project(
    options: &KeyframeOptions,
    videos: &BTreeMap<VideoId, KeyframedVideo>,
    images: &[KeyframeImage],
    detected: &BTreeMap<(VideoId, u32), Vec<NormBox>>,
) -> serde_json::Value {
    use serde_json::{Map, Value, json};
    let view_of: BTreeMap<VideoId, String> = videos
        .keys()
        .enumerate()
        .map(|(index, id)| (*id, (index + 1).to_string()))
        .collect();
    let mut files = Map::new();
    let mut views = Map::new();
    for (id, video) in videos {
        let view = &view_of[id];
        files.insert(
            view.clone(),
            json!({"fid": view, "fname": video.file.to_string(), "type": VIA_VIDEO, "loc": VIA_LOCAL, "src": ""}),
        );
        views.insert(view.clone(), json!({"fid_list": [view]}));
    }
    let mut metadata = Map::new();
    for image in images {
        let (Some(view), Some(video)) = (view_of.get(&image.video), videos.get(&image.video))
        else {
            continue;
        };
        let size = video.facts.size;
        let player_start = video.facts.player_start(options.via_browser);
        let (w, h) = (f64::from(size.width), f64::from(size.height));
        let hundredths = |value: f64| (value * 100.0).round() / 100.0;
        let pixels = |value: f32, side: f64| hundredths(f64::from(value) * side);
        let boxes = detected
            .get(&(image.video, image.second))
            .into_iter()
            .flatten();
        for (index, b) in boxes.enumerate() {
            let (x, y) = (pixels(b.x1(), w), pixels(b.y1(), h));
            let width = hundredths(pixels(b.x2(), w) - x);
            let height = hundredths(pixels(b.y2(), h) - y);
            metadata.insert(
                format!("{view}_{:06}_{index:03}", image.second),
                json!({
                    "vid": view,
                    "flg": 0,
                    "z": [region_instant(image, options.keyframe_interval, player_start)],
                    "xy": [VIA_RECTANGLE, x, y, width, height],
                    "av": {},
                }),
            );
        }
    }
    let action_options: Map<String, Value> = options
        .actions
        .iter()
        .enumerate()
        .map(|(index, action)| (index.to_string(), Value::from(action.as_str())))
        .collect();
    json!({
        "project": {
            "pid": "__VIA_PROJECT_ID__",
            "rev": "__VIA_PROJECT_REV_ID__",
            "rev_timestamp": "__VIA_PROJECT_REV_TIMESTAMP__",
            "pname": "keyframes",
            "creator": "avaprep keyframes",
            "created": 0,
            "data_format_version": "3.1.1",
            "vid_list": view_of.values().collect::<Vec<_>>(),
        },
        "config": {
            "file": {"loc_prefix": {"1": "", "2": "", "3": "", "4": ""}},
            "ui": {
                "file_content_align": "center",
                "file_metadata_editor_visible": true,
                "spatial_metadata_editor_visible": true,
                // No label drawn on the boxes: VIA draws a checkbox's label only with one
                // option ticked, and fails on the frame's other boxes with none or several.
                "spatial_region_label_attribute_id": "",
            },
        },
        "attribute": {
            VIA_ACTION_ATTRIBUTE: {
                "aname": "action",
                "anchor_id": "FILE1_Z1_XY1",
                "type": VIA_CHECKBOX,
                "desc": "what the person does (tick every action)",
                "options": action_options,
                "default_option_id": "",
            },
        },
        "file": files,
        "view": views,
        "metadata": metadata,
    })
}

/// When a keyframe's box is drawn in the video, on the browser's timeline (which puts the first
/// frame at `player_start`): at the frame its image shows, where VIA shows regions, unless that
/// frame is nearer another keyframe (a gap in the video), which import would then take it for;
/// there, at the keyframe's own second.
fn region_instant(image: &KeyframeImage, interval: u32, player_start: f64) -> f64 {
    let second = f64::from(image.second);
    let at = if (image.shown_at - second).abs() < f64::from(interval) / 2.0 {
        image.shown_at
    } else {
        second
    };
    ((player_start + at) * 1e5).round() / 1e5
}

/// VIA 3's codes (`_via_file.js`, `_via_attribute.js`, `_via_metadata.js`).
const VIA_VIDEO: u32 = 4;
/// A file on the user's disk, chosen in VIA when it opens the project.
const VIA_LOCAL: u32 = 1;
const VIA_CHECKBOX: u32 = 2;
const VIA_RECTANGLE: u32 = 2;
const VIA_ACTION_ATTRIBUTE: &str = "1";

#[cfg(test)]
mod tests {
    use super::{KeyframeImage, KeyframeOptions, MadeImages, region_instant};
    use crate::annotations::{VideoFileName, VideoId};

    /// A run again keeps a video's images only while the file, the settings, the images and
    /// the version are those recorded; any one changed, it makes them again.
    #[test]
    fn images_are_kept_only_while_what_made_them_holds() {
        let dir = tempfile::tempdir().unwrap();
        let options = KeyframeOptions {
            videos: dir.path().join("clips"),
            out: dir.path().join("tolabel"),
            actions: vec!["walk".into()],
            keyframe_interval: 1,
            height: 480,
            detections: None,
            via_browser: super::Browser::Chromium,
        };
        let id: VideoId = "cam".parse().unwrap();
        let file: VideoFileName = "cam.mp4".parse().unwrap();
        let video = options.videos.join("cam.mp4");
        let image = options.out.join("images/cam/000000.jpg");
        std::fs::create_dir_all(video.parent().unwrap()).unwrap();
        std::fs::create_dir_all(image.parent().unwrap()).unwrap();
        std::fs::write(&video, b"a video").unwrap();
        std::fs::write(&image, b"an image").unwrap();
        let images = vec![KeyframeImage {
            name: "cam/000000.jpg".into(),
            video: id,
            second: 0,
            size: (853, 480),
            shown_at: 0.033,
        }];
        let record = |options: &KeyframeOptions| {
            let made = MadeImages::now(options, id, &file, images.clone()).unwrap();
            let json = serde_json::to_vec(&made).unwrap();
            std::fs::create_dir_all(MadeImages::path(&options.out, id).parent().unwrap()).unwrap();
            std::fs::write(MadeImages::path(&options.out, id), json).unwrap();
        };
        let kept = |options: &KeyframeOptions| MadeImages::kept(options, id, &file);
        assert_eq!(kept(&options), None, "no record yet");
        record(&options);
        assert_eq!(kept(&options), Some(images.clone()));
        for other in [
            KeyframeOptions {
                height: 360,
                ..options.clone()
            },
            KeyframeOptions {
                keyframe_interval: 2,
                ..options.clone()
            },
        ] {
            assert_eq!(kept(&other), None, "{other:?}");
        }
        // The actions, detections and browser go into the task and project, not the images.
        let retitled = KeyframeOptions {
            actions: vec!["fall".into()],
            via_browser: super::Browser::Firefox,
            ..options.clone()
        };
        assert_eq!(kept(&retitled), Some(images.clone()));

        std::fs::write(&video, b"another video").unwrap();
        assert_eq!(kept(&options), None, "the video replaced");
        record(&options);
        std::fs::remove_file(&image).unwrap();
        assert_eq!(kept(&options), None, "an image deleted");
        std::fs::write(&image, b"an image").unwrap();
        record(&options);
        let path = MadeImages::path(&options.out, id);
        let text = std::fs::read_to_string(&path).unwrap();
        let version = format!("\"version\":\"{}\"", env!("CARGO_PKG_VERSION"));
        std::fs::write(&path, text.replace(&version, "\"version\":\"0.0.0\"")).unwrap();
        assert_eq!(kept(&options), None, "another version's record");
        std::fs::write(&path, b"{ damaged").unwrap();
        assert_eq!(kept(&options), None, "a damaged record");
    }

    #[test]
    fn a_region_is_drawn_at_its_frame_unless_that_frame_is_nearer_another_keyframe() {
        let image = |second: u32, shown_at: f64| KeyframeImage {
            name: String::new(),
            video: "clip".parse::<VideoId>().unwrap(),
            second,
            size: (0, 0),
            shown_at,
        };
        assert_eq!(region_instant(&image(3, 2.966_666_7), 1, 0.0), 2.96667);
        assert_eq!(region_instant(&image(3, 3.0), 1, 0.0), 3.0);
        // On the timeline of a browser that starts the file at 1.5 s.
        assert_eq!(region_instant(&image(3, 2.966_666_7), 1, 1.5), 4.46667);
        // The first frame 0.7 s in (a late stream): keyframe 0's image shows it, and import
        // would put a box at 0.7 on keyframe 1.
        assert_eq!(region_instant(&image(0, 0.7), 1, 0.0), 0.0);
        assert_eq!(region_instant(&image(0, 0.7), 2, 0.0), 0.7);
    }
}
