//! CVAT's XML exports, read into an [`Export`]: "CVAT for video 1.1" (tracks of boxes through a
//! video) and "CVAT for images 1.1" (boxes on keyframe images), bare or in CVAT's export zip.
//!
//! What CVAT writes, from its dumper and its export bindings (`cvat/apps/dataset_manager/
//! formats/cvat.py`, `bindings.py`) and its "XML annotation format" page:
//! - A video task's frames are numbered as frames of the video: the task's i-th frame is
//!   `start_frame + i × step` (`step` from `<frame_filter>step=N</frame_filter>`), so `<box
//!   frame>` already counts from the video's first frame, not from `start_frame`.
//! - A project export lists its tasks under `<meta><project><tasks>` (ordered by subset, then
//!   id) and names each track's task (`<track task_id>`); it numbers each task's frames on after
//!   those of the tasks before it in the same subset, each of which adds `start_frame + step ×
//!   size`. This reader takes that offset off again, so frames are the video's.
//! - Track ids count 0, 1, 2… in file order. Shapes drawn outside a track are written as
//!   two-shape tracks (the second `outside`), so every box of a video export is in a track;
//!   tracks list every frame from their first to their last keyframe.
//! - Images are named as uploaded; their boxes carry no track.
//!
//! A video enters the export only when it has a track: an export cannot tell a video where
//! nobody was boxed from one not annotated yet.

use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

use roxmltree::{Document, Node};

mod document;

use super::export::{ActionSource, Export, ExportError, ExportedVideo, Motion, Origin, Track};
use document::{ImageVideo, Task, VideoTasks, Xml};

/// Why `text` is no XML, and where. A file that ends before its root element closes is one cut
/// short (a copy or download that stopped), named at its last line: the parser, having no place
/// for it, says line 1.
fn not_xml(file: &Path, text: &str, error: &roxmltree::Error) -> ExportError {
    use roxmltree::Error::{UnclosedRootNode, UnexpectedEndOfStream};
    let (row, message) = match error {
        UnclosedRootNode | UnexpectedEndOfStream => (
            text.lines().count().max(1),
            format!(
                "the file ends here, before its root element closes ({error}): it was cut short; copy or export it again"
            ),
        ),
        _ => (
            error.pos().row as usize,
            format!("not XML ({error}); expected a CVAT XML export or a zip holding one"),
        ),
    };
    ExportError::Malformed {
        origin: Origin {
            file: file.to_path_buf(),
            place: format!("line {row}"),
        },
        message,
    }
}

/// Reads a CVAT export: an `.xml` file, or CVAT's export zip holding one (`annotations.xml`),
/// in either flavour ("CVAT for video 1.1" or "CVAT for images 1.1", told apart by whether it
/// has `<image>` elements). `actions` says where each box's actions are: the track's or box's
/// label, one `<attribute>`'s value, or every attribute whose value is `true`.
pub fn read_cvat(path: &Path, actions: &ActionSource) -> Result<Export, ExportError> {
    let (file, text) = load(path)?;
    let doc = Document::parse(&text).map_err(|error| not_xml(&file, &text, &error))?;
    let xml = Xml {
        doc: &doc,
        file: &file,
    };
    let root = doc.root_element();
    if !root.has_tag_name("annotations") {
        return Err(xml.error(
            root,
            "expected CVAT's <annotations> root element (CVAT for video 1.1 or CVAT for images \
             1.1)",
        ));
    }
    xml.check_attribute_named(root, actions)?;
    let videos = if elements(root).any(|node| node.has_tag_name("image")) {
        xml.images_export(root, actions)?
    } else {
        xml.video_export(root, actions)?
    };
    Ok(Export { videos })
}

/// The export's text, and the path its messages name: the file, or `export.zip/annotations.xml`
/// for the XML inside CVAT's zip.
fn load(path: &Path) -> Result<(PathBuf, String), ExportError> {
    let bytes = std::fs::read(path).map_err(|source| ExportError::Read {
        file: path.to_path_buf(),
        source,
    })?;
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return zip_member(path, bytes);
    }
    let text = utf8(path, bytes)?;
    Ok((path.to_path_buf(), text))
}

