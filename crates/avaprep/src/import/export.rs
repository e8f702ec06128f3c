//! What an annotation-tool export says, in the tools' own terms (frames or seconds of each video,
//! pixels or fractions of the frame), before it is put on the dataset's clock. Each reader
//! ([`super::cvat`], [`super::via`], [`super::whole_clip`]) turns one format into an [`Export`];
//! [`super::resolve`] samples it at the keyframes.

use std::path::PathBuf;

/// Every video an export annotates, in the order the export names them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Export {
    pub videos: Vec<ExportedVideo>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExportedVideo {
    /// The video as the export names it: a file name or stem, perhaps under folders
    /// (`clips/clip25.mp4`). Matched to a file of the videos folder by its stem.
    pub name: String,
    /// Where the export says it: the file, and the element or line.
    pub origin: Origin,
    /// The frame size the export's pixel coordinates are in, when it states one.
    pub frame_size: Option<FrameSize>,
    /// The last frame number the export says the video has (CVAT's `<stop_frame>`), where it
    /// numbers frames.
    pub last_frame: Option<u64>,
    pub tracks: Vec<Track>,
}

impl ExportedVideo {
    /// The last frame number the export labels or says the video has, where it numbers frames:
    /// the file imported with it must have that frame.
    pub fn last_frame_named(&self) -> Option<u64> {
        let labelled = self
            .tracks
            .iter()
            .flat_map(|track| &track.shapes)
            .filter_map(|shape| match shape.at {
                At::Frame(frame) => Some(frame),
                At::Seconds(_) | At::PlayerSeconds(..) => None,
            })
            .max();
        labelled.max(self.last_frame)
    }
}

/// One person (or, for whole-clip labels, the whole frame) through a video.
#[derive(Debug, Clone, PartialEq)]
pub struct Track {
    /// AVA's person id (last column): CVAT's track id; otherwise a number unique in the video.
    pub person: u32,
    pub motion: Motion,
    /// Ascending by `at`.
    pub shapes: Vec<Shape>,
    pub origin: Origin,
}

/// How a track's box is known between its shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Motion {
    /// Linear between consecutive shapes (CVAT's interpolation); an `outside` shape ends the
    /// track until the next shape; after the last shape the box stays where it is unless that
    /// shape is `outside`.
    Interpolated,
    /// Each shape holds unchanged until the next one (whole-clip labels, VIA temporal segments,
    /// whose end is an `outside` shape).
    Held,
    /// Each shape is one instant only (a keyframe image, a VIA region drawn on one frame): it
    /// counts for the keyframe nearest it, if that keyframe is within half a keyframe interval.
    Instant,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub at: At,
    pub rect: Rect,
    /// The person is not in view from here to the next shape.
    pub outside: bool,
    /// Action names, as the export spells them; several for multi-label, none for a box with no
    /// action.
    pub actions: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum At {
    /// A frame number of the video, from 0 (CVAT writes a task's frames by their number in the
    /// video, whatever its `start_frame`).
    Frame(u64),
    /// Seconds from the video's start.
    Seconds(f64),
    /// Seconds on the media timeline of the browser a browser-based tool (VIA) ran in, where it
    /// stores times.
    PlayerSeconds(f64, Browser),
}

/// The browser a browser-based tool (VIA) ran in. Browsers put a video's frames at different
/// instants of the media timeline that the tool's times are on, for a file that does not start
/// at 0 s ([`super::resolve::VideoFacts::player_start`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Browser {
    /// Chromium and the browsers built on it (Chrome, Edge, Opera, Brave).
    #[default]
    Chromium,
    Firefox,
}

impl Browser {
    const ALL: [Browser; 2] = [Browser::Chromium, Browser::Firefox];
    /// The names of `--via-browser` and the pipeline file's `via_browser`.
    pub const NAMES: [&str; 2] = [Browser::Chromium.name(), Browser::Firefox.name()];

    pub const fn name(self) -> &'static str {
        match self {
            Browser::Chromium => "chromium",
            Browser::Firefox => "firefox",
        }
    }

    /// As people know it.
    pub fn label(self) -> &'static str {
        match self {
            Browser::Chromium => "Chrome, Edge or Chromium",
            Browser::Firefox => "Firefox",
        }
    }

    /// The one a project was labelled in when it was not this one.
    pub fn other(self) -> Browser {
        match self {
            Browser::Chromium => Browser::Firefox,
            Browser::Firefox => Browser::Chromium,
        }
    }
}

/// `chromium` or `firefox`, as `--via-browser` and `[import] via_browser` spell it.
impl std::str::FromStr for Browser {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|browser| browser.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown browser {name:?}: one of {}",
                    Self::NAMES.join(", ")
                )
            })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rect {
    /// Corners in pixels of the export's frame size (or the video's, when the export states
    /// none): x1, y1, x2, y2. May lie partly outside the frame: they are clipped later, and
    /// counted.
    Pixels([f64; 4]),
    /// The whole frame (whole-clip labels, VIA temporal segments).
    WholeFrame,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSize {
    pub width: u32,
    pub height: u32,
}

/// A place in an export, for error messages and counts: `file:line` or `file, element`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: PathBuf,
    /// `line 12`, `<track id="3">`, `metadata "1_a9Xq"`.
    pub place: String,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.place)
    }
}

/// Which part of an export names the action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionSource {
    /// The box's or track's label (CVAT) or, for VIA and whole-clip CSV, the one attribute or
    /// column there is.
    Label,
    /// The value of this attribute (CVAT `<attribute name>`; VIA attribute `aname`): its option
    /// names (VIA checkboxes: every option ticked).
    Attribute(String),
    /// Every CVAT checkbox attribute whose value is `true`, named by the attribute.
    Checkboxes,
}

/// `label`, `checkboxes` or `attribute:NAME`, as `--action-from` and `[import] action_from`
/// spell it.
impl std::str::FromStr for ActionSource {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once(':') {
            None if text == "label" => Ok(ActionSource::Label),
            None if text == "checkboxes" => Ok(ActionSource::Checkboxes),
            Some(("attribute", name)) if !name.is_empty() => {
                Ok(ActionSource::Attribute(name.to_string()))
            }
            _ => Err(format!(
                "`{text}`: expected label, checkboxes or attribute:NAME"
            )),
        }
    }
}

/// A malformed or unsupported export: where, and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{file}: cannot read it: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    /// `origin` says where; `message` what is wrong and what was expected there.
    #[error("{origin}: {message}")]
    Malformed { origin: Origin, message: String },
    /// The export is sound, but the action setting (`--action-from`) names what it lacks, or
    /// could mean several of its attributes: the setting is the user's to change (exit 2).
    #[error("{origin}: {message}")]
    ActionSetting { origin: Origin, message: String },
}

impl ExportError {
    /// This error, said of the action setting rather than of the file.
    pub(super) fn of_the_action_setting(self) -> Self {
        match self {
            ExportError::Malformed { origin, message } => {
                ExportError::ActionSetting { origin, message }
            }
            other => other,
        }
    }
}
