//! VIA 3 (the VGG Image Annotator's video annotator) project JSON, read into an [`Export`].
//!
//! The project's shape, from VIA 3's code documentation (`via-3.x.y/CodeDoc.md`, "Structure of
//! VIA Project JSON File") and its `_via_attribute.js` and `_via_metadata.js`:
//! `"attribute"` maps an id to `{aname, anchor_id, type, options}` (type 1 text, 2 checkbox,
//! 3 radio, 4 select, 5 image; `options` maps option ids to names); `"file"` maps an id to
//! `{fid, fname, ...}`; `"view"` maps a view id to `{fid_list}`; `"project"."vid_list"` orders
//! the views; `"metadata"` maps an id to `{vid, z, xy, av}`: `z` the times in seconds on the
//! media timeline of the browser VIA ran in (the `<video>` element's `currentTime`), `xy` a
//! region (`[2, x, y, w, h]` a rectangle, in the video's pixels; other shape ids: 1 point,
//! 3 circle, 4 ellipse, 5 line, 6 polyline, 7 polygon, 8 extreme rectangle, 9 extreme circle),
//! `av` attribute id to value (option ids, comma-separated for checkboxes, or the text).
//!
//! A metadata with one time and a rectangle is a box at that instant; one with two times and no
//! region is a temporal segment of the whole frame; one with neither is about the file (a
//! caption) and is skipped. A video enters the export only when it has a box or segment.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

use super::export::{
    ActionSource, At, Browser, Export, ExportError, ExportedVideo, Motion, Origin, Rect, Shape,
    Track,
};

/// Reads a VIA 3 project. `actions` says which attribute names the actions: the single one
/// the project has (`Label`; an attribute named `person` or `person_id` does not count), the
/// one with that `aname`, or (`Checkboxes`) every checkbox attribute, each ticked option an
/// action. Boxes take their person from a `person` (or `person_id`) attribute holding a
/// positive whole number; other boxes and segments get numbers unused in their video, in the
/// file's order from 1, each its own track. Times are read as `browser`'s.
pub fn read_via3(
    path: &Path,
    actions: &ActionSource,
    browser: Browser,
) -> Result<Export, ExportError> {
    let bytes = std::fs::read(path).map_err(|source| ExportError::Read {
        file: path.to_path_buf(),
        source,
    })?;
    let json: Value = serde_json::from_slice(&bytes).map_err(|error| not_json(path, &error))?;
    let project = Project::new(path, &json)?;
    let sources = project.action_attributes(actions)?;
    let persons = project.person_attributes();
    let mut items = Vec::new();
    for key in metadata_order(&bytes, project.metadata) {
        let Some(value) = project.metadata.get(&key) else {
            continue;
        };
        if let Some(item) = project.item(&key, value, &sources, &persons)? {
            items.push(item);
        }
    }
    let videos = project.videos(items, browser)?;
    Ok(Export { videos })
}

fn not_json(path: &Path, error: &serde_json::Error) -> ExportError {
    // serde_json's message ends with the place, which the origin says already.
    let text = error.to_string();
    let message = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(message, _)| message);
    ExportError::Malformed {
        origin: Origin {
            file: path.to_path_buf(),
            place: format!("line {}, column {}", error.line(), error.column()),
        },
        message: format!("not JSON ({message}); expected a VIA 3 project saved as .json"),
    }
}

/// The JSON exports of other tools that are taken for VIA 3 projects, named by their keys: none
/// holds boxes on a video's time.
fn other_format(root: &Map<String, Value>) -> Option<&'static str> {
    let via_image =
        |value: &Value| value.get("filename").is_some() && value.get("regions").is_some();
    if root.contains_key("_via_img_metadata") {
        Some("a VIA 2 image project (its boxes are on images)")
    } else if !root.is_empty() && root.values().all(via_image) {
        Some("VIA 1 or 2's annotations of images (its boxes are on images)")
    } else if root.contains_key("images") && root.contains_key("annotations") {
        Some("a COCO file (its boxes are on images)")
    } else {
        None
    }
}