/// The one `.xml` file in CVAT's export zip (beside it, perhaps, `images/`).
fn zip_member(path: &Path, bytes: Vec<u8>) -> Result<(PathBuf, String), ExportError> {
    let zip_error = |message: String| ExportError::Malformed {
        origin: Origin {
            file: path.to_path_buf(),
            place: "the zip".to_string(),
        },
        message,
    };
    let corrupt = |error: zip::result::ZipError| zip_error(format!("not a readable zip ({error})"));
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).map_err(corrupt)?;
    let xml_names: Vec<String> = archive
        .file_names()
        .filter_map(Result::ok)
        .filter(|name| name.to_ascii_lowercase().ends_with(".xml"))
        .map(|name| name.into_owned())
        .collect();
    let name = match xml_names.as_slice() {
        [] => {
            return Err(zip_error(
                "holds no .xml file; expected CVAT's export zip with annotations.xml".to_string(),
            ));
        }
        [one] => one.clone(),
        several => several
            .iter()
            .find(|name| name.as_str() == "annotations.xml")
            .cloned()
            .ok_or_else(|| {
                zip_error(format!(
                    "holds several .xml files ({}); expected one, CVAT's annotations.xml",
                    several.join(", ")
                ))
            })?,
    };
    let mut member = archive.by_name(&name).map_err(corrupt)?;
    let mut member_bytes = Vec::new();
    member
        .read_to_end(&mut member_bytes)
        .map_err(|error| zip_error(format!("cannot read {name} from it ({error})")))?;
    let file = path.join(&name);
    let text = utf8(&file, member_bytes)?;
    Ok((file, text))
}

fn utf8(file: &Path, bytes: Vec<u8>) -> Result<String, ExportError> {
    String::from_utf8(bytes).map_err(|error| {
        let valid = &error.as_bytes()[..error.utf8_error().valid_up_to()];
        let line = 1 + valid.iter().filter(|&&byte| byte == b'\n').count();
        ExportError::Malformed {
            origin: Origin {
                file: file.to_path_buf(),
                place: format!("line {line}"),
            },
            message: "not UTF-8 text; expected CVAT's XML export (UTF-8)".to_string(),
        }
    })
}

/// CVAT writes `<source>` and `<original_size>` only for tasks made from a video.
fn video_task_ids(root: Node) -> VideoTasks {
    let Some(meta) = child(root, "meta") else {
        return Vec::new();
    };
    let has_video =
        |node: Node| child(node, "source").is_some() || child(node, "original_size").is_some();
    let tasks: Vec<Node> = match child(meta, "project").and_then(|project| child(project, "tasks"))
    {
        Some(tasks) => elements(tasks)
            .filter(|node| node.has_tag_name("task"))
            .collect(),
        None => child(meta, "task")
            .or_else(|| child(meta, "job"))
            .into_iter()
            .collect(),
    };
    let single = tasks.len() == 1;
    tasks
        .into_iter()
        .map(|task| {
            let id = child_text(task, "id").map(str::to_string);
            (id, has_video(task) || (single && has_video(meta)))
        })
        .collect()
}

fn task_video(task: Task) -> Result<ExportedVideo, ExportError> {
    let name = task.video.ok_or_else(|| ExportError::Malformed {
        origin: task.origin.clone(),
        message: "names no video; expected <source> (the video file) or the task's <name> (a \
                  job export has neither: export the task)"
            .to_string(),
    })?;
    Ok(ExportedVideo {
        name,
        origin: task.origin,
        frame_size: task.frame_size,
        last_frame: task.stop_frame,
        // CVAT's frame numbers are already the video's own (`start_frame + i × step`, see the
        // module's notes): they count from the video's frame 0, not from the task's
        // `start_frame`, which the numbers include.
        tracks: task.tracks,
    })
}

