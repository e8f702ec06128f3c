//! Frame extraction: the JPEG frames of each video at the instants a trainer needs.
//!
//! Frame k (1-based) of a video is the source frame nearest to `segment_start + (k - 1) / fps`
//! seconds after the stream's first timestamp (a tie goes to the later frame). Numbering is
//! therefore the same whatever ranges are extracted, and frame k at a given rate always shows
//! the same instant. Only the k inside the requested ranges are written, as
//! `<out>/<video_id>_%06d.jpg`, together with an index of target and source times.
//!
//! Decoding is by timestamp, never by counting, so 25 / 23.976 / 29.97 fps and variable frame
//! rate sources come out right. Source frames that no target needs are not decoded when nothing
//! references them (libavcodec's `skip_frame`, lifted per packet), and nothing between ranges is
//! decoded at all.

mod error;
mod jpeg;
mod plan;
mod ranges;
mod rotation;
mod run;
pub(crate) mod source;
#[cfg(test)]
mod tests;
mod timing;

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bad_setting::BadSetting;

pub use error::{ExtractError, MissingFrames};
pub use jpeg::output_size;
pub use ranges::{DEFAULT_MARGIN_S, TimeRange, frame_numbers, ranges_around, segment_range};
pub use rotation::Rotation;

/// The defaults of the `extract` command, the `[extract]` table and the extractor: 5 fps, 480
/// pixels high, ffmpeg's best JPEG quantiser.
pub const DEFAULT_FPS: f64 = 5.0;
pub const DEFAULT_HEIGHT: u32 = 480;
pub const DEFAULT_QUALITY: u8 = 2;
/// The highest output rate: above it a frame period is shorter than any source's.
pub const MAX_FPS: f64 = 1000.0;

/// The frames a video is extracted to. Made only through [`FrameFormat::new`], which checks the
/// values once, where the `--fps` flag or the `[extract]` table is read; every holder after that
/// has a format any video can be extracted to.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FrameFormat {
    fps: f64,
    height: u32,
    quality: u8,
    upscale: bool,
}

impl FrameFormat {
    /// `fps`: frames per second of video time; `height`: pixels, 0 for the native size;
    /// `quality`: ffmpeg's `-q:v`, 2 (best) ..= 31; `upscale`: scale smaller sources up to
    /// `height` (off: they keep their size). Messages name the setting as the `[extract]` keys
    /// and the flags spell it.
    pub fn new(fps: f64, height: u32, quality: u8, upscale: bool) -> Result<Self, BadSetting> {
        check_output(fps, height, quality)?;
        Ok(FrameFormat {
            fps,
            height,
            quality,
            upscale,
        })
    }

    pub fn fps(&self) -> f64 {
        self.fps
    }

    pub fn height(&self) -> u32 {
        self.height
    }

    pub fn quality(&self) -> u8 {
        self.quality
    }

    pub fn upscale(&self) -> bool {
        self.upscale
    }
}

impl Default for FrameFormat {
    fn default() -> Self {
        FrameFormat::new(DEFAULT_FPS, DEFAULT_HEIGHT, DEFAULT_QUALITY, false)
            .expect("the defaults are a format")
    }
}

fn check_output(fps: f64, height: u32, quality: u8) -> Result<(), BadSetting> {
    if !(fps.is_finite() && fps > 0.0 && fps <= MAX_FPS) {
        return Err(BadSetting::new(
            "fps",
            fps,
            format!("must be a rate above 0 and at most {MAX_FPS} frames a second"),
        ));
    }
    if !(2..=31).contains(&quality) {
        return Err(BadSetting::new(
            "quality",
            quality,
            "must lie in 2..=31, as ffmpeg's -q:v",
        ));
    }
    if height % 2 == 1 {
        return Err(BadSetting::new(
            "height",
            height,
            "must be even (4:2:0 frames), or 0 for the native size",
        ));
    }
    Ok(())
}

/// How frames are produced: the format, and how the work is spread.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtractSpec {
    pub format: FrameFormat,
    /// Decoder threads: 1 when several videos run at once, more for a video running alone, which
    /// then also scales and encodes its frames on a thread of its own.
    pub threads: usize,
    /// Leave frames that no target needs undecoded where nothing references them. Off gives
    /// identical output more slowly; it exists to check that claim and as a fallback.
    pub skip_unneeded: bool,
}

