//! What libav says about a video file, for the stages that must check one before using it.

use std::path::{Path, PathBuf};

use ffmpeg_next as ffmpeg;

#[derive(Debug, Clone, PartialEq)]
pub struct MediaInfo {
    /// The frame's width and height as a browser shows it (`videoWidth`, `videoHeight`), so a
    /// browser-based annotation tool's pixel coordinates are in this size: non-square pixels
    /// made square, then upright after the display rotation that extraction applies too (a
    /// phone video's coded 1920x1080 may be a 1080x1920 picture).
    pub width: u32,
    pub height: u32,
    pub codec: String,
    /// The first timestamp of the file (the container start time), in seconds.
    pub start_seconds: f64,
    pub duration_seconds: f64,
}

impl MediaInfo {
    /// The last instant the file covers, in AVA time (seconds from the stream's first timestamp).
    pub fn end_seconds(&self) -> f64 {
        self.duration_seconds
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("{path}: libav cannot open it: {source}")]
    Open {
        path: PathBuf,
        source: ffmpeg::Error,
    },
    #[error("{path}: has no video stream")]
    NoVideo { path: PathBuf },
    #[error("{path}: libav cannot read its video stream: {source}")]
    Codec {
        path: PathBuf,
        source: ffmpeg::Error,
    },
}

/// The container and the index of its best video stream.
fn open_video(path: &Path) -> Result<(ffmpeg::format::context::Input, usize), MediaError> {
    let open = |source| MediaError::Open {
        path: path.to_path_buf(),
        source,
    };
    ffmpeg::init().map_err(open)?;
    let input = ffmpeg::format::input(path).map_err(open)?;
    let index = input
        .streams()
        .best(ffmpeg::media::Type::Video)
        .ok_or_else(|| MediaError::NoVideo {
            path: path.to_path_buf(),
        })?
        .index();
    Ok((input, index))
}

/// Opens the container and its best video stream. Cheap: reads headers only.
pub fn probe(path: &Path) -> Result<MediaInfo, MediaError> {
    let (input, index) = open_video(path)?;
    let stream = input.stream(index).expect("the stream just found");
    let context = ffmpeg::codec::context::Context::from_parameters(stream.parameters()).map_err(
        |source| MediaError::Codec {
            path: path.to_path_buf(),
            source,
        },
    )?;
    let decoder = context
        .decoder()
        .video()
        .map_err(|source| MediaError::Codec {
            path: path.to_path_buf(),
            source,
        })?;
    let time_base = f64::from(stream.time_base());
    let stream_start = stream.start_time();
    let start_seconds = if stream_start == ffmpeg::ffi::AV_NOPTS_VALUE {
        0.0
    } else {
        stream_start as f64 * time_base
    };
    let duration_seconds = if stream.duration() > 0 {
        stream.duration() as f64 * time_base
    } else {
        input.duration().max(0) as f64 / f64::from(ffmpeg::ffi::AV_TIME_BASE)
    };
    let (width, height) = shown_size(
        (decoder.width(), decoder.height()),
        decoder.aspect_ratio(),
        crate::extract::Rotation::of_stream(&stream),
    );
    Ok(MediaInfo {
        width,
        height,
        codec: decoder
            .codec()
            .map_or_else(|| "unknown".to_string(), |codec| codec.name().to_string()),
        start_seconds,
        duration_seconds,
    })
}

/// Chromium's rule: pixels wider than tall widen the picture, pixels taller than wide make it
/// taller; a quarter turn then swaps the sides.
fn shown_size(
    (width, height): (u32, u32),
    pixel_aspect: ffmpeg::Rational,
    rotation: crate::extract::Rotation,
) -> (u32, u32) {
    let (across, down) = (
        i64::from(pixel_aspect.numerator()),
        i64::from(pixel_aspect.denominator()),
    );
    let scaled = |side: u32, by: i64, over: i64| {
        u32::try_from((i64::from(side) * by + over / 2) / over).unwrap_or(side)
    };
    // 0/1 where the file states no pixel shape.
    let (width, height) = if across <= 0 || down <= 0 {
        (width, height)
    } else if across > down {
        (scaled(width, across, down), height)
    } else {
        (width, scaled(height, down, across))
    };
    match rotation.swaps_sides() {
        true => (height, width),
        false => (width, height),
    }
}