fn image_video(video: ImageVideo) -> ExportedVideo {
    let tracks = video
        .people
        .into_iter()
        .map(|(person, (origin, mut shapes))| {
            shapes.sort_by(|a, b| a.0.total_cmp(&b.0));
            Track {
                person,
                motion: Motion::Instant,
                shapes: shapes.into_iter().map(|(_, shape)| shape).collect(),
                origin,
            }
        })
        .collect();
    ExportedVideo {
        name: video.name,
        origin: video.origin,
        frame_size: Some(video.frame_size),
        last_frame: None,
        tracks,
    }
}

/// The actions of one box: its track's or its own label, one attribute's value (none when
/// empty), or the names of its attributes whose value is `true` (CVAT's ticked checkboxes).
fn box_actions(actions: &ActionSource, label: &str, attributes: &[(&str, &str)]) -> Vec<String> {
    match actions {
        ActionSource::Label => vec![label.to_string()],
        ActionSource::Attribute(wanted) => attributes
            .iter()
            .filter(|(name, value)| name == wanted && !value.is_empty())
            .map(|(_, value)| value.to_string())
            .collect(),
        ActionSource::Checkboxes => attributes
            .iter()
            .filter(|(_, value)| value.eq_ignore_ascii_case("true"))
            .map(|(name, _)| name.to_string())
            .collect(),
    }
}

/// A box's `person` attribute when it is a positive whole number.
fn person_attribute(attributes: &[(&str, &str)]) -> Option<u32> {
    attributes
        .iter()
        .find(|(name, _)| *name == "person")
        .and_then(|(_, value)| value.parse::<u32>().ok())
        .filter(|&person| person > 0)
}

/// The video and the second an image's name says: `clip25/000012.jpg` (the folder, the stem's
/// trailing digits) or `clip25_000012.jpg` (the stem up to its last `_`, and digits after it).
fn image_instant(name: &str) -> Option<(String, u64)> {
    let (folder, file) = match name.rsplit_once('/') {
        Some((folder, file)) => (Some(folder).filter(|folder| !folder.is_empty()), file),
        None => (None, name),
    };
    let stem = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
    let (video, digits) = match folder {
        Some(folder) => {
            let digits_from = stem.trim_end_matches(|c: char| c.is_ascii_digit()).len();
            (folder, &stem[digits_from..])
        }
        None => stem.rsplit_once('_')?,
    };
    let all_digits = !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit());
    if video.is_empty() || !all_digits {
        return None;
    }
    Some((video.to_string(), digits.parse().ok()?))
}

/// The frame step a task's `<frame_filter>` sets (`step=5`), 1 when it sets none.
fn frame_step(filter: &str) -> u64 {
    filter
        .split_once("step")
        .and_then(|(_, rest)| rest.trim_start().strip_prefix('='))
        .map(|rest| {
            let rest = rest.trim_start();
            &rest[..rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len()]
        })
        .and_then(|digits| digits.parse().ok())
        .filter(|&step| step > 0)
        .unwrap_or(1)
}

/// `<track id="3">`: the element, and the first of its identifying attributes.
fn describe(node: Node) -> String {
    let name = node.tag_name().name();
    ["id", "name", "frame", "label"]
        .into_iter()
        .find_map(|key| {
            node.attribute(key)
                .map(|value| format!("<{name} {key}=\"{value}\">"))
        })
        .unwrap_or_else(|| format!("<{name}>"))
}

fn elements<'a, 'input>(node: Node<'a, 'input>) -> impl Iterator<Item = Node<'a, 'input>> {
    node.children().filter(Node::is_element)
}

fn child<'a, 'input>(node: Node<'a, 'input>, name: &str) -> Option<Node<'a, 'input>> {
    elements(node).find(|child| child.has_tag_name(name))
}

/// A child element's text, trimmed; `None` when absent or empty.
fn child_text<'a>(node: Node<'a, '_>, name: &str) -> Option<&'a str> {
    child(node, name)
        .and_then(|child| child.text())
        .map(str::trim)
        .filter(|text| !text.is_empty())
}

#[cfg(test)]
mod tests;
