//! Typed failures of one video's extraction. None of them is fatal to the caller's run: it
//! records the error and goes on with the other videos.

use std::fmt;
use std::path::PathBuf;

use ffmpeg_next as ff;

/// Consecutive frame numbers that could not be produced, with their target times.
#[derive(Clone, Debug, PartialEq)]
pub struct MissingFrames {
    pub first: u32,
    pub last: u32,
    pub first_seconds: f64,
    pub last_seconds: f64,
}

impl fmt::Display for MissingFrames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "frame {} ({:.1} s)", self.first, self.first_seconds)
        } else {
            write!(
                f,
                "frames {}-{} ({:.1}-{:.1} s)",
                self.first, self.last, self.first_seconds, self.last_seconds
            )
        }
    }
}

fn list(missing: &[MissingFrames]) -> String {
    missing
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("invalid extraction request: {0}")]
    InvalidSpec(String),
    #[error("{path}: libav cannot open it (truncated download or not a media file?): {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: ff::Error,
    },
    #[error(
        "{path}: fps {fps} is above the video's {source_fps:.3} frames a second; the extra frames would only repeat source frames: extract at {rate} frames a second or fewer (`avaprep extract --fps {rate}`, or `fps = {rate}` in a pipeline's [extract])", rate = source_fps.floor()
    )]
    RateAboveSource {
        path: PathBuf,
        fps: f64,
        source_fps: f64,
    },
    #[error("{path}: has no video stream")]
    NoVideoStream { path: PathBuf },
    #[error("{path}: no usable decoder for its video stream: {source}")]
    Codec {
        path: PathBuf,
        #[source]
        source: ff::Error,
    },
    #[error("{path}: reading packets failed near {at_seconds:.1} s: {source}")]
    Read {
        path: PathBuf,
        at_seconds: f64,
        #[source]
        source: ff::Error,
    },
    #[error("{path}: decoding failed near {at_seconds:.1} s: {source}")]
    Decode {
        path: PathBuf,
        at_seconds: f64,
        #[source]
        source: ff::Error,
    },
    /// Only between the reading and the encoding thread: the thread's own error is reported.
    #[error("the JPEG encoding thread stopped")]
    EncoderStopped,
    /// The caller's progress said to stop (Ctrl-C): the frames written so far are no set.
    #[error("interrupted")]
    Interrupted,
    #[error("{path}: JPEG encoding failed: {source}")]
    Encode {
        path: PathBuf,
        #[source]
        source: ff::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: {}: the video ends at {video_end_seconds:.1} s (a truncated file, or a video shorter than its annotations)",
        list(.missing)
    )]
    ShortVideo {
        path: PathBuf,
        missing: Vec<MissingFrames>,
        video_end_seconds: f64,
    },
}