/// The metadata ids in the order the file writes them (serde_json's maps sort their keys), so
/// that persons are numbered in the file's order; any key not found that way comes after.
fn metadata_order(bytes: &[u8], metadata: &Map<String, Value>) -> Vec<String> {
    let written = serde_json::from_slice::<MetadataKeys>(bytes)
        .map(|keys| keys.metadata.0)
        .unwrap_or_default();
    let mut seen = BTreeSet::new();
    written
        .into_iter()
        .chain(metadata.keys().cloned())
        .filter(|key| seen.insert(key.clone()))
        .collect()
}

#[derive(serde::Deserialize)]
struct MetadataKeys {
    #[serde(default)]
    metadata: KeyOrder,
}

/// A JSON object's keys, in the order written; the values are skipped.
#[derive(Default)]
struct KeyOrder(Vec<String>);

impl<'de> serde::Deserialize<'de> for KeyOrder {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(KeyOrderVisitor)
    }
}

struct KeyOrderVisitor;

impl<'de> Visitor<'de> for KeyOrderVisitor {
    type Value = KeyOrder;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeyOrder, A::Error> {
        let mut keys = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<IgnoredAny>()?;
            keys.push(key);
        }
        Ok(KeyOrder(keys))
    }
}

const TEXT: u64 = 1;
const CHECKBOX: u64 = 2;
/// The anchor of attributes that describe a whole file (a caption), not a region or segment.
const FILE_ANCHOR: &str = "FILE1_Z0_XY0";

/// One `"attribute"` entry.
struct Attribute<'a> {
    id: &'a str,
    aname: &'a str,
    anchor: &'a str,
    kind: u64,
    options: BTreeMap<&'a str, &'a str>,
}

/// A box or temporal segment, its actions resolved, before persons are numbered.
struct Item {
    vid: String,
    origin: Origin,
    kind: ItemKind,
    actions: Vec<String>,
}

enum ItemKind {
    Box {
        second: f64,
        rect: Rect,
        person: Option<u32>,
    },
    Segment {
        start: f64,
        end: f64,
    },
}

/// The parts of the project JSON this reader uses, checked.
struct Project<'a> {
    path: &'a Path,
    attributes: Vec<Attribute<'a>>,
    /// File id (the `"file"` key, and its `fid`) to its `fname`.
    files: BTreeMap<String, &'a str>,
    views: &'a Map<String, Value>,
    /// `"project"."vid_list"`: the order of the views.
    vid_list: Vec<String>,
    metadata: &'a Map<String, Value>,
}

