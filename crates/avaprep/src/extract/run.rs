//! One video's extraction: demux forward once from shortly before the first target, plan each
//! packet, feed the decoder only what the targets need, and pick frames by timestamp.
//!
//! Decoding is skipped in two ways. Inside the ranges, packets whose frame cannot be the nearest
//! to any target are sent with `skip_frame = NONREF`: the decoder still decodes them if other
//! frames reference them, and drops them unread if not. Between ranges, packets are not sent at
//! all but held from the latest keyframe on, and sent when a needed packet arrives, which is
//! what a seek would do, with exact bookkeeping and no reliance on the container's index.

use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use ff::{Packet, frame};
use ffmpeg_next as ff;

use super::error::MissingFrames;
use super::jpeg::JpegWriter;
use super::plan::{LOOKAHEAD, Lookahead, Target, cell_has_target};
use super::source::{Source, open};
use super::timing::{Clock, prev_is_nearer};
use super::{ExtractError, ExtractSpec, Extraction, IndexRow, VideoStats};

/// Seconds decoded before the first target (and past the last), so the source frame on the
/// far side of a range edge is seen even when the seek lands late or frames are irregular.
const LEAD_S: f64 = 1.0;
/// Largest compressed size held between ranges before decoding resumes anyway (memory bound).
const MAX_HELD_BYTES: usize = 64 << 20;

pub struct Request<'a> {
    pub input: &'a Path,
    pub video_id: &'a str,
    pub frames: &'a [u32],
    pub segment: [f64; 2],
    pub spec: &'a ExtractSpec,
    pub out_dir: &'a Path,
    pub progress: &'a dyn Fn(u64, u64) -> bool,
}

pub fn extract(req: &Request) -> Result<Extraction, ExtractError> {
    let src = open(req.input, req.spec.threads)?;
    // Above the source's rate every extra frame repeats a source frame: disk spent on nothing.
    if let Some(source_fps) = src.frame_rate
        && req.spec.format.fps() > source_fps * 1.001
    {
        return Err(ExtractError::RateAboveSource {
            path: req.input.to_path_buf(),
            fps: req.spec.format.fps(),
            source_fps,
        });
    }
    let clock = Clock::new(
        src.first_ts,
        src.time_base,
        req.segment[0],
        req.spec.format.fps(),
    )
    .ok_or_else(|| {
        ExtractError::InvalidSpec("fps or segment start is not a usable number".into())
    })?;
    let targets = req
        .frames
        .iter()
        .map(|&k| Target {
            k,
            at: clock.target(k),
        })
        .collect();
    let (out_dir, video_id, spec, rotation) = (req.out_dir, req.video_id, req.spec, src.rotation);
    // A writer holds libav state that stays on the thread that made it.
    let writer = move || {
        JpegWriter::new(
            out_dir,
            video_id,
            spec.format.height(),
            spec.format.upscale(),
            spec.format.quality(),
            rotation,
        )
    };
    if req.spec.threads <= 1 {
        let mut run = Run::new(req, src, clock, targets, Output::Here(Box::new(writer())));
        run.read_all()?;
        run.emit_remaining()?;
        return run.conclude();
    }
    // With cores to spare, frames are scaled and encoded on a thread of their own while the
    // decoder goes on: the same frames, in the same order, through the same writer.
    std::thread::scope(|scope| {
        let (frames, queue) = sync_channel::<Chosen>(ENCODE_QUEUE);
        let encoder = scope.spawn(move || encode_all(&mut writer(), &queue));
        let mut run = Run::new(req, src, clock, targets, Output::Thread(frames));
        let read = run.read_all().and_then(|()| run.emit_remaining());
        // Closing the queue ends the encoding thread once it has written what is queued.
        run.output = Output::Closed;
        let encoded = encoder.join().expect("the encoding thread does not panic");
        // An encoding error also stops the reading (the queue is gone): it is the one to report.
        run.encoded = encoded?;
        read?;
        run.conclude()
    })
}

/// Frames waiting for the encoding thread: enough to ride out a slow frame, few enough to bound
/// memory (each holds a decoded frame).
const ENCODE_QUEUE: usize = 4;

/// A chosen source frame for output frame `k`; `ts` tells repeats of one source frame apart.
struct Chosen {
    k: u32,
    ts: i64,
    frame: frame::Video,
}

/// What became of each chosen frame, in order: (JPEG bytes, width, height).
type Encoded = Vec<(u64, u32, u32)>;

