//! The one error type of the annotation readers.

use std::io;
use std::path::PathBuf;

use super::types::{BoxError, KeyframeRange};
use super::video::{VideoFileNameError, VideoIdError};

/// Everything that can go wrong reading an annotation file.
///
/// `Display` reads `file:LINE: problem` (1-based line) for problems tied to a
/// line, so messages can be pasted into an editor's "go to" prompt.
#[derive(Debug, thiserror::Error)]
pub enum AnnotationError {
    #[error("{}: cannot read: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "{file}: the {what} file has no rows; an empty file here usually means a truncated or wrong download"
    )]
    Empty { file: String, what: &'static str },
    #[error("{file}:{line}: {kind}")]
    Line {
        file: String,
        line: usize,
        kind: LineError,
    },
}

impl AnnotationError {
    /// The 1-based line of the problem, when it has one.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Line { line, .. } => Some(*line),
            _ => None,
        }
    }

    /// What is wrong on the line, when the error is tied to one.
    pub fn kind(&self) -> Option<&LineError> {
        match self {
            Self::Line { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

/// A problem on one line of an annotation file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LineError {
    #[error("found {found} fields, expected {expected}")]
    FieldCount {
        found: usize,
        expected: &'static str,
    },
    #[error("column {column} ({name}): {text:?} is not {expected}")]
    BadNumber {
        column: usize,
        name: &'static str,
        text: String,
        expected: &'static str,
    },
    #[error("column {column} (video_id): invalid video id {text:?}: {reason}")]
    BadVideoId {
        column: usize,
        text: String,
        reason: VideoIdError,
    },
    #[error("invalid video file name {text:?}: {reason}")]
    BadFileName {
        text: String,
        reason: VideoFileNameError,
    },
    #[error("{0}")]
    BadBox(BoxError),
    #[error("second {second} is outside the keyframe range {range}")]
    SecondOutOfRange { second: u32, range: KeyframeRange },
    #[error("action id {id} is not in the label map")]
    UnknownAction { id: u16 },
    #[error("action id 0 is invalid: AVA action ids start at 1")]
    ZeroAction,
    #[error("column {column} ({name}): score {value} is outside [0, 1]")]
    ScoreOutOfRange {
        column: usize,
        name: &'static str,
        value: f32,
    },
    #[error(
        "column {column} is quoted ({text}); AVA files are unquoted and PySlowFast would keep the quotes as part of the key"
    )]
    QuotedField { column: usize, text: String },
    #[error(
        "the first line looks like a header row ({text:?}); AVA annotation files have no header"
    )]
    Header { text: String },
    #[error("blank line before the end of the file")]
    BlankLine,
    #[error("the file starts with a UTF-8 byte order mark")]
    ByteOrderMark,
    #[error("second {second} does not come after {previous}; seconds must be strictly increasing")]
    NotIncreasing { second: u32, previous: u32 },
    #[error("duplicate {what} {text:?} (first on line {first_line})")]
    Duplicate {
        what: &'static str,
        text: String,
        first_line: usize,
    },
    #[error("text is not valid UTF-8")]
    InvalidUtf8,
    #[error("unexpected {found}, expected {expected}")]
    UnexpectedToken {
        found: String,
        expected: &'static str,
    },
    #[error("unknown field {field:?} in a {block:?} entry (allowed: {allowed})")]
    UnknownField {
        field: String,
        block: &'static str,
        allowed: &'static str,
    },
    #[error("field {field:?} given twice in one entry")]
    RepeatedField { field: &'static str },
    #[error("the {block:?} entry starting here has no {field:?} field")]
    MissingField {
        field: &'static str,
        block: &'static str,
    },
    #[error(
        "unknown label_type {text:?} (allowed: PERSON_MOVEMENT, OBJECT_MANIPULATION, PERSON_INTERACTION)"
    )]
    UnknownLabelType { text: String },
    #[error("bad string: {reason}")]
    BadString { reason: &'static str },
}

impl From<BoxError> for LineError {
    fn from(e: BoxError) -> Self {
        Self::BadBox(e)
    }
}