impl<'a> Project<'a> {
    fn new(path: &'a Path, json: &'a Value) -> Result<Self, ExportError> {
        let error =
            |place: &str, message: &str| malformed(path, place.to_string(), message.to_string());
        let root = json.as_object().ok_or_else(|| {
            error(
                "the file",
                "expected a VIA 3 project: a JSON object with \"project\", \"attribute\", \
                 \"file\", \"view\" and \"metadata\"",
            )
        })?;
        if let Some(other) = other_format(root) {
            return Err(error(
                "the file",
                &format!(
                    "{other}, not a VIA 3 project: avaprep reads boxes on a video's time, from \
                     VIA 3's video annotator (its project .json), CVAT for video 1.1 or CVAT for \
                     images 1.1 (keyframe images, as `avaprep keyframes` writes them)"
                ),
            ));
        }
        let object = |key: &str| -> Result<&'a Map<String, Value>, ExportError> {
            root.get(key).and_then(Value::as_object).ok_or_else(|| {
                error(
                    &format!("\"{key}\""),
                    "missing or not an object; expected a VIA 3 project (saved by the video \
                     annotator)",
                )
            })
        };
        let mut project = Project {
            path,
            attributes: Vec::new(),
            files: BTreeMap::new(),
            views: object("view")?,
            vid_list: Vec::new(),
            metadata: object("metadata")?,
        };
        for (id, value) in object("attribute")? {
            project.attributes.push(project.attribute(id, value)?);
        }
        for (id, value) in object("file")? {
            project.add_file(id, value)?;
        }
        project.vid_list = root
            .get("project")
            .and_then(|project| project.get("vid_list"))
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(id_text).collect())
            .unwrap_or_default();
        Ok(project)
    }

    fn error(&self, place: String, message: String) -> ExportError {
        malformed(self.path, place, message)
    }

    fn attribute(&self, id: &'a str, value: &'a Value) -> Result<Attribute<'a>, ExportError> {
        let place = format!("attribute \"{id}\"");
        let field = |key: &str| value.get(key);
        let aname = field("aname").and_then(Value::as_str).ok_or_else(|| {
            self.error(
                place.clone(),
                "\"aname\" is missing; expected the attribute's name".into(),
            )
        })?;
        let kind = field("type")
            .and_then(Value::as_u64)
            .filter(|kind| (1..=5).contains(kind))
            .ok_or_else(|| {
                self.error(
                    place.clone(),
                    "\"type\" is not 1 to 5; expected VIA's 1 text, 2 checkbox, 3 radio, 4 \
                     select or 5 image"
                        .into(),
                )
            })?;
        let mut options = BTreeMap::new();
        if let Some(map) = field("options").and_then(Value::as_object) {
            for (option, name) in map {
                let name = name.as_str().ok_or_else(|| {
                    self.error(
                        place.clone(),
                        format!("option \"{option}\" is not text; expected its name"),
                    )
                })?;
                options.insert(option.as_str(), name);
            }
        }
        Ok(Attribute {
            id,
            aname,
            anchor: field("anchor_id").and_then(Value::as_str).unwrap_or(""),
            kind,
            options,
        })
    }

    fn add_file(&mut self, id: &'a str, value: &'a Value) -> Result<(), ExportError> {
        let fname = value.get("fname").and_then(Value::as_str).ok_or_else(|| {
            self.error(
                format!("file \"{id}\""),
                "\"fname\" is missing; expected the video's file name".into(),
            )
        })?;
        self.files.insert(id.to_string(), fname);
        if let Some(fid) = value.get("fid").and_then(id_text) {
            self.files.entry(fid).or_insert(fname);
        }
        Ok(())
    }

    /// The attributes whose values are the actions.
    fn action_attributes(
        &self,
        actions: &ActionSource,
    ) -> Result<Vec<&Attribute<'a>>, ExportError> {
        let chosen: Vec<&Attribute> = match actions {
            ActionSource::Label => self
                .attributes
                .iter()
                .filter(|attribute| !is_person(attribute.aname) && attribute.anchor != FILE_ANCHOR)
                .collect(),
            ActionSource::Attribute(name) => self
                .attributes
                .iter()
                .filter(|attribute| attribute.aname == name)
                .collect(),
            ActionSource::Checkboxes => self
                .attributes
                .iter()
                .filter(|attribute| attribute.kind == CHECKBOX)
                .collect(),
        };
        let message = match (actions, chosen.len()) {
            (ActionSource::Checkboxes, 1..) | (_, 1) => return Ok(chosen),
            (ActionSource::Label, 0) => {
                return Err(self.error(
                    "\"attribute\"".into(),
                    "the project has no attribute to read actions from; expected one (a \
                     checkbox, radio or select of the actions)"
                        .into(),
                ));
            }
            (ActionSource::Label, _) => format!(
                "several attributes could name the actions ({}); choose the one that does \
                 with the attribute option",
                names(&chosen)
            ),
            (ActionSource::Attribute(name), 0) => format!(
                "no attribute is named \"{name}\"; expected one of {}",
                names(&self.attributes.iter().collect::<Vec<_>>())
            ),
            (ActionSource::Attribute(name), _) => {
                // No setting tells two attributes of one name apart: the project's to mend.
                return Err(self.error(
                    "\"attribute\"".into(),
                    format!("several attributes are named \"{name}\"; expected one"),
                ));
            }
            (ActionSource::Checkboxes, _) => "the project has no checkbox attribute (type 2); \
                 expected one whose ticked options are the actions"
                .into(),
        };
        // The project is sound; the action setting asks for what it does not have.
        Err(self
            .error("\"attribute\"".into(), message)
            .of_the_action_setting())
    }

    fn person_attributes(&self) -> Vec<&Attribute<'a>> {
        self.attributes
            .iter()
            .filter(|attribute| is_person(attribute.aname))
            .collect()
    }

    /// One metadata entry as a box or segment with its actions; `None` for one about the whole
    /// file.
    fn item(
        &self,
        key: &str,
        value: &Value,
        sources: &[&Attribute],
        persons: &[&Attribute],
    ) -> Result<Option<Item>, ExportError> {
        let place = format!("metadata \"{key}\"");
        let error = |message: String| self.error(place.clone(), message);
        let vid = value.get("vid").and_then(id_text).ok_or_else(|| {
            error("\"vid\" is missing; expected the id of the view (video) it is on".into())
        })?;
        let z = numbers(value, "z").map_err(&error)?;
        let xy = numbers(value, "xy").map_err(&error)?;
        if let Some(bad) = z.iter().find(|time| !time.is_finite() || **time < 0.0) {
            return Err(error(format!(
                "\"z\" holds {bad}; expected times in seconds, 0 or more"
            )));
        }
        let kind = match (z.as_slice(), xy.as_slice()) {
            ([], []) => return Ok(None),
            ([second], [_, ..]) => ItemKind::Box {
                second: *second,
                rect: rectangle(&xy).map_err(&error)?,
                person: self.person(value, persons).map_err(&error)?,
            },
            ([start, end], []) if start < end => ItemKind::Segment {
                start: *start,
                end: *end,
            },
            ([start, end], []) => {
                return Err(error(format!(
                    "\"z\" [{start}, {end}] does not end after it starts; expected a segment \
                     [start, end]"
                )));
            }
            _ => {
                return Err(error(format!(
                    "{} time(s) in \"z\" and {} number(s) in \"xy\"; expected a box (one time, \
                     \"xy\" [2, x, y, width, height]) or a temporal segment (two times, \"xy\" \
                     empty)",
                    z.len(),
                    xy.len()
                )));
            }
        };
        let mut actions = Vec::new();
        for attribute in sources {
            actions.extend(self.values(value, attribute).map_err(&error)?);
        }
        Ok(Some(Item {
            vid,
            origin: Origin {
                file: self.path.to_path_buf(),
                place,
            },
            kind,
            actions,
        }))
    }

    /// A box's person: the first `person` attribute that holds a positive whole number.
    fn person(&self, value: &Value, persons: &[&Attribute]) -> Result<Option<u32>, String> {
        for attribute in persons {
            let values = self.values(value, attribute)?;
            if let [only] = values.as_slice()
                && let Some(person) = only.parse::<u32>().ok().filter(|&person| person > 0)
            {
                return Ok(Some(person));
            }
        }
        Ok(None)
    }

    /// The names an attribute's value in `"av"` stands for: the text itself, or the options
    /// its ids pick (several for a checkbox). None when the attribute is absent or empty.
    fn values(&self, value: &Value, attribute: &Attribute) -> Result<Vec<String>, String> {
        let Some(raw) = value.get("av").and_then(|av| av.get(attribute.id)) else {
            return Ok(Vec::new());
        };
        let text = match raw {
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            Value::Null => String::new(),
            other => {
                return Err(format!(
                    "\"av\" \"{}\" is {other}; expected text or option ids",
                    attribute.id
                ));
            }
        };
        if attribute.kind == TEXT {
            let text = text.trim();
            return Ok(if text.is_empty() {
                Vec::new()
            } else {
                vec![text.to_string()]
            });
        }
        text.split(',')
            .map(str::trim)
            .filter(|option| !option.is_empty())
            .map(|option| {
                attribute
                    .options
                    .get(option)
                    .map(|name| name.to_string())
                    .ok_or_else(|| {
                        format!(
                            "\"av\" \"{}\" picks option \"{option}\", which attribute \"{}\" ({}) \
                         does not have; expected one of {}",
                            attribute.id,
                            attribute.id,
                            attribute.aname,
                            attribute
                                .options
                                .keys()
                                .copied()
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })
            })
            .collect()
    }

    /// The videos, in the order of `vid_list` (then any other views), each with its tracks.
    fn videos(
        &self,
        items: Vec<Item>,
        browser: Browser,
    ) -> Result<Vec<ExportedVideo>, ExportError> {
        let mut by_view: BTreeMap<String, Vec<Item>> = BTreeMap::new();
        for item in items {
            if !self.views.contains_key(&item.vid) {
                return Err(ExportError::Malformed {
                    message: format!(
                        "\"vid\" \"{}\" names no view; expected one of \"view\"",
                        item.vid
                    ),
                    origin: item.origin,
                });
            }
            by_view.entry(item.vid.clone()).or_default().push(item);
        }
        let listed: Vec<String> = self
            .vid_list
            .iter()
            .filter(|vid| by_view.contains_key(*vid))
            .cloned()
            .collect();
        let unlisted: Vec<String> = by_view
            .keys()
            .filter(|vid| !listed.contains(vid))
            .cloned()
            .collect();
        let mut videos = Vec::new();
        for vid in listed.into_iter().chain(unlisted) {
            // A view listed twice in `vid_list` is one video.
            let Some(items) = by_view.remove(&vid) else {
                continue;
            };
            videos.push(ExportedVideo {
                name: self.video_name(&vid)?,
                origin: Origin {
                    file: self.path.to_path_buf(),
                    place: format!("view \"{vid}\""),
                },
                frame_size: None,
                last_frame: None,
                tracks: tracks(items, browser)?,
            });
        }
        Ok(videos)
    }

    /// The `fname` of a view's one file.
    fn video_name(&self, vid: &str) -> Result<String, ExportError> {
        let place = format!("view \"{vid}\"");
        let fids: Vec<String> = self
            .views
            .get(vid)
            .and_then(|view| view.get("fid_list"))
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(id_text).collect())
            .unwrap_or_default();
        let [fid] = fids.as_slice() else {
            return Err(self.error(
                place,
                format!(
                    "\"fid_list\" holds {} files; expected one video per view",
                    fids.len()
                ),
            ));
        };
        self.files
            .get(fid)
            .map(|fname| fname.to_string())
            .ok_or_else(|| self.error(place, format!("file \"{fid}\" is not in \"file\"")))
    }
}

