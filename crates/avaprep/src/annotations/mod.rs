//! Strict readers for every AVA v2.2 annotation file, returning typed records.
//!
//! Every reader comes in two forms: `read_*` takes a path, `parse_*` takes
//! bytes already in memory plus a display name used in errors. Errors read
//! `file:LINE: problem`. Parsing is done from one buffer with a hand-written
//! splitter; the only per-row work besides number parsing is validating the
//! 11-byte video id, which is stored inline (no allocation).
//!
//! Policies worth knowing:
//! - no header rows, no quoting, no blank lines except at the end; CRLF is fine;
//! - an empty file is an error except for detections and excluded timestamps;
//! - action id 0 is always refused; unknown ids only when a label map is given;
//! - scores (predicted boxes and detections) must lie in [0, 1].

mod csv;
mod error;
mod labels;
mod lines;
mod lists;
/// The person detector's score a box needs to be a proposal: what AVA's PySlowFast configs
/// (`AVA.DETECTION_SCORE_THRESH`) and mmaction2's (`person_det_score_thr`) use, written into the
/// configs `avaprep lists` makes. A keyframe whose detector boxes all score below it is not read
/// by either; one with a box at or above it is, so its frames are extracted.
pub const DETECTION_SCORE_THRESHOLD: f32 = 0.8;

pub mod plan;
mod types;
mod video;

pub use csv::{
    parse_detections, parse_excluded_timestamps, parse_ground_truth, parse_predicted_boxes,
    read_detections, read_excluded_timestamps, read_ground_truth, read_predicted_boxes,
};
pub use error::{AnnotationError, LineError};
pub use labels::{Label, LabelKind, LabelMap, LabelMapError, parse_label_map, read_label_map};
pub use lists::{
    VideoSpan, parse_included_timestamps, parse_video_file_names, parse_video_ids,
    read_included_timestamps, read_video_file_names, read_video_ids, read_video_spans,
};
pub use types::{
    ActionId, BoxError, BoxLabel, Detection, FrameKey, GroundTruthBox, GroundTruthRow,
    KeyframeRange, NormBox, PredictedBox, ReadOptions, iou,
};
pub use video::{
    VIDEO_ID_MAX_LEN, VideoExtension, VideoFileName, VideoFileNameError, VideoId, VideoIdError,
};

#[cfg(test)]
mod real_files_tests;
