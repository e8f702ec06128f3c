//! Opening a video: the container, its best video stream, and a decoder with the caller's
//! thread count.

use std::path::Path;

use ff::{codec, decoder, format, media, threading};
use ffmpeg_next as ff;

use super::ExtractError;
use super::rotation::Rotation;

pub struct Source {
    pub input: format::context::Input,
    pub stream: usize,
    pub time_base: (i32, i32),
    /// First timestamp of the video stream (its time base): AVA second 0.
    pub first_ts: i64,
    /// The stream's average frame rate, when the container states one.
    pub frame_rate: Option<f64>,
    /// How frames are turned to be shown upright.
    pub rotation: Rotation,
    pub decoder: decoder::Video,
}

pub fn open(path: &Path, threads: usize) -> Result<Source, ExtractError> {
    let input = format::input(path).map_err(|source| ExtractError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let stream =
        input
            .streams()
            .best(media::Type::Video)
            .ok_or_else(|| ExtractError::NoVideoStream {
                path: path.to_path_buf(),
            })?;
    let tb = stream.time_base();
    let time_base = (tb.numerator(), tb.denominator());
    let first_ts = first_timestamp(&input, stream.start_time(), tb);
    let rate = stream.avg_frame_rate();
    let frame_rate = (rate.numerator() > 0 && rate.denominator() > 0).then(|| f64::from(rate));
    let rotation = Rotation::of_stream(&stream);
    let codec_err = |source| ExtractError::Codec {
        path: path.to_path_buf(),
        source,
    };
    let mut context =
        codec::context::Context::from_parameters(stream.parameters()).map_err(codec_err)?;
    // Threading must be set before the decoder opens; frame threads keep per-frame work whole,
    // which is what the skip decision (made per packet) relies on.
    context.set_threading(threading::Config {
        kind: if threads > 1 {
            threading::Type::Frame
        } else {
            threading::Type::None
        },
        count: threads.max(1),
        ..Default::default()
    });
    unsafe {
        // Timestamps of frames come from packets in this time base.
        (*context.as_mut_ptr()).pkt_timebase = tb.into();
    }
    let decoder = context.decoder().video().map_err(codec_err)?;
    Ok(Source {
        stream: stream.index(),
        time_base,
        first_ts,
        frame_rate,
        rotation,
        decoder,
        input,
    })
}

/// The container's start time (the earliest of its streams), which the ffmpeg CLI adds to `-ss`
/// and so the reference AVA cuts used; else the video stream's own; else 0. The two differ when an
/// audio stream starts before the video.
pub(crate) fn first_timestamp(
    input: &format::context::Input,
    stream_start: i64,
    tb: ff::Rational,
) -> i64 {
    let container_start = unsafe { (*input.as_ptr()).start_time };
    let container_start = (container_start != ff::ffi::AV_NOPTS_VALUE)
        .then(|| container_start.rescale(ff::rescale::TIME_BASE, tb));
    let stream_start = (stream_start != ff::ffi::AV_NOPTS_VALUE).then_some(stream_start);
    match (container_start, stream_start) {
        // The container's value went through microseconds: when the video stream is the earliest,
        // its own exact timestamp is the same instant without the rounding.
        (Some(container), Some(stream)) if stream <= container + 1 => stream,
        (Some(container), _) => container,
        (None, Some(stream)) => stream,
        (None, None) => 0,
    }
}

use ff::Rescale as _;