/// The tracks of one video: a box with a person joins that person's `Instant` track; any other
/// box, and each segment, is a track of its own, numbered with the first number no box's
/// person attribute uses.
fn tracks(items: Vec<Item>, browser: Browser) -> Result<Vec<Track>, ExportError> {
    let named: BTreeSet<u32> = items
        .iter()
        .filter_map(|item| match item.kind {
            ItemKind::Box { person, .. } => person,
            ItemKind::Segment { .. } => None,
        })
        .collect();
    let mut unused = (1..=u32::MAX).filter(|number| !named.contains(number));
    let mut next = |origin: &Origin| {
        unused.next().ok_or_else(|| ExportError::Malformed {
            origin: origin.clone(),
            message: "no person number left; expected fewer boxes".to_string(),
        })
    };
    let mut tracks: Vec<Track> = Vec::new();
    for item in items {
        match item.kind {
            ItemKind::Box {
                second,
                rect,
                person,
            } => {
                let shape = Shape {
                    at: At::PlayerSeconds(second, browser),
                    rect,
                    outside: false,
                    actions: item.actions,
                };
                match person {
                    Some(person) => add_to_person(&mut tracks, person, shape, item.origin)?,
                    None => tracks.push(Track {
                        person: next(&item.origin)?,
                        motion: Motion::Instant,
                        shapes: vec![shape],
                        origin: item.origin,
                    }),
                }
            }
            ItemKind::Segment { start, end } => tracks.push(Track {
                person: next(&item.origin)?,
                motion: Motion::Held,
                shapes: vec![
                    whole_frame(At::PlayerSeconds(start, browser), false, item.actions),
                    whole_frame(At::PlayerSeconds(end, browser), true, Vec::new()),
                ],
                origin: item.origin,
            }),
        }
    }
    for track in &mut tracks {
        track
            .shapes
            .sort_by(|a, b| seconds(a).total_cmp(&seconds(b)));
    }
    Ok(tracks)
}