/// When a video's frames are shown, on two clocks.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameTimes {
    /// Each frame's time in seconds from the clock extraction uses (the container's start), in
    /// presentation order: frame `n` of an annotation tool (which counts decoded frames) is shown
    /// at `times[n]`.
    pub times: Vec<f64>,
    /// When the last frame stops being shown, on the same clock (see [`shown_until`]); the last
    /// time where the file has a single frame without a duration.
    pub end: f64,
    /// The file's own timestamp of that clock's 0, in seconds, taken as 0 where it is below 0.
    pub first_timestamp: f64,
    /// An MP4 or MOV file (ISO base media), which browsers' media timelines start differently
    /// from Matroska and WebM (see [`crate::import::resolve::VideoFacts::player_start`]).
    pub iso_media: bool,
}

/// When each frame of the best video stream is shown. Reads packets only, decodes nothing;
/// packets an edit list discards are no frames.
pub fn frame_times(path: &Path) -> Result<FrameTimes, MediaError> {
    let (mut input, index) = open_video(path)?;
    let (stream_start, rational) = {
        let stream = input.stream(index).expect("the stream just found");
        (stream.start_time(), stream.time_base())
    };
    let origin = crate::extract::source::first_timestamp(&input, stream_start, rational);
    let discarded =
        |packet: &ffmpeg::Packet| packet.flags().bits() & ffmpeg::ffi::AV_PKT_FLAG_DISCARD != 0;
    // Each frame's timestamp and its packet's duration, for the end.
    let mut stamps: Vec<(i64, i64)> = input
        .packets()
        .filter(|(stream, packet)| stream.index() == index && !discarded(packet))
        .filter_map(|(_, packet)| Some((packet.pts().or(packet.dts())?, packet.duration())))
        .collect();
    stamps.sort_unstable();
    let end = match stamps.as_slice() {
        [] => origin,
        [.., (last, duration)] => {
            let before_last = stamps.iter().rev().map(|s| s.0).find(|stamp| stamp < last);
            shown_until(
                i128::from(*last),
                i128::from(*duration),
                before_last.map(i128::from),
            ) as i64
        }
    };
    let time_base = f64::from(rational);
    let seconds = |stamp: i64| (stamp - origin) as f64 * time_base;
    let iso_media = input.format().name().split(',').any(|name| name == "mp4");
    Ok(FrameTimes {
        times: stamps
            .into_iter()
            .map(|(stamp, _)| seconds(stamp))
            .collect(),
        end: seconds(end),
        first_timestamp: (origin as f64 * time_base).max(0.0),
        iso_media,
    })
}

/// When a video's last frame (at `last`) stops being shown, in any one unit: its packet's
/// `duration` after it where the container gives one, else the gap from the frame before it
/// (`before_last`) again. A variable rate's mean period can reach later than that. An import
/// records where a video's file ends and extraction finds where its frames end by this one
/// rule, so no frame the import plans lies past the end extraction finds.
pub fn shown_until(last: i128, duration: i128, before_last: Option<i128>) -> i128 {
    match before_last {
        _ if duration > 0 => last + duration,
        Some(before) => last + (last - before),
        None => last,
    }
}

#[cfg(test)]
mod tests {
    use super::shown_size;
    use crate::extract::Rotation;
    use ffmpeg_next::Rational;

    /// What Chromium reported for 160x96 H.264 clips (`videoWidth` x `videoHeight`).
    #[test]
    fn the_shown_size_is_chromium_s() {
        let square = Rational::new(1, 1);
        assert_eq!(shown_size((160, 96), square, Rotation::None), (160, 96));
        assert_eq!(
            shown_size((160, 96), Rational::new(0, 1), Rotation::None),
            (160, 96)
        );
        assert_eq!(
            shown_size((160, 96), Rational::new(2, 1), Rotation::None),
            (320, 96)
        );
        assert_eq!(
            shown_size((160, 96), Rational::new(1, 2), Rotation::None),
            (160, 192)
        );
        assert_eq!(
            shown_size((160, 96), square, Rotation::Clockwise),
            (96, 160)
        );
        assert_eq!(shown_size((160, 96), square, Rotation::HalfTurn), (160, 96));
    }
}
