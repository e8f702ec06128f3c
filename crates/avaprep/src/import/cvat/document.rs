//! The export's XML document read element by element: its tasks and their tracks, or its images
//! and their boxes, with every message naming the file and the element.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use roxmltree::{Document, Node};

use super::{
    box_actions, child, child_text, describe, elements, frame_step, image_instant, image_video,
    person_attribute, task_video, video_task_ids,
};
use crate::import::export::{
    ActionSource, At, ExportError, ExportedVideo, FrameSize, Motion, Origin, Rect, Shape, Track,
};

/// The parsed document and the path its messages name.
pub(super) struct Xml<'a, 'input> {
    pub(super) doc: &'a Document<'input>,
    pub(super) file: &'a Path,
}

/// One task of the export's `<meta>`: the video it names and how its frames are numbered.
pub(super) struct Task {
    pub(super) id: Option<String>,
    /// `<source>` (the video file) or else the task's `<name>`.
    pub(super) video: Option<String>,
    pub(super) frame_size: Option<FrameSize>,
    pub(super) start_frame: u64,
    /// `<stop_frame>`: the task's last frame, numbered in the video.
    pub(super) stop_frame: Option<u64>,
    /// What a project export adds to this task's frame numbers (0 elsewhere).
    pub(super) offset: u64,
    pub(super) origin: Origin,
    pub(super) tracks: Vec<Track>,
}

/// The images of one video in a "CVAT for images" export, as read so far.
pub(super) struct ImageVideo {
    pub(super) name: String,
    pub(super) origin: Origin,
    pub(super) frame_size: FrameSize,
    /// By person: where the person first appears, and their boxes with the second of each.
    pub(super) people: BTreeMap<u32, (Origin, Vec<(f64, Shape)>)>,
}

pub(super) const SHAPE_ELEMENTS: [&str; 9] = [
    "box", "polygon", "polyline", "points", "cuboid", "ellipse", "mask", "skeleton", "tag",
];

impl<'a, 'input> Xml<'a, 'input> {
    pub(super) fn origin(&self, node: Node) -> Origin {
        let line = self.doc.text_pos_at(node.range().start).row;
        Origin {
            file: self.file.to_path_buf(),
            place: format!("line {line}, {}", describe(node)),
        }
    }

    pub(super) fn error(&self, node: Node, message: impl Into<String>) -> ExportError {
        ExportError::Malformed {
            origin: self.origin(node),
            message: message.into(),
        }
    }

    /// An attribute that must be there.
    pub(super) fn required(
        &self,
        node: Node<'a, 'input>,
        key: &str,
        expected: &str,
    ) -> Result<&'a str, ExportError> {
        node.attribute(key)
            .ok_or_else(|| self.error(node, format!("{key} is missing; expected {expected}")))
    }

    pub(super) fn whole_number<T: std::str::FromStr>(
        &self,
        node: Node<'a, 'input>,
        key: &str,
    ) -> Result<T, ExportError> {
        let text = self.required(node, key, "a whole number")?;
        text.trim()
            .parse()
            .map_err(|_| self.error(node, format!("{key}=\"{text}\" is not a whole number")))
    }

    pub(super) fn coordinate(&self, node: Node<'a, 'input>, key: &str) -> Result<f64, ExportError> {
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
    pub(super) fn flag(&self, node: Node<'a, 'input>, key: &str) -> Result<bool, ExportError> {
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
    pub(super) fn meta_number(
        &self,
        node: Node<'a, 'input>,
        name: &str,
    ) -> Result<Option<u64>, ExportError> {
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
    pub(super) fn check_attribute_named(
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
        let error = self.error(
            root,
            format!(
                "no attribute is named \"{wanted}\" ({known}); expected the attribute that \
                 names the action"
            ),
        );
        Err(error.of_the_action_setting())
    }

    /// `Rect::Pixels` from a `<box>`'s corners, as written.
    pub(super) fn rect(&self, node: Node<'a, 'input>) -> Result<Rect, ExportError> {
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
    pub(super) fn attributes(
        &self,
        node: Node<'a, 'input>,
    ) -> Result<Vec<(&'a str, &'a str)>, ExportError> {
        elements(node)
            .filter(|child| child.has_tag_name("attribute"))
            .map(|child| {
                let name = self.required(child, "name", "the attribute's name")?;
                Ok((name, child.text().unwrap_or("").trim()))
            })
            .collect()
    }

    // ---- CVAT for video 1.1 ----

    pub(super) fn video_export(
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
    pub(super) fn tasks(&self, root: Node<'a, 'input>) -> Result<Vec<Task>, ExportError> {
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
    pub(super) fn project_tasks(
        &self,
        project: Node<'a, 'input>,
    ) -> Result<Vec<Task>, ExportError> {
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
    pub(super) fn next_offset(
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
    pub(super) fn task(
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
            stop_frame: self.meta_number(node, "stop_frame")?,
            offset: 0,
            origin: self.origin(node),
            tracks: Vec::new(),
        })
    }

    pub(super) fn frame_size(&self, node: Node<'a, 'input>) -> Result<FrameSize, ExportError> {
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
    pub(super) fn task_of(
        &self,
        track: Node<'a, 'input>,
        tasks: &[Task],
    ) -> Result<usize, ExportError> {
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

    pub(super) fn video_track(
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

    pub(super) fn track_box(
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
    pub(super) fn by_frame(
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

    pub(super) fn images_export(
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
    pub(super) fn reject_video_frame(
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

    pub(super) fn read_image(
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

    pub(super) fn image_boxes(
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
pub(super) type VideoTasks = Vec<(Option<String>, bool)>;