fn add_to_person(
    tracks: &mut Vec<Track>,
    person: u32,
    shape: Shape,
    origin: Origin,
) -> Result<(), ExportError> {
    let Some(track) = tracks.iter_mut().find(|track| track.person == person) else {
        tracks.push(Track {
            person,
            motion: Motion::Instant,
            shapes: vec![shape],
            origin,
        });
        return Ok(());
    };
    if track.shapes.iter().any(|other| other.at == shape.at) {
        return Err(ExportError::Malformed {
            message: format!(
                "a second box of person {person} at {} s (the first is {}); expected one box per \
                 person per instant",
                seconds(&shape),
                track.origin.place
            ),
            origin,
        });
    }
    track.shapes.push(shape);
    Ok(())
}

fn whole_frame(at: At, outside: bool, actions: Vec<String>) -> Shape {
    Shape {
        at,
        rect: Rect::WholeFrame,
        outside,
        actions,
    }
}

fn seconds(shape: &Shape) -> f64 {
    match shape.at {
        At::Seconds(second) | At::PlayerSeconds(second, _) => second,
        At::Frame(frame) => frame as f64,
    }
}

/// `Rect::Pixels` from VIA's `[2, x, y, width, height]`.
fn rectangle(xy: &[f64]) -> Result<Rect, String> {
    const SHAPES: [&str; 9] = [
        "point",
        "rectangle",
        "circle",
        "ellipse",
        "line",
        "polyline",
        "polygon",
        "extreme rectangle",
        "extreme circle",
    ];
    let kind = xy[0];
    if kind != 2.0 {
        let name = SHAPES
            .iter()
            .zip(1..)
            .find(|(_, id)| f64::from(*id) == kind)
            .map_or("an unknown shape", |(name, _)| *name);
        return Err(format!(
            "\"xy\" is a {name} (shape {kind}); only rectangles (shape 2) are read"
        ));
    }
    let [_, x, y, width, height] = xy else {
        return Err(format!(
            "\"xy\" has {} numbers; expected a rectangle [2, x, y, width, height]",
            xy.len()
        ));
    };
    if *width < 0.0 || *height < 0.0 {
        return Err(format!(
            "\"xy\" [2, {x}, {y}, {width}, {height}]; expected a rectangle [2, x, y, width, \
             height] with width and height 0 or more"
        ));
    }
    Ok(Rect::Pixels([*x, *y, x + width, y + height]))
}