fn encode_all(writer: &mut JpegWriter, queue: &Receiver<Chosen>) -> Result<Encoded, ExtractError> {
    let mut encoded = Vec::new();
    for chosen in queue.iter() {
        encoded.push(writer.write(chosen.k, chosen.ts, &chosen.frame)?);
    }
    Ok(encoded)
}

/// Another reference to a decoded frame's buffers: queued without a copy, and valid after the
/// decoder has moved on (its buffers are reference-counted).
fn new_reference(source: &frame::Video) -> Result<frame::Video, ff::Error> {
    let mut reference = frame::Video::empty();
    match unsafe { ff::ffi::av_frame_ref(reference.as_mut_ptr(), source.as_ptr()) } {
        0 => Ok(reference),
        code => Err(ff::Error::from(code)),
    }
}

/// Where chosen frames go: encoded here as they come, or queued for the encoding thread.
enum Output {
    Here(Box<JpegWriter>),
    Thread(SyncSender<Chosen>),
    Closed,
}

/// Packets held while the decoder is idle (between ranges).
#[derive(Default)]
struct Held {
    /// The GOP before `gop`, kept for open GOPs whose leading frames reference it.
    prev_gop: Vec<Packet>,
    gop: Vec<Packet>,
    /// Whether the held packets directly follow the last packet sent to the decoder.
    contiguous: bool,
    bytes: usize,
}

impl Held {
    fn push(&mut self, packet: Packet) {
        if packet.is_key() && !self.gop.is_empty() {
            if !self.prev_gop.is_empty() {
                self.contiguous = false;
            }
            self.bytes = self.gop.iter().map(Packet::size).sum();
            self.prev_gop = std::mem::take(&mut self.gop);
        }
        self.bytes += packet.size();
        self.gop.push(packet);
    }

    fn restart(&mut self, keyframe: Packet) {
        self.prev_gop.clear();
        self.gop.clear();
        self.bytes = 0;
        self.contiguous = true;
        self.push(keyframe);
    }
}

struct Run<'a> {
    req: &'a Request<'a>,
    src: Source,
    clock: Clock,
    targets: Vec<Target>,
    /// Index of the first target not yet given a frame.
    next: usize,
    lookahead: Lookahead,
    active: bool,
    held: Held,
    frame: frame::Video,
    /// The latest decoded frame: the "before" side of the next target.
    cand: frame::Video,
    cand_at: Option<(i128, i64)>,
    last_ts: Option<i64>,
    output: Output,
    /// What the writer made of each chosen frame so far, in order.
    encoded: Encoded,
    stats: VideoStats,
    index: Vec<IndexRow>,
    /// Latest frame time read (clock units) with its packet duration, and the one before it.
    last: Option<(i128, i64)>,
    before_last: Option<i128>,
    packets_read: u64,
}

impl<'a> Run<'a> {
    fn new(
        req: &'a Request<'a>,
        src: Source,
        clock: Clock,
        targets: Vec<Target>,
        output: Output,
    ) -> Self {
        let stats = VideoStats {
            source_size: (src.decoder.width(), src.decoder.height()),
            rotation_degrees: src.rotation.degrees(),
            ..VideoStats::default()
        };
        Run {
            output,
            encoded: Vec::new(),
            req,
            src,
            clock,
            targets,
            next: 0,
            lookahead: Lookahead::default(),
            active: false,
            held: Held::default(),
            frame: frame::Video::empty(),
            cand: frame::Video::empty(),
            cand_at: None,
            last_ts: None,
            stats,
            index: Vec::new(),
            last: None,
            before_last: None,
            packets_read: 0,
        }
    }

    fn path(&self) -> std::path::PathBuf {
        self.req.input.to_path_buf()
    }

    fn first_needed_s(&self) -> f64 {
        let first_target = self
            .targets
            .first()
            .map_or(f64::INFINITY, |t| self.clock.seconds(t.at));
        first_target.min(self.req.segment[0]) - LEAD_S
    }

    /// Seeks near the first needed instant; a failed or late seek falls back to the start.
    fn seek_start(&mut self) {
        let from = self.first_needed_s();
        if from <= 0.0 {
            return;
        }
        let (num, den) = self.src.time_base;
        let first_s = self.src.first_ts as f64 * f64::from(num) / f64::from(den);
        let us = ((first_s + from) * 1e6).floor() as i64;
        if self.src.input.seek(us, ..us).is_err() {
            let _ = self.src.input.seek(0, ..);
        }
    }