impl ExtractSpec {
    pub fn new(format: FrameFormat, threads: usize) -> Self {
        ExtractSpec {
            format,
            threads,
            skip_unneeded: true,
        }
    }
}

impl Default for ExtractSpec {
    fn default() -> Self {
        ExtractSpec::new(FrameFormat::default(), 1)
    }
}

/// What one video's extraction did. `segment_source_frames` is what a full extraction at the
/// native rate would have written, counted from the packets in the segment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VideoStats {
    pub frames_written: u64,
    pub jpeg_bytes: u64,
    /// Source frames the decoder produced.
    pub source_frames_decoded: u64,
    /// Source frames read from the file but never decoded (unneeded, unreferenced, or
    /// between ranges).
    pub source_frames_skipped: u64,
    /// Source frames whose timestamp lies in the segment.
    pub segment_source_frames: u64,
    pub source_size: (u32, u32),
    pub output_size: (u32, u32),
    /// Clockwise degrees the frames were turned to be upright (the display matrix).
    pub rotation_degrees: u32,
}

/// One written frame: its number, target time, the source frame chosen for it (seconds on the
/// same clock as the target: from the stream's first timestamp) and the JPEG size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexRow {
    pub frame: u32,
    pub target_seconds: f64,
    pub source_seconds: f64,
    /// Seconds between the source frames either side of the target (the chosen one is the
    /// nearer, so it lies within half of this of the target); `None` before the first frame.
    pub source_gap_seconds: Option<f64>,
    pub width: u32,
    pub height: u32,
    /// The chosen source frame's time in the video file; `source_seconds` less the file's start
    /// (see [`IndexRow::starting_at`]).
    pub source_file_seconds: f64,
}

impl IndexRow {
    /// The row on the dataset's clock for a file whose time 0 is the dataset's `start` seconds
    /// (a pre-cut clip): target and source times move, the file time stays.
    pub fn starting_at(mut self, start: f64) -> Self {
        self.target_seconds += start;
        self.source_seconds += start;
        self
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Extraction {
    pub stats: VideoStats,
    /// One row per written frame, ascending.
    pub index: Vec<IndexRow>,
}

/// Extracts frames `frames` (ascending, 1-based) of `input` into `out_dir`, which must exist
/// and which the caller renames into place after `Ok`. `segment` is the annotated segment
/// `[start, end)` in seconds from the stream's first timestamp: frame numbers count from its
/// start, and its source frames are counted for the stats. `progress(done, planned)` is called
/// after each frame and says whether to go on: `false` (Ctrl-C) ends the extraction
/// [`ExtractError::Interrupted`] at once.
pub fn extract_video(
    input: &Path,
    video_id: &str,
    frames: &[u32],
    segment: [f64; 2],
    spec: &ExtractSpec,
    out_dir: &Path,
    progress: &dyn Fn(u64, u64) -> bool,
) -> Result<Extraction, ExtractError> {
    if frames.first().is_some_and(|&k| k == 0) || frames.windows(2).any(|w| w[0] >= w[1]) {
        return Err(ExtractError::InvalidSpec(
            "frame numbers must be ascending, unique and start at 1".into(),
        ));
    }
    ffmpeg_next::init().map_err(|source| ExtractError::Open {
        path: input.to_path_buf(),
        source,
    })?;
    run::extract(&run::Request {
        input,
        video_id,
        frames,
        segment,
        spec,
        out_dir,
        progress,
    })
}

/// Header of the per-video index CSV.
pub const INDEX_HEADER: &str = crate::frame_index::HEADER;

/// Writes the index as CSV (`INDEX_HEADER`, then one row per frame) via a temporary file.
pub fn write_index(path: &Path, rows: &[IndexRow]) -> Result<(), ExtractError> {
    let mut text = Vec::with_capacity(48 * (rows.len() + 1));
    let _ = writeln!(text, "{INDEX_HEADER}");
    for r in rows {
        let gap = r
            .source_gap_seconds
            .map_or(String::new(), |gap| format!("{gap:.6}"));
        let _ = writeln!(
            text,
            "{},{:.6},{:.6},{},{},{gap},{:.6}",
            r.frame, r.target_seconds, r.source_seconds, r.width, r.height, r.source_file_seconds
        );
    }
    crate::fsutil::write_atomic(path, &text).map_err(|source| ExtractError::Io {
        path: path.to_path_buf(),
        source,
    })
}