/// An array of numbers under `key`; absent means empty.
fn numbers(value: &Value, key: &str) -> Result<Vec<f64>, String> {
    let Some(field) = value.get(key) else {
        return Ok(Vec::new());
    };
    let expected = || format!("\"{key}\" is {field}; expected an array of numbers");
    field
        .as_array()
        .ok_or_else(expected)?
        .iter()
        .map(|number| {
            number
                .as_f64()
                .filter(|n| n.is_finite())
                .ok_or_else(expected)
        })
        .collect()
}

/// An id written as text or as a whole number (VIA writes both: `"fid": 1`, `"vid": "1"`).
fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => number.as_u64().map(|id| id.to_string()),
        _ => None,
    }
}

fn is_person(aname: &str) -> bool {
    let aname = aname.trim();
    aname.eq_ignore_ascii_case("person") || aname.eq_ignore_ascii_case("person_id")
}

fn names(attributes: &[&Attribute]) -> String {
    if attributes.is_empty() {
        return "none: the project has no attributes".to_string();
    }
    attributes
        .iter()
        .map(|attribute| format!("\"{}\"", attribute.aname))
        .collect::<Vec<_>>()
        .join(", ")
}

fn malformed(path: &Path, place: String, message: String) -> ExportError {
    ExportError::Malformed {
        origin: Origin {
            file: path.to_path_buf(),
            place,
        },
        message,
    }
}

#[cfg(test)]
mod tests;