    fn read_all(&mut self) -> Result<(), ExtractError> {
        self.seek_start();
        let stop_s = self.req.segment[1].max(self.first_needed_s() + LEAD_S) + LEAD_S;
        let last_target = self.targets.last().map_or(0, |t| t.at);
        let stop = self
            .clock
            .units_at(stop_s)
            .max(last_target + self.clock.units_at(LEAD_S));
        let mut past_stop = 0;
        let mut checked_seek = false;
        while past_stop <= LOOKAHEAD {
            let Some(packet) = self.read_packet()? else {
                break;
            };
            if !checked_seek {
                checked_seek = true;
                if self.seek_was_late(&packet) {
                    let _ = self.src.input.seek(0, ..);
                    continue;
                }
            }
            let at = packet.dts().or(packet.pts()).map(|ts| self.clock.pts(ts));
            if at.is_some_and(|at| at > stop) {
                past_stop += 1;
            }
            self.account(&packet);
            if let Some(out) = self.lookahead.push(packet) {
                self.plan_and_feed(out)?;
            }
        }
        while let Some(out) = self.lookahead.pop() {
            self.plan_and_feed(out)?;
        }
        // Held packets are not needed (a needed one would have resumed decoding); frames still
        // inside the decoder are.
        self.drain()
    }

    fn seek_was_late(&self, packet: &Packet) -> bool {
        let needed = self
            .clock
            .units_at(self.first_needed_s().max(0.0) + LEAD_S / 2.0);
        packet.pts().is_some_and(|ts| self.clock.pts(ts) > needed) && self.first_needed_s() > 0.0
    }

