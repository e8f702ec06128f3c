//! Encoding through libav (ffmpeg-next): libx264 and libvpx-vp9 into mp4, Matroska and WebM.
//!
//! Each encoder runs single-threaded so its output is bit-identical for a seed whatever the
//! machine; throughput comes from encoding several videos at once instead.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use ff::{Dictionary, Rational, codec, encoder, format, frame, threading};
use ffmpeg_next as ff;

use super::SynthError;
use super::mirror::Layout;
use super::plan::{Codec, DatasetPlan, Rate, TICKS, VideoSpec};
use super::scene::Renderer;

/// Encodes every video of the plan into the mirror, several at a time.
pub fn encode_all(plan: &DatasetPlan, layout: &Layout) -> Result<(), SynthError> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(plan.videos.len());
    // Longest first (by pixels x frames), so one big video does not end up alone at the end.
    let mut order: Vec<&VideoSpec> = plan.videos.iter().collect();
    order.sort_by_key(|v| {
        std::cmp::Reverse(v.width as usize * v.height as usize * v.frame_ticks.len())
    });
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| -> Result<(), SynthError> {
                    while let Some(spec) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                        encode_video(spec, &layout.video_path(spec))?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| SynthError::WorkerPanic)?)
            .collect::<Result<Vec<()>, SynthError>>()
            .map(|_| ())
    })
}

/// Encodes one video to a temporary name next to `path`, then renames it into place.
pub fn encode_video(spec: &VideoSpec, path: &Path) -> Result<(), SynthError> {
    let tmp = avaprep::fsutil::temporary_path(path);
    let result = write_video(spec, &tmp);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    std::fs::rename(&tmp, path).map_err(|e| SynthError::io(path, e))
}

fn fferr<'p>(path: &'p Path, what: &'static str) -> impl FnOnce(ff::Error) -> SynthError + 'p {
    move |source| SynthError::Ffmpeg {
        path: path.to_path_buf(),
        what,
        source,
    }
}

fn encoder_name(codec: Codec) -> &'static str {
    match codec {
        Codec::H264 => "libx264",
        Codec::Vp9 => "libvpx-vp9",
    }
}

/// Nominal rate for the encoder's rate control; the VFR file is centred near 27 fps.
fn nominal_rate(rate: Rate) -> Rational {
    match rate {
        Rate::Constant(n, d) => Rational(n as i32, d as i32),
        Rate::Variable => Rational(80, 3),
    }
}

fn encoder_options(spec: &VideoSpec) -> Dictionary<'static> {
    let mut opts = Dictionary::new();
    match spec.codec {
        Codec::H264 => {
            opts.set("preset", "ultrafast");
            opts.set("crf", "23");
        }
        Codec::Vp9 => {
            opts.set("deadline", "realtime");
            opts.set("cpu-used", "8");
            opts.set("crf", "32");
            opts.set("b", "0");
        }
    }
    opts
}

fn open_encoder(
    spec: &VideoSpec,
    octx: &format::context::Output,
    path: &Path,
) -> Result<encoder::Video, SynthError> {
    let name = encoder_name(spec.codec);
    let codec = encoder::find_by_name(name).ok_or(SynthError::MissingEncoder(name))?;
    let mut ctx = codec::context::Context::new_with_codec(codec);
    ctx.set_threading(threading::Config {
        kind: threading::Type::Frame,
        count: 1,
        ..Default::default()
    });
    let mut enc = ctx
        .encoder()
        .video()
        .map_err(fferr(path, "creating encoder"))?;
    enc.set_width(spec.width);
    enc.set_height(spec.height);
    enc.set_format(format::Pixel::YUV420P);
    enc.set_time_base(Rational(1, TICKS as i32));
    enc.set_frame_rate(Some(nominal_rate(spec.rate)));
    // Keyframe every ~4 s: seeks in the extractor land a realistic distance before the target.
    let fps = nominal_rate(spec.rate);
    enc.set_gop((4 * fps.numerator() / fps.denominator()) as u32);
    // ultrafast turns B-frames off; an explicit value overrides the preset in libx264.
    enc.set_max_b_frames(if spec.b_frames { 3 } else { 0 });
    let mut flags = codec::Flags::BITEXACT;
    if octx.format().flags().contains(format::Flags::GLOBAL_HEADER) {
        flags |= codec::Flags::GLOBAL_HEADER;
    }
    enc.set_flags(flags);
    enc.open_with(encoder_options(spec))
        .map_err(fferr(path, "opening encoder"))
}

fn write_video(spec: &VideoSpec, path: &Path) -> Result<(), SynthError> {
    let mut octx =
        format::output_as(path, spec.container.muxer()).map_err(fferr(path, "creating output"))?;
    let mut enc = open_encoder(spec, &octx, path)?;
    {
        let codec = encoder::find_by_name(encoder_name(spec.codec));
        let mut ost = octx
            .add_stream(codec)
            .map_err(fferr(path, "adding stream"))?;
        ost.set_parameters(&enc);
        ost.set_time_base(Rational(1, TICKS as i32));
        if let Rate::Constant(n, d) = spec.rate {
            ost.set_avg_frame_rate(Rational(n as i32, d as i32));
        }
    }
    // Bit-exact muxing drops random UIDs and version strings, so a seed gives identical files.
    let mut mux_opts = Dictionary::new();
    mux_opts.set("fflags", "+bitexact");
    octx.write_header_with(mux_opts)
        .map_err(fferr(path, "writing header"))?;
    let ost_tb = octx
        .stream(0)
        .map(|s| s.time_base())
        .unwrap_or(Rational(1, TICKS as i32));

    let renderer = Renderer::new(spec);
    let mut frame = frame::Video::new(format::Pixel::YUV420P, spec.width, spec.height);
    for i in 0..spec.frame_ticks.len() {
        let t = spec.frame_time(i);
        render_into(&renderer, t, i as u32, &mut frame);
        frame.set_pts(Some(spec.start_ticks + spec.frame_ticks[i]));
        enc.send_frame(&frame)
            .map_err(fferr(path, "sending frame"))?;
        drain(&mut enc, &mut octx, ost_tb, path)?;
    }
    enc.send_eof().map_err(fferr(path, "flushing encoder"))?;
    drain(&mut enc, &mut octx, ost_tb, path)?;
    octx.write_trailer().map_err(fferr(path, "writing trailer"))
}

fn render_into(renderer: &Renderer, t: f64, index: u32, frame: &mut frame::Video) {
    let stride = frame.stride(0);
    renderer.luma(t, index, frame.data_mut(0), stride);
    for (plane, v_plane) in [(1, false), (2, true)] {
        let stride = frame.stride(plane);
        renderer.chroma(t, v_plane, frame.data_mut(plane), stride);
    }
}

fn drain(
    enc: &mut encoder::Video,
    octx: &mut format::context::Output,
    ost_tb: Rational,
    path: &Path,
) -> Result<(), SynthError> {
    let mut packet = ff::Packet::empty();
    loop {
        match enc.receive_packet(&mut packet) {
            Ok(()) => {}
            // "Needs more input" and "fully drained" both end this round.
            Err(ff::Error::Eof) => return Ok(()),
            Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => return Ok(()),
            Err(e) => return Err(fferr(path, "receiving packet")(e)),
        }
        packet.set_stream(0);
        packet.rescale_ts(Rational(1, TICKS as i32), ost_tb);
        packet
            .write_interleaved(octx)
            .map_err(fferr(path, "writing packet"))?;
    }
}
