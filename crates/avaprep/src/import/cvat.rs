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

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

use roxmltree::{Document, Node};

use super::export::{
    ActionSource, At, Export, ExportError, ExportedVideo, FrameSize, Motion, Origin, Rect, Shape,
    Track,
};

/// Reads a CVAT export: an `.xml` file, or CVAT's export zip holding one (`annotations.xml`),
/// in either flavour ("CVAT for video 1.1" or "CVAT for images 1.1", told apart by whether it
/// has `<image>` elements). `actions` says where each box's actions are: the track's or box's
/// label, one `<attribute>`'s value, or every attribute whose value is `true`.
pub fn read_cvat(path: &Path, actions: &ActionSource) -> Result<Export, ExportError> {
    let (file, text) = load(path)?;
    let doc = Document::parse(&text).map_err(|error| ExportError::Malformed {
        origin: Origin {
            file: file.clone(),
            place: format!("line {}", error.pos().row),
        },
        message: format!("not XML ({error}); expected a CVAT XML export or a zip holding one"),
    })?;
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

/// The parsed document and the path its messages name.
struct Xml<'a, 'input> {
    doc: &'a Document<'input>,
    file: &'a Path,
}

/// One task of the export's `<meta>`: the video it names and how its frames are numbered.
struct Task {
    id: Option<String>,
    /// `<source>` (the video file) or else the task's `<name>`.
    video: Option<String>,
    frame_size: Option<FrameSize>,
    start_frame: u64,
    /// What a project export adds to this task's frame numbers (0 elsewhere).
    offset: u64,
    origin: Origin,
    tracks: Vec<Track>,
}

/// The images of one video in a "CVAT for images" export, as read so far.
struct ImageVideo {
    name: String,
    origin: Origin,
    frame_size: FrameSize,
    /// By person: where the person first appears, and their boxes with the second of each.
    people: BTreeMap<u32, (Origin, Vec<(f64, Shape)>)>,
}

const SHAPE_ELEMENTS: [&str; 9] = [
    "box", "polygon", "polyline", "points", "cuboid", "ellipse", "mask", "skeleton", "tag",
];

impl<'a, 'input> Xml<'a, 'input> {
    fn origin(&self, node: Node) -> Origin {
        let line = self.doc.text_pos_at(node.range().start).row;
        Origin {
            file: self.file.to_path_buf(),
            place: format!("line {line}, {}", describe(node)),
        }
    }

    fn error(&self, node: Node, message: impl Into<String>) -> ExportError {
        ExportError::Malformed {
            origin: self.origin(node),
            message: message.into(),
        }
    }

    /// An attribute that must be there.
    fn required(
        &self,
        node: Node<'a, 'input>,
        key: &str,
        expected: &str,
    ) -> Result<&'a str, ExportError> {
        node.attribute(key)
            .ok_or_else(|| self.error(node, format!("{key} is missing; expected {expected}")))
    }

    fn whole_number<T: std::str::FromStr>(
        &self,
        node: Node<'a, 'input>,
        key: &str,
    ) -> Result<T, ExportError> {
        let text = self.required(node, key, "a whole number")?;
        text.trim()
            .parse()
            .map_err(|_| self.error(node, format!("{key}=\"{text}\" is not a whole number")))
    }

    fn coordinate(&self, node: Node<'a, 'input>, key: &str) -> Result<f64, ExportError> {
        let text = self.required(node, key, "a number (pixels)")?;
        text.trim()
            .parse::<f64>()
            .ok()
            .filter(|value| value.is_finite())
            .ok_or_else(|| {
                self.error(
                    node,
                    format!("{key}=\"{text}\" is not a number; expected pixels"),
                )
            })
    }

    /// CVAT's `0`/`1` flags (`outside`); absent means 0, as CVAT's own loader reads it.
    fn flag(&self, node: Node<'a, 'input>, key: &str) -> Result<bool, ExportError> {
        match node.attribute(key).map(str::trim) {
            None | Some("0") | Some("false") => Ok(false),
            Some("1") | Some("true") => Ok(true),
            Some(other) => Err(self.error(
                node,
                format!("{key}=\"{other}\" is not a flag; expected 0 or 1"),
            )),
        }
    }

    /// A number written as an element's text in `<meta>` (`<start_frame>30</start_frame>`).
    fn meta_number(&self, node: Node<'a, 'input>, name: &str) -> Result<Option<u64>, ExportError> {
        let Some(element) = child(node, name) else {
            return Ok(None);
        };
        let text = element.text().unwrap_or("").trim();
        if text.is_empty() {
            return Ok(None);
        }
        text.parse()
            .map(Some)
            .map_err(|_| self.error(element, format!("\"{text}\" is not a whole number")))
    }

    /// An `ActionSource::Attribute` must name an attribute the export has (on a box, or among
    /// its labels' definitions): a misspelt name would otherwise read as boxes without actions.
    fn check_attribute_named(
        &self,
        root: Node<'a, 'input>,
        actions: &ActionSource,
    ) -> Result<(), ExportError> {
        let ActionSource::Attribute(wanted) = actions else {
            return Ok(());
        };
        let names: BTreeSet<&str> = root
            .descendants()
            .filter(|node| node.has_tag_name("attribute"))
            .filter_map(|node| node.attribute("name").or_else(|| child_text(node, "name")))
            .collect();
        if names.contains(wanted.as_str()) {
            return Ok(());
        }
        let known = if names.is_empty() {
            "it has none".to_string()
        } else {
            format!(
                "it has {}",
                names.into_iter().collect::<Vec<_>>().join(", ")
            )
        };
        Err(self.error(
            root,
            format!(
                "no attribute is named \"{wanted}\" ({known}); expected the attribute that \
                 names the action"
            ),
        ))
    }

    /// `Rect::Pixels` from a `<box>`'s corners, as written.
    fn rect(&self, node: Node<'a, 'input>) -> Result<Rect, ExportError> {
        let xtl = self.coordinate(node, "xtl")?;
        let ytl = self.coordinate(node, "ytl")?;
        let xbr = self.coordinate(node, "xbr")?;
        let ybr = self.coordinate(node, "ybr")?;
        if xbr < xtl || ybr < ytl {
            return Err(self.error(
                node,
                format!(
                    "corners ({xtl}, {ytl}) to ({xbr}, {ybr}) are swapped; expected xtl ≤ xbr \
                     and ytl ≤ ybr"
                ),
            ));
        }
        if let Some(rotation) = node.attribute("rotation") {
            let turned = rotation.trim().parse::<f64>() != Ok(0.0);
            if turned {
                return Err(self.error(
                    node,
                    format!(
                        "rotation=\"{rotation}\": only upright boxes are read (AVA's boxes are)"
                    ),
                ));
            }
        }
        Ok(Rect::Pixels([xtl, ytl, xbr, ybr]))
    }

    /// A shape's `<attribute name="...">value</attribute>` children, values trimmed.
    fn attributes(&self, node: Node<'a, 'input>) -> Result<Vec<(&'a str, &'a str)>, ExportError> {
        elements(node)
            .filter(|child| child.has_tag_name("attribute"))
            .map(|child| {
                let name = self.required(child, "name", "the attribute's name")?;
                Ok((name, child.text().unwrap_or("").trim()))
            })
            .collect()
    }

    // ---- CVAT for video 1.1 ----

    fn video_export(
        &self,
        root: Node<'a, 'input>,
        actions: &ActionSource,
    ) -> Result<Vec<ExportedVideo>, ExportError> {
        let mut tasks = self.tasks(root)?;
        for node in elements(root) {
            if node.has_tag_name("track") {
                let index = self.task_of(node, &tasks)?;
                let track = self.video_track(node, &tasks[index], actions)?;
                if tasks[index]
                    .tracks
                    .iter()
                    .any(|other| other.person == track.person)
                {
                    return Err(self.error(
                        node,
                        "a second track with this id in its video; expected one track per id",
                    ));
                }
                tasks[index].tracks.push(track);
            } else if SHAPE_ELEMENTS.contains(&node.tag_name().name()) {
                return Err(self.error(
                    node,
                    "a shape outside any <track>; expected CVAT for video 1.1, which puts every \
                     shape in a <track>, or CVAT for images 1.1, which puts them in <image>s",
                ));
            }
        }
        tasks
            .into_iter()
            .filter(|task| !task.tracks.is_empty())
            .map(task_video)
            .collect()
    }

    /// The tasks `<meta>` describes: one for a task or job export, several for a project.
    fn tasks(&self, root: Node<'a, 'input>) -> Result<Vec<Task>, ExportError> {
        let meta = child(root, "meta").ok_or_else(|| {
            self.error(
                root,
                "no <meta>; expected CVAT's <meta> naming the task and its video",
            )
        })?;
        if let Some(project) = child(meta, "project") {
            return self.project_tasks(project);
        }
        let node = child(meta, "task")
            .or_else(|| child(meta, "job"))
            .ok_or_else(|| {
                self.error(
                    meta,
                    "names no <task>, <job> or <project>; expected one of them",
                )
            })?;
        Ok(vec![self.task(node, Some(meta))?])
    }

    /// A project's tasks, each with the offset CVAT adds to its frame numbers.
    fn project_tasks(&self, project: Node<'a, 'input>) -> Result<Vec<Task>, ExportError> {
        let nodes: Vec<Node> = child(project, "tasks")
            .map(|tasks| {
                elements(tasks)
                    .filter(|node| node.has_tag_name("task"))
                    .collect()
            })
            .unwrap_or_default();
        if nodes.is_empty() {
            return Err(self.error(project, "lists no <tasks>; expected the project's tasks"));
        }
        let mut tasks = Vec::with_capacity(nodes.len());
        let mut subset = None;
        let mut offset = 0u64;
        for node in nodes {
            let mut task = self.task(node, None)?;
            let task_subset = child_text(node, "subset").unwrap_or("");
            if subset != Some(task_subset) {
                subset = Some(task_subset);
                offset = 0;
            }
            task.offset = offset;
            offset = self.next_offset(node, &task, offset)?;
            tasks.push(task);
        }
        Ok(tasks)
    }

    /// The offset of the task after `node` in its subset: this one's plus its frame range.
    fn next_offset(
        &self,
        node: Node<'a, 'input>,
        task: &Task,
        offset: u64,
    ) -> Result<u64, ExportError> {
        let size = self.meta_number(node, "size")?.ok_or_else(|| {
            self.error(
                node,
                "no <size>; a project export needs each task's size to number its frames",
            )
        })?;
        let step = frame_step(child_text(node, "frame_filter").unwrap_or(""));
        step.checked_mul(size)
            .and_then(|frames| frames.checked_add(task.start_frame))
            .and_then(|range| range.checked_add(offset))
            .ok_or_else(|| self.error(node, "frame numbers past 2^64; expected a real task"))
    }

    /// One `<task>` (or `<job>`), with `meta`'s own `<source>` and `<original_size>` as
    /// fallbacks: older exports and job exports write them there.
    fn task(
        &self,
        node: Node<'a, 'input>,
        meta: Option<Node<'a, 'input>>,
    ) -> Result<Task, ExportError> {
        let source =
            child_text(node, "source").or_else(|| meta.and_then(|meta| child_text(meta, "source")));
        let size = child(node, "original_size")
            .or_else(|| meta.and_then(|meta| child(meta, "original_size")));
        Ok(Task {
            id: child_text(node, "id").map(str::to_string),
            video: source
                .or_else(|| child_text(node, "name"))
                .map(str::to_string),
            frame_size: size.map(|size| self.frame_size(size)).transpose()?,
            start_frame: self.meta_number(node, "start_frame")?.unwrap_or(0),
            offset: 0,
            origin: self.origin(node),
            tracks: Vec::new(),
        })
    }

    fn frame_size(&self, node: Node<'a, 'input>) -> Result<FrameSize, ExportError> {
        let dimension = |name: &str| -> Result<u32, ExportError> {
            let value = self.meta_number(node, name)?.unwrap_or(0);
            u32::try_from(value)
                .ok()
                .filter(|&value| value > 0)
                .ok_or_else(|| {
                    self.error(
                        node,
                        format!("<{name}> is {value}; expected the frame's {name} in pixels"),
                    )
                })
        };
        Ok(FrameSize {
            width: dimension("width")?,
            height: dimension("height")?,
        })
    }

    /// Which task a track belongs to: the only one, or the one its `task_id` names.
    fn task_of(&self, track: Node<'a, 'input>, tasks: &[Task]) -> Result<usize, ExportError> {
        if let [_] = tasks {
            return Ok(0);
        }
        let id = track.attribute("task_id").ok_or_else(|| {
            self.error(
                track,
                "no task_id; expected one naming the track's task, as a project export writes",
            )
        })?;
        tasks
            .iter()
            .position(|task| task.id.as_deref() == Some(id))
            .ok_or_else(|| {
                self.error(
                    track,
                    format!("task_id=\"{id}\" names no task of the project's <meta>"),
                )
            })
    }

    fn video_track(
        &self,
        node: Node<'a, 'input>,
        task: &Task,
        actions: &ActionSource,
    ) -> Result<Track, ExportError> {
        let id: u32 = self.whole_number(node, "id")?;
        let label = self.required(node, "label", "the track's label")?;
        let mut shapes = Vec::new();
        for shape in elements(node) {
            if !shape.has_tag_name("box") {
                return Err(self.error(
                    node,
                    format!(
                        "a track of <{}> shapes: only boxes are read; expected rectangle \
                         tracks (<box>)",
                        shape.tag_name().name()
                    ),
                ));
            }
            shapes.push(self.track_box(shape, task, label, actions)?);
        }
        Ok(Track {
            // CVAT counts track ids from 0; AVA's person ids start at 1.
            person: id
                .checked_add(1)
                .ok_or_else(|| self.error(node, "id too large"))?,
            motion: Motion::Interpolated,
            shapes: self.by_frame(node, shapes)?,
            origin: self.origin(node),
        })
    }

    fn track_box(
        &self,
        node: Node<'a, 'input>,
        task: &Task,
        label: &str,
        actions: &ActionSource,
    ) -> Result<(u64, Shape), ExportError> {
        let written: u64 = self.whole_number(node, "frame")?;
        let frame = written.checked_sub(task.offset).ok_or_else(|| {
            self.error(
                node,
                format!(
                    "frame {written} is before this task's frames, which the project export \
                     numbers from {}",
                    task.offset
                ),
            )
        })?;
        let shape = Shape {
            at: At::Frame(frame),
            rect: self.rect(node)?,
            outside: self.flag(node, "outside")?,
            actions: box_actions(actions, label, &self.attributes(node)?),
        };
        Ok((frame, shape))
    }

    /// A track's shapes in frame order. Repeats of one shape are dropped (CVAT has written a
    /// track's closing `outside` shape twice); two different shapes at one frame are an error.
    fn by_frame(
        &self,
        track: Node<'a, 'input>,
        mut shapes: Vec<(u64, Shape)>,
    ) -> Result<Vec<Shape>, ExportError> {
        if shapes.is_empty() {
            return Err(self.error(track, "no <box>; expected at least one"));
        }
        shapes.sort_by_key(|(frame, _)| *frame);
        shapes.dedup();
        if let Some(pair) = shapes.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(self.error(
                track,
                format!(
                    "two different boxes at frame {}; expected one per frame",
                    pair[0].0
                ),
            ));
        }
        Ok(shapes.into_iter().map(|(_, shape)| shape).collect())
    }

    // ---- CVAT for images 1.1 ----

    fn images_export(
        &self,
        root: Node<'a, 'input>,
        actions: &ActionSource,
    ) -> Result<Vec<ExportedVideo>, ExportError> {
        let video_tasks = video_task_ids(root);
        let mut videos: Vec<ImageVideo> = Vec::new();
        for node in elements(root) {
            if node.has_tag_name("track") {
                return Err(self.error(
                    node,
                    "a <track> beside <image>s; expected CVAT for images 1.1 (only <image>s) \
                     or CVAT for video 1.1 (only <track>s)",
                ));
            }
            if node.has_tag_name("image") {
                self.reject_video_frame(node, &video_tasks)?;
                self.read_image(node, actions, &mut videos)?;
            }
        }
        Ok(videos
            .into_iter()
            .filter(|video| !video.people.is_empty())
            .map(image_video)
            .collect())
    }

    /// A video task exported "for images" names its frames `frame_000123`: those are frames of
    /// the video, not keyframe images named by the second, and CVAT for video reads them right.
    fn reject_video_frame(
        &self,
        image: Node<'a, 'input>,
        video_tasks: &VideoTasks,
    ) -> Result<(), ExportError> {
        let is_video = match video_tasks.as_slice() {
            [(_, is_video)] => *is_video,
            several => image.attribute("task_id").is_some_and(|id| {
                several
                    .iter()
                    .any(|(task, is_video)| *is_video && task.as_deref() == Some(id))
            }),
        };
        if is_video {
            return Err(self.error(
                image,
                "a frame of a video task (its <meta> has the video's <source> or \
                 <original_size>); export the task as \"CVAT for video 1.1\"",
            ));
        }
        Ok(())
    }

    fn read_image(
        &self,
        image: Node<'a, 'input>,
        actions: &ActionSource,
        videos: &mut Vec<ImageVideo>,
    ) -> Result<(), ExportError> {
        let name = self.required(image, "name", "the image's file name")?;
        let (video_name, second) = image_instant(name).ok_or_else(|| {
            self.error(
                image,
                "the name does not say the video and the second; expected <video>/<digits>.<ext> \
                 or <video>_<digits>.<ext> (e.g. clip25/000012.jpg or clip25_000012.jpg: \
                 second 12 of clip25)",
            )
        })?;
        let frame_size = FrameSize {
            width: self.whole_number(image, "width")?,
            height: self.whole_number(image, "height")?,
        };
        let index = match videos.iter().position(|video| video.name == video_name) {
            Some(index) => index,
            None => {
                videos.push(ImageVideo {
                    name: video_name,
                    origin: self.origin(image),
                    frame_size,
                    people: BTreeMap::new(),
                });
                videos.len() - 1
            }
        };
        let video = &mut videos[index];
        if video.frame_size != frame_size {
            return Err(self.error(
                image,
                format!(
                    "is {}×{} but {} of the same video is {}×{}; expected one frame size per \
                     video",
                    frame_size.width,
                    frame_size.height,
                    video.origin.place,
                    video.frame_size.width,
                    video.frame_size.height
                ),
            ));
        }
        self.image_boxes(image, second, actions, video)
    }

    fn image_boxes(
        &self,
        image: Node<'a, 'input>,
        second: u64,
        actions: &ActionSource,
        video: &mut ImageVideo,
    ) -> Result<(), ExportError> {
        let mut index = 0u32;
        for node in elements(image) {
            match node.tag_name().name() {
                // Tags label the whole image, not a person.
                "tag" => continue,
                "box" => index += 1,
                other => {
                    return Err(self.error(
                        node,
                        format!("a <{other}>: only boxes are read; expected <box>"),
                    ));
                }
            }
            let label = self.required(node, "label", "the box's label")?;
            let attributes = self.attributes(node)?;
            let person = person_attribute(&attributes).unwrap_or(index);
            let shape = Shape {
                at: At::Seconds(second as f64),
                rect: self.rect(node)?,
                outside: false,
                actions: box_actions(actions, label, &attributes),
            };
            let (_, shapes) = video
                .people
                .entry(person)
                .or_insert_with(|| (self.origin(node), Vec::new()));
            if shapes.iter().any(|(at, _)| *at == second as f64) {
                return Err(self.error(
                    node,
                    format!(
                        "a second box of person {person} at second {second} of {}; expected one \
                         box per person per instant (the person is the box's person attribute, \
                         else its place among the image's boxes)",
                        video.name
                    ),
                ));
            }
            shapes.push((second as f64, shape));
        }
        Ok(())
    }
}