    /// Next packet of the video stream; `None` at the end of readable data.
    fn read_packet(&mut self) -> Result<Option<Packet>, ExtractError> {
        let mut retries = 0;
        loop {
            let mut packet = Packet::empty();
            match packet.read(&mut self.src.input) {
                // libav marks a packet cut short by the end of the file as corrupt: the file
                // was truncated there, and what comes before it is all there is.
                Ok(()) if packet.is_corrupt() => return Ok(None),
                Ok(()) if packet.stream() == self.src.stream => return Ok(Some(packet)),
                Ok(()) => {}
                Err(ff::Error::Eof) => return Ok(None),
                // A cut-off file: what could be read is all there is; missing frames are
                // reported as such.
                Err(ff::Error::InvalidData) => return Ok(None),
                Err(ff::Error::Other { errno })
                    if errno == ff::util::error::EAGAIN && retries < 100 =>
                {
                    retries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(source) => {
                    return Err(ExtractError::Read {
                        path: self.path(),
                        at_seconds: self.clock.seconds(self.video_end()),
                        source,
                    });
                }
            }
        }
    }

    /// Segment frame count and the end of the video, from packet timestamps alone.
    fn account(&mut self, packet: &Packet) {
        self.packets_read += 1;
        let Some(ts) = packet.pts() else {
            return;
        };
        let p = self.clock.pts(ts);
        let (lo, hi) = (
            self.clock.units_at(self.req.segment[0]),
            self.clock.units_at(self.req.segment[1]),
        );
        if p >= lo && p < hi {
            self.stats.segment_source_frames += 1;
        }
        if self.last.is_none_or(|(last, _)| p > last) {
            self.before_last = self.last.map(|(last, _)| last);
            self.last = Some((p, packet.duration()));
        } else if self.before_last.is_none_or(|b| p > b) {
            self.before_last = Some(p);
        }
    }

    /// End of the video, by the rule an import records its file's end with.
    fn video_end(&self) -> i128 {
        let Some((last, duration)) = self.last else {
            return 0;
        };
        let duration = self.clock.pts(self.src.first_ts + duration.max(0));
        crate::media::shown_until(last, duration, self.before_last)
    }

    fn is_wanted(&self, packet: &Packet) -> bool {
        let Some(ts) = packet.pts() else {
            return true;
        };
        let (prev, next) = self.lookahead.neighbours(ts);
        let units = |t: Option<i64>| t.map(|t| self.clock.pts(t));
        cell_has_target(
            &self.targets[self.next..],
            units(prev),
            self.clock.pts(ts),
            units(next),
        )
    }

    /// True when no target falls between this keyframe's frame and the newest packet read:
    /// decoding can pause here and resume from a later keyframe at no loss. (Targets before
    /// it belong to frames already sent; those beyond the window are planned when they come.)
    fn quiet_from(&self, key: &Packet) -> bool {
        let Some(ts) = key.pts() else {
            return false;
        };
        let p = self.clock.pts(ts);
        let lo2 = match self.lookahead.neighbours(ts).0 {
            Some(prev) => self.clock.pts(prev) + p,
            None => 2 * p,
        };
        let horizon = self
            .lookahead
            .queued()
            .filter_map(Packet::pts)
            .max()
            .unwrap_or(ts);
        let hi = self.clock.pts(horizon.max(ts));
        let rest = &self.targets[self.next..];
        let first = rest.partition_point(|t| 2 * t.at < lo2);
        rest.get(first).is_none_or(|t| t.at > hi)
    }

    fn plan_and_feed(&mut self, packet: Packet) -> Result<(), ExtractError> {
        let wanted = self.is_wanted(&packet);
        if self.active {
            if packet.is_key() && !wanted && self.quiet_from(&packet) {
                self.active = false;
                self.held.restart(packet);
                return Ok(());
            }
            return self.send(&packet, wanted);
        }
        self.held.push(packet);
        if wanted || self.held.bytes > MAX_HELD_BYTES {
            self.resume(wanted)?;
        }
        Ok(())
    }

    /// Sends the held packets (and flushes first when they do not continue the decoder's
    /// stream); the last one is the packet that made them needed.
    fn resume(&mut self, last_wanted: bool) -> Result<(), ExtractError> {
        let held = std::mem::take(&mut self.held);
        let gop_keyed = held.gop.first().is_some_and(Packet::is_key);
        let key_ts = held.gop.first().and_then(Packet::pts);
        let leading = gop_keyed
            && held
                .gop
                .iter()
                .any(|p| p.pts().zip(key_ts).is_some_and(|(a, b)| a < b));
        let mut packets: Vec<Packet> = Vec::new();
        if !gop_keyed || (leading && held.contiguous) {
            packets.extend(held.prev_gop);
        } else if leading && held.prev_gop.first().is_some_and(Packet::is_key) {
            self.drain()?;
            packets.extend(held.prev_gop);
        } else {
            self.drain()?;
        }
        packets.extend(held.gop);
        let n = packets.len();
        for (i, packet) in packets.into_iter().enumerate() {
            self.send(&packet, i + 1 == n && last_wanted)?;
        }
        self.active = true;
        Ok(())
    }

    fn send(&mut self, packet: &Packet, wanted: bool) -> Result<(), ExtractError> {
        let discard = if wanted || !self.req.spec.skip_unneeded {
            ff::Discard::Default
        } else {
            ff::Discard::NonReference
        };
        self.src.decoder.skip_frame(discard);
        if let Err(source) = self.src.decoder.send_packet(packet) {
            let at = packet
                .pts()
                .map_or(0.0, |ts| self.clock.seconds(self.clock.pts(ts)));
            return Err(ExtractError::Decode {
                path: self.path(),
                at_seconds: at,
                source,
            });
        }
        self.receive()
    }

    /// Outputs everything the decoder holds and resets it for a new start.
    fn drain(&mut self) -> Result<(), ExtractError> {
        if self.src.decoder.send_eof().is_ok() {
            self.receive()?;
        }
        self.src.decoder.flush();
        Ok(())
    }

    fn receive(&mut self) -> Result<(), ExtractError> {
        loop {
            match self.src.decoder.receive_frame(&mut self.frame) {
                Ok(()) => {
                    self.stats.source_frames_decoded += 1;
                    self.on_frame()?;
                }
                Err(ff::Error::Eof) => return Ok(()),
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {
                    return Ok(());
                }
                Err(source) => {
                    return Err(ExtractError::Decode {
                        path: self.path(),
                        at_seconds: self
                            .last_ts
                            .map_or(0.0, |ts| self.clock.seconds(self.clock.pts(ts))),
                        source,
                    });
                }
            }
        }
    }

    /// Frames arrive in presentation order; each one settles every pending target it passes.
    fn on_frame(&mut self) -> Result<(), ExtractError> {
        let Some(ts) = self.frame.pts().or_else(|| self.frame.timestamp()) else {
            return Ok(());
        };
        // A GOP sent twice (open-GOP restarts) repeats frames already seen.
        if self.last_ts.is_some_and(|last| ts <= last) {
            return Ok(());
        }
        self.last_ts = Some(ts);
        let p = self.clock.pts(ts);
        while let Some(&target) = self.targets.get(self.next) {
            if p <= target.at {
                break;
            }
            let use_cand = self
                .cand_at
                .is_some_and(|(c, _)| prev_is_nearer(c, p, target.at));
            let gap = self.cand_at.map(|(c, _)| p - c);
            self.emit(target, use_cand, gap)?;
            self.next += 1;
        }
        std::mem::swap(&mut self.cand, &mut self.frame);
        self.cand_at = Some((p, ts));
        Ok(())
    }

    /// Writes the frame for `target`: the candidate (the source frame before it) or the latest
    /// one (after it). `decoded_gap` is the time between those two, used when the packets around
    /// the chosen frame are no longer known.
    fn emit(
        &mut self,
        target: Target,
        use_cand: bool,
        decoded_gap: Option<i128>,
    ) -> Result<(), ExtractError> {
        let (source, ts) = if use_cand {
            (&self.cand, self.cand_at.map_or(0, |c| c.1))
        } else {
            (&self.frame, self.last_ts.unwrap_or(0))
        };
        let gap = self.gap_towards(ts, target.at).or(decoded_gap);
        match &mut self.output {
            Output::Here(writer) => self.encoded.push(writer.write(target.k, ts, source)?),
            Output::Thread(frames) => {
                let frame = new_reference(source).map_err(|source| ExtractError::Encode {
                    path: self.req.input.to_path_buf(),
                    source,
                })?;
                let chosen = Chosen {
                    k: target.k,
                    ts,
                    frame,
                };
                if frames.send(chosen).is_err() {
                    // The encoding thread stopped on an error, which `extract` reports.
                    return Err(ExtractError::EncoderStopped);
                }
            }
            Output::Closed => return Err(ExtractError::EncoderStopped),
        }
        let source_seconds = self.clock.seconds(self.clock.pts(ts));
        // Width and height are the encoder's, filled in by `conclude`.
        self.index.push(IndexRow {
            frame: target.k,
            target_seconds: self.clock.seconds(target.at),
            source_seconds,
            source_file_seconds: source_seconds,
            source_gap_seconds: gap.map(|gap| self.clock.seconds(gap)),
            width: 0,
            height: 0,
        });
        match (self.req.progress)(self.index.len() as u64, self.targets.len() as u64) {
            true => Ok(()),
            false => Err(ExtractError::Interrupted),
        }
    }

    /// The time from the source frame at `ts` to its neighbour on the target's side, from the
    /// packets' timestamps: the same whether or not frames between were decoded, and a bound on
    /// how far the nearer frame can be from the target (half of it).
    fn gap_towards(&self, ts: i64, target: i128) -> Option<i128> {
        let chosen = self.clock.pts(ts);
        let (before, after) = self.lookahead.neighbours(ts);
        let neighbour = if target >= chosen { after } else { before }?;
        Some((self.clock.pts(neighbour) - chosen).abs())
    }

    /// Targets still open after the last frame: the last frame shows them if they fall before
    /// the video's end; the rest are missing.
    fn emit_remaining(&mut self) -> Result<(), ExtractError> {
        let end = self.video_end();
        let mut missing: Vec<MissingFrames> = Vec::new();
        while let Some(&target) = self.targets.get(self.next) {
            if let Some((last, _)) = self.cand_at
                && target.at < end
            {
                self.emit(target, true, Some(end - last))?;
            } else {
                push_missing(&mut missing, target.k, self.clock.seconds(target.at));
            }
            self.next += 1;
        }
        if !missing.is_empty() {
            return Err(ExtractError::ShortVideo {
                path: self.path(),
                missing,
                video_end_seconds: self.clock.seconds(end),
            });
        }
        Ok(())
    }

    /// The index and counts, with what the writer made of each chosen frame.
    fn conclude(mut self) -> Result<Extraction, ExtractError> {
        for (row, &(bytes, width, height)) in self.index.iter_mut().zip(&self.encoded) {
            (row.width, row.height) = (width, height);
            self.stats.jpeg_bytes += bytes;
            self.stats.output_size = (width, height);
        }
        self.stats.frames_written = self.encoded.len() as u64;
        self.stats.source_frames_skipped = self
            .packets_read
            .saturating_sub(self.stats.source_frames_decoded);
        Ok(Extraction {
            stats: self.stats,
            index: self.index,
        })
    }
}

fn push_missing(missing: &mut Vec<MissingFrames>, k: u32, seconds: f64) {
    match missing.last_mut() {
        Some(last) if last.last + 1 == k => {
            last.last = k;
            last.last_seconds = seconds;
        }
        _ => missing.push(MissingFrames {
            first: k,
            last: k,
            first_seconds: seconds,
            last_seconds: seconds,
        }),
    }
}