/// Tasks by id, and whether each is made from a video.
type VideoTasks = Vec<(Option<String>, bool)>;

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
mod tests {
    use super::*;
    use crate::import::testdata;
    use std::io::Write;

    fn read_bytes(bytes: &[u8], actions: &ActionSource) -> Result<Export, ExportError> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), bytes).unwrap();
        read_cvat(file.path(), actions)
    }

    fn error_of(xml: &str) -> String {
        read_bytes(xml.as_bytes(), &ActionSource::Label)
            .unwrap_err()
            .to_string()
    }

    fn frames(track: &Track) -> Vec<At> {
        track.shapes.iter().map(|shape| shape.at).collect()
    }

    fn actions_of(track: &Track) -> Vec<Vec<String>> {
        track
            .shapes
            .iter()
            .map(|shape| shape.actions.clone())
            .collect()
    }

    fn strings(lists: &[&[&str]]) -> Vec<Vec<String>> {
        lists
            .iter()
            .map(|list| list.iter().map(|item| item.to_string()).collect())
            .collect()
    }

    fn zip_of(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default();
        for (name, bytes) in members {
            zip.start_file(*name, options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    #[test]
    fn a_video_track_is_interpolated_with_outside_and_actions_from_label_attribute_or_checkboxes() {
        let path = testdata("cvat_video.xml");
        let export = read_cvat(&path, &ActionSource::Label).unwrap();
        let [video] = export.videos.as_slice() else {
            panic!("one video: {:?}", export.videos);
        };
        assert_eq!(video.name, "clip25.mp4");
        assert_eq!(
            video.frame_size,
            Some(FrameSize {
                width: 1280,
                height: 720
            })
        );
        // start_frame is 30, and the boxes' frames (30 to 35) already count from frame 0.
        assert_eq!(video.origin.place, "line 5, <task>");
        let [walker, second] = video.tracks.as_slice() else {
            panic!("two tracks: {:?}", video.tracks);
        };

        // Track ids 0 and 1 are persons 1 and 2; frames are as CVAT wrote them.
        assert_eq!(walker.person, 1);
        assert_eq!(walker.motion, Motion::Interpolated);
        assert_eq!(walker.origin.place, "line 71, <track id=\"0\">");
        assert_eq!(frames(walker), [30, 31, 32, 33].map(At::Frame));
        assert_eq!(
            walker.shapes[0].rect,
            Rect::Pixels([100.0, 50.0, 200.0, 300.0])
        );
        assert_eq!(
            walker.shapes[1].rect,
            Rect::Pixels([110.0, 50.0, 210.0, 300.0])
        );
        let outside: Vec<bool> = walker.shapes.iter().map(|shape| shape.outside).collect();
        assert_eq!(outside, [false, false, false, true]);
        assert_eq!(actions_of(walker), strings(&[&["person"] as &[&str]; 4]));
        assert_eq!(second.person, 2);
        assert_eq!(frames(second), [34, 35].map(At::Frame));
        // Corners as written: clipping to the frame happens later.
        assert_eq!(
            second.shapes[0].rect,
            Rect::Pixels([-4.5, 10.25, 640.0, 719.99])
        );

        let by_attribute = read_cvat(&path, &ActionSource::Attribute("action".into())).unwrap();
        let tracks = &by_attribute.videos[0].tracks;
        assert_eq!(
            actions_of(&tracks[0]),
            strings(&[&["walk"], &["walk"], &["sit"], &["sit"]])
        );
        // An empty value is no action.
        assert_eq!(actions_of(&tracks[1]), strings(&[&[], &["stand"]]));

        let by_checkbox = read_cvat(&path, &ActionSource::Checkboxes).unwrap();
        let tracks = &by_checkbox.videos[0].tracks;
        assert_eq!(
            actions_of(&tracks[0]),
            strings(&[&["talk"], &["talk"], &["talk", "wave"], &[]])
        );
        assert_eq!(actions_of(&tracks[1]), strings(&[&[], &[]]));
    }

    #[test]
    fn a_zipped_export_is_read_from_its_xml_member() {
        let xml = std::fs::read(testdata("cvat_video.xml")).unwrap();
        let zip = zip_of(&[
            ("images/frame_000030.PNG", b"\x89PNG"),
            ("annotations.xml", &xml),
        ]);
        let file = tempfile::Builder::new().suffix(".zip").tempfile().unwrap();
        std::fs::write(file.path(), &zip).unwrap();
        let zipped = read_cvat(file.path(), &ActionSource::Label).unwrap();
        let bare = read_cvat(&testdata("cvat_video.xml"), &ActionSource::Label).unwrap();

        let video = &zipped.videos[0];
        assert_eq!(video.origin.file, file.path().join("annotations.xml"));
        assert_eq!(video.name, bare.videos[0].name);
        let shapes = |export: &Export| -> Vec<Vec<Shape>> {
            export.videos[0]
                .tracks
                .iter()
                .map(|track| track.shapes.clone())
                .collect()
        };
        assert_eq!(shapes(&zipped), shapes(&bare));
    }

    #[test]
    fn a_zip_without_one_xml_file_is_an_error() {
        let none = zip_of(&[("images/frame_000000.PNG", b"\x89PNG")]);
        let message = read_bytes(&none, &ActionSource::Label)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(": the zip: holds no .xml file"),
            "{message}"
        );

        let two = zip_of(&[("a.xml", b"<annotations/>"), ("b.xml", b"<annotations/>")]);
        let message = read_bytes(&two, &ActionSource::Label)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("several .xml files (a.xml, b.xml)"),
            "{message}"
        );
    }

    #[test]
    fn a_project_export_groups_tracks_by_task_and_takes_off_the_frame_offsets() {
        let export = read_cvat(&testdata("cvat_project_video.xml"), &ActionSource::Label).unwrap();
        let names: Vec<&str> = export
            .videos
            .iter()
            .map(|video| video.name.as_str())
            .collect();
        assert_eq!(names, ["clip31.mp4", "clip25.mp4", "kitchen.mp4"]);
        let [clip31, clip25, kitchen] = export.videos.as_slice() else {
            unreachable!()
        };
        // The first task of each subset is numbered from 0.
        assert_eq!(frames(&clip31.tracks[0]), [5, 6].map(At::Frame));
        assert_eq!(frames(&clip25.tracks[0]), [40].map(At::Frame));
        // After clip25's 100 frames in subset "default": 110 is kitchen's frame 10.
        assert_eq!(frames(&kitchen.tracks[0]), [10, 12, 14].map(At::Frame));
        assert_eq!(
            kitchen.frame_size,
            Some(FrameSize {
                width: 1920,
                height: 1080
            })
        );
        assert_eq!(kitchen.tracks[0].person, 3);
        assert_eq!(
            actions_of(&kitchen.tracks[0]),
            strings(&[&["cook"] as &[&str]; 3])
        );
    }

    #[test]
    fn a_tracks_shapes_are_sorted_by_frame_and_a_repeated_shape_counts_once() {
        let xml = "<annotations>\n<meta><task><name>clip</name></task></meta>\n\
            <track id=\"4\" label=\"run\">\n\
            <box frame=\"9\" outside=\"1\" xtl=\"1\" ytl=\"2\" xbr=\"3\" ybr=\"4\"/>\n\
            <box frame=\"2\" outside=\"0\" xtl=\"1\" ytl=\"2\" xbr=\"3\" ybr=\"4\"/>\n\
            <box frame=\"9\" outside=\"1\" xtl=\"1\" ytl=\"2\" xbr=\"3\" ybr=\"4\"/>\n\
            </track>\n</annotations>\n";
        let export = read_bytes(xml.as_bytes(), &ActionSource::Label).unwrap();
        let video = &export.videos[0];
        // No <source>: the task's name names the video.
        assert_eq!(video.name, "clip");
        assert_eq!(video.tracks[0].person, 5);
        assert_eq!(frames(&video.tracks[0]), [2, 9].map(At::Frame));

        let clash = xml.replacen("outside=\"1\" xtl=\"1\"", "outside=\"0\" xtl=\"1\"", 1);
        let message = error_of(&clash);
        assert!(
            message.contains("line 3, <track id=\"4\">: two different boxes at frame 9"),
            "{message}"
        );
    }

    #[test]
    fn images_of_two_videos_become_instant_tracks_by_person() {
        let export = read_cvat(&testdata("cvat_images.xml"), &ActionSource::Label).unwrap();
        let [clip25, clip31] = export.videos.as_slice() else {
            panic!("two videos: {:?}", export.videos);
        };
        assert_eq!(clip25.name, "clip25");
        assert_eq!(
            clip25.frame_size,
            Some(FrameSize {
                width: 1280,
                height: 720
            })
        );
        // Person 2 is the second box of its image (its person attribute is empty); person 4 is
        // named by the attribute, on two images.
        let people: Vec<u32> = clip25.tracks.iter().map(|track| track.person).collect();
        assert_eq!(people, [2, 4]);
        assert!(
            clip25
                .tracks
                .iter()
                .all(|track| track.motion == Motion::Instant)
        );
        assert_eq!(frames(&clip25.tracks[0]), [At::Seconds(12.0)]);
        assert_eq!(
            frames(&clip25.tracks[1]),
            [At::Seconds(12.0), At::Seconds(13.0)]
        );
        assert_eq!(
            actions_of(&clip25.tracks[1]),
            strings(&[&["talk"], &["walk"]])
        );
        assert_eq!(
            clip25.tracks[0].shapes[0].rect,
            Rect::Pixels([700.0, 80.0, 820.0, 400.0])
        );

        assert_eq!(clip31.name, "clip31");
        assert_eq!(
            clip31.frame_size,
            Some(FrameSize {
                width: 640,
                height: 360
            })
        );
        assert_eq!(clip31.tracks.len(), 1);
        assert_eq!(clip31.tracks[0].person, 1);
        assert_eq!(frames(&clip31.tracks[0]), [At::Seconds(2.0)]);

        let by_person = read_cvat(
            &testdata("cvat_images.xml"),
            &ActionSource::Attribute("person".into()),
        )
        .unwrap();
        assert_eq!(
            actions_of(&by_person.videos[0].tracks[1]),
            strings(&[&["4"], &["4"]])
        );
    }

    #[test]
    fn image_names_say_the_video_and_the_second() {
        assert_eq!(
            image_instant("clip25/000012.jpg"),
            Some(("clip25".into(), 12))
        );
        assert_eq!(
            image_instant("clip25_000012.jpg"),
            Some(("clip25".into(), 12))
        );
        assert_eq!(
            image_instant("my_clip_0007.png"),
            Some(("my_clip".into(), 7))
        );
        assert_eq!(
            image_instant("videos/clip25/img_902"),
            Some(("videos/clip25".into(), 902))
        );
        for bad in [
            "clip25/cover.jpg",
            "clip25.jpg",
            "_12.jpg",
            "clip25_12a.jpg",
            "/12.jpg",
        ] {
            assert_eq!(image_instant(bad), None, "{bad}");
        }
    }

    #[test]
    fn frame_filters_set_the_step() {
        assert_eq!(frame_step(""), 1);
        assert_eq!(frame_step("step=5"), 5);
        assert_eq!(frame_step("step = 12"), 12);
        assert_eq!(frame_step("step=0"), 1);
    }

    #[test]
    fn text_that_is_not_xml_is_an_error_naming_the_line() {
        let message = error_of("video,start_frame,label\nclip25,0,stand\n");
        assert!(message.contains(": line 1: not XML"), "{message}");
        let message = error_of("<annotations>\n<track id=\"0\">\n</annotations>\n");
        assert!(message.contains(": line 3: not XML"), "{message}");
        let message = error_of("<?xml version=\"1.0\"?>\n<dataset/>\n");
        assert!(
            message.contains("line 2, <dataset>: expected CVAT's <annotations>"),
            "{message}"
        );
    }

    #[test]
    fn a_box_missing_a_corner_names_the_box_and_its_line() {
        let message = error_of(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<annotations>\n\
             <meta><task><name>clip</name></task></meta>\n<track id=\"0\" label=\"person\">\n\
             <box frame=\"3\" outside=\"0\" ytl=\"1\" xbr=\"2\" ybr=\"3\"/>\n\
             </track>\n</annotations>\n",
        );
        assert!(
            message.contains("line 5, <box frame=\"3\">: xtl is missing; expected a number"),
            "{message}"
        );
    }

    #[test]
    fn bad_corners_and_numbers_name_the_box() {
        let track = |box_attributes: &str| {
            format!(
                "<annotations>\n<meta><task><name>clip</name></task></meta>\n\
                 <track id=\"0\" label=\"person\">\n<box frame=\"1\" {box_attributes}/>\n</track>\n\
                 </annotations>\n"
            )
        };
        for (attributes, what) in [
            ("xtl=\"9\" ytl=\"1\" xbr=\"2\" ybr=\"3\"", "are swapped"),
            (
                "xtl=\"a\" ytl=\"1\" xbr=\"2\" ybr=\"3\"",
                "xtl=\"a\" is not a number",
            ),
            (
                "xtl=\"1\" ytl=\"1\" xbr=\"2\" ybr=\"NaN\"",
                "ybr=\"NaN\" is not a number",
            ),
            (
                "outside=\"2\" xtl=\"1\" ytl=\"1\" xbr=\"2\" ybr=\"3\"",
                "outside=\"2\" is not a flag",
            ),
            (
                "xtl=\"1\" ytl=\"1\" xbr=\"2\" ybr=\"3\" rotation=\"30.00\"",
                "only upright boxes",
            ),
        ] {
            let message = error_of(&track(attributes));
            assert!(
                message.contains("line 4, <box frame=\"1\">: "),
                "{attributes}: {message}"
            );
            assert!(message.contains(what), "{attributes}: {message}");
        }
    }

    #[test]
    fn a_polygon_track_is_an_error_naming_the_track() {
        let message = error_of(
            "<annotations>\n<meta><task><name>clip</name></task></meta>\n\
             <track id=\"7\" label=\"person\">\n\
             <polygon frame=\"0\" outside=\"0\" occluded=\"0\" keyframe=\"1\" \
             points=\"1,2;3,4;5,6\"/>\n\
             </track>\n</annotations>\n",
        );
        assert!(
            message.contains("line 3, <track id=\"7\">: a track of <polygon> shapes"),
            "{message}"
        );
        assert!(message.contains("only boxes are read"), "{message}");
    }

    #[test]
    fn an_image_name_without_digits_is_an_error_naming_the_image() {
        let message = error_of(
            "<annotations>\n<meta><task><name>keyframes</name></task></meta>\n\
             <image id=\"0\" name=\"clip25/cover.jpg\" width=\"640\" height=\"360\">\n</image>\n\
             </annotations>\n",
        );
        assert!(
            message.contains("line 3, <image id=\"0\">: the name does not say"),
            "{message}"
        );
        assert!(message.contains("clip25/000012.jpg"), "{message}");
    }

    #[test]
    fn images_of_one_video_with_two_sizes_are_an_error() {
        let message = error_of(
            "<annotations>\n\
             <image id=\"0\" name=\"clip25/000001.jpg\" width=\"640\" height=\"360\"/>\n\
             <image id=\"1\" name=\"clip25/000002.jpg\" width=\"1280\" height=\"720\"/>\n\
             </annotations>\n",
        );
        assert!(
            message.contains("line 3, <image id=\"1\">: is 1280×720 but line 2"),
            "{message}"
        );
    }

    #[test]
    fn a_video_task_exported_for_images_is_an_error() {
        let message = error_of(
            "<annotations>\n<meta><task><name>clip25</name><original_size><width>640</width>\
             <height>360</height></original_size><source>clip25.mp4</source></task></meta>\n\
             <image id=\"0\" name=\"frame_000000\" width=\"640\" height=\"360\"/>\n\
             </annotations>\n",
        );
        assert!(
            message.contains("line 3, <image id=\"0\">: a frame of a video task"),
            "{message}"
        );
        assert!(message.contains("CVAT for video 1.1"), "{message}");
    }

    #[test]
    fn an_attribute_the_export_lacks_is_an_error_listing_those_it_has() {
        let error = read_cvat(
            &testdata("cvat_video.xml"),
            &ActionSource::Attribute("Action".into()),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("no attribute is named \"Action\" (it has action, talk, wave)"),
            "{error}"
        );
    }

    #[test]
    fn project_tracks_must_name_a_task_of_the_project() {
        let xml = std::fs::read_to_string(testdata("cvat_project_video.xml")).unwrap();
        let message = error_of(&xml.replace(" task_id=\"5\"", ""));
        assert!(
            message.contains("<track id=\"2\">: no task_id"),
            "{message}"
        );
        let message = error_of(&xml.replace(" task_id=\"5\"", " task_id=\"9\""));
        assert!(message.contains("task_id=\"9\" names no task"), "{message}");
    }

    #[test]
    fn a_job_export_names_no_video() {
        let message = error_of(
            "<annotations>\n<meta>\n<job><id>21</id><start_frame>0</start_frame></job>\n</meta>\n\
             <track id=\"0\" label=\"person\">\n\
             <box frame=\"0\" xtl=\"1\" ytl=\"1\" xbr=\"2\" ybr=\"2\"/>\n\
             </track>\n</annotations>\n",
        );
        assert!(
            message.contains("line 3, <job>: names no video"),
            "{message}"
        );
    }
}
