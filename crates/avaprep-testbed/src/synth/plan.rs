//! The deterministic plan: which videos exist, how they are encoded, and what their actors do.
//!
//! Everything random is drawn here from one ChaCha stream per video, so rendering, encoding and
//! annotation writing are pure functions of the plan.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::{LabelInfo, Profile, TimeRange, VideoReport};

/// Encoder time base (ticks per second): divisible by every frame period used (25, 30,
/// 30000/1001 and 24000/1001 fps) and by the start offsets, so no frame time is rounded.
pub const TICKS: i64 = 120_000;

/// Motion classes; exactly one per actor and keyframe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    MoveLeft,
    MoveRight,
    MoveUp,
    MoveDown,
    Grow,
    Shrink,
    StandStill,
    /// Texture rotation; co-occurs with any of the motions above (multi-label).
    Spin,
}

/// Label map of the synthetic dataset: (action, AVA-style id, name, label_type, scored).
/// Ids are sparse on purpose so consumers cannot assume contiguous ids.
pub const ACTIONS: [(Action, u32, &str, &str, bool); 8] = [
    (Action::MoveLeft, 1, "move left", "PERSON_MOVEMENT", true),
    (Action::MoveRight, 3, "move right", "PERSON_MOVEMENT", true),
    (Action::MoveUp, 5, "move up", "PERSON_MOVEMENT", true),
    (Action::MoveDown, 7, "move down", "PERSON_MOVEMENT", true),
    (Action::Grow, 9, "grow", "PERSON_MOVEMENT", true),
    (Action::Shrink, 11, "shrink", "PERSON_MOVEMENT", true),
    // Left out of the scored subset, as AVA leaves 20 of its 80 classes out.
    (
        Action::StandStill,
        12,
        "stand still",
        "PERSON_MOVEMENT",
        false,
    ),
    (
        Action::Spin,
        14,
        "spin (texture, any motion)",
        "OBJECT_MANIPULATION",
        true,
    ),
];

/// The seven mutually exclusive motions, in the order used for sampling.
pub const MOTIONS: [Action; 7] = [
    Action::MoveLeft,
    Action::MoveRight,
    Action::MoveUp,
    Action::MoveDown,
    Action::Grow,
    Action::Shrink,
    Action::StandStill,
];

impl Action {
    pub fn id(self) -> u32 {
        ACTIONS
            .iter()
            .find(|a| a.0 == self)
            .map(|a| a.1)
            .unwrap_or(0)
    }
}

pub fn label_infos() -> Vec<LabelInfo> {
    ACTIONS
        .iter()
        .map(|&(_, id, name, label_type, scored)| LabelInfo {
            id,
            name: name.to_string(),
            label_type: label_type.to_string(),
            scored,
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    H264,
    Vp9,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    Mp4,
    Mkv,
    Webm,
}

impl Container {
    pub fn ext(self) -> &'static str {
        match self {
            Container::Mp4 => "mp4",
            Container::Mkv => "mkv",
            Container::Webm => "webm",
        }
    }
    /// libav muxer name (also what a demuxer reports first in `format.name`).
    pub fn muxer(self) -> &'static str {
        match self {
            Container::Mp4 => "mp4",
            Container::Mkv => "matroska",
            Container::Webm => "webm",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    Constant(i64, i64),
    /// Irregular frame intervals between 25 and 50 ms.
    Variable,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Train,
    Val,
    Test,
}

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
            Split::Test => "test",
        }
    }
}

/// One entry of the cycle of video kinds; the first four cover mp4 with B-frames, mkv,
/// webm/VP9 and VFR with a start offset, so `--video-count 4` already exercises all of them.
struct Kind {
    container: Container,
    codec: Codec,
    rate: Rate,
    b_frames: bool,
    quick_size: (u32, u32),
    small_size: (u32, u32),
    start_ms: i64,
}

const KINDS: [Kind; 6] = [
    Kind {
        container: Container::Mp4,
        codec: Codec::H264,
        rate: Rate::Constant(30, 1),
        b_frames: true,
        quick_size: (640, 360),
        small_size: (192, 108),
        start_ms: 0,
    },
    Kind {
        container: Container::Mkv,
        codec: Codec::H264,
        rate: Rate::Constant(30000, 1001),
        b_frames: false,
        quick_size: (854, 480),
        small_size: (160, 90),
        start_ms: 0,
    },
    Kind {
        container: Container::Webm,
        codec: Codec::Vp9,
        rate: Rate::Constant(25, 1),
        b_frames: false,
        quick_size: (500, 282),
        small_size: (176, 98),
        start_ms: 0,
    },
    Kind {
        container: Container::Mkv,
        codec: Codec::H264,
        rate: Rate::Variable,
        b_frames: true,
        quick_size: (640, 360),
        small_size: (160, 90),
        start_ms: 1400,
    },
    Kind {
        container: Container::Mp4,
        codec: Codec::H264,
        rate: Rate::Constant(24000, 1001),
        b_frames: true,
        quick_size: (1280, 720),
        small_size: (192, 108),
        start_ms: 0,
    },
    Kind {
        container: Container::Webm,
        codec: Codec::Vp9,
        rate: Rate::Constant(30000, 1001),
        b_frames: false,
        quick_size: (640, 360),
        small_size: (160, 90),
        start_ms: 500,
    },
];

/// Shapes whose tight box is mostly filled, so "box mostly actor pixels" holds when clipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Rect,
    Ellipse,
    Octagon,
}

/// One stretch of constant behaviour. Boundaries sit at half seconds so that every keyframe
/// (whole second) is at least 0.5 s away from a change of label.
#[derive(Clone, Debug)]
pub struct Segment {
    pub t0: f64,
    pub t1: f64,
    pub motion: Action,
    pub spin: bool,
    /// Centre at `t0`, in frame-width / frame-height units.
    pub x0: f64,
    pub y0: f64,
    pub vx: f64,
    pub vy: f64,
    /// ln(height as a fraction of frame height) at `t0`, and its rate per second.
    pub log_s0: f64,
    pub log_rate: f64,
    pub theta0: f64,
    pub omega: f64,
}

#[derive(Clone, Debug)]
pub struct Actor {
    pub person_id: u32,
    pub shape: Shape,
    /// Width / height in pixels.
    pub aspect: f64,
    pub u: u8,
    pub v: u8,
    pub luma_lo: u8,
    pub luma_hi: u8,
    /// Stripe period as a fraction of the actor height.
    pub stripe: f64,
    /// Present (drawn and annotated) during [alive.0, alive.1).
    pub alive: (f64, f64),
    pub segments: Vec<Segment>,
}

/// Actor geometry at one instant, in pixels.
#[derive(Clone, Copy, Debug)]
pub struct ActorState {
    pub cx: f64,
    pub cy: f64,
    pub half_w: f64,
    pub half_h: f64,
    pub theta: f64,
    pub motion: Action,
    pub spin: bool,
}

#[derive(Clone, Debug)]
pub struct VideoSpec {
    pub index: usize,
    pub id: String,
    pub split: Split,
    pub codec: Codec,
    pub container: Container,
    pub width: u32,
    pub height: u32,
    pub rate: Rate,
    pub b_frames: bool,
    /// Container pts of frame 0, in `TICKS`.
    pub start_ticks: i64,
    /// Frame times relative to frame 0, in `TICKS`; frame i carries code i.
    pub frame_ticks: Vec<i64>,
    pub duration_ticks: i64,
    /// Annotated keyframes, inclusive; `None` for test videos.
    pub keyframes: Option<(u32, u32)>,
    /// Before this time the scene is static and empty (cheap to render and encode).
    pub scene_start: f64,
    pub actors: Vec<Actor>,
    /// Seed of the background texture and detector jitter.
    pub seed: u64,
}

pub struct DatasetPlan {
    /// The annotated times, in seconds of the files (from each stream's first timestamp).
    pub times: TimeRange,
    /// The dataset second at each file's time 0: the quick profile's files are short, and the
    /// dataset is on AVA's clock (segment from 900, keyframes from 902), as every consumer
    /// assumes; the ava-times profile's files are as long as AVA's.
    pub video_start: u32,
    pub videos: Vec<VideoSpec>,
    /// (video index, keyframe second) pairs excluded from evaluation.
    pub excluded: Vec<(usize, u32)>,
}

/// Val videos of a dataset with at least 8 trainval videos.
pub const MIN_VAL_VIDEOS: usize = 3;

/// Smallest and largest actor height (fraction of frame height) and the size change of one
/// grow/shrink segment (natural log); see `draw_log_size` for why they are tied.
const LOG_S_MIN: f64 = -1.897; // ln 0.15
const LOG_S_MAX: f64 = -0.799; // ln 0.45
const LOG_GROW: f64 = 1.0;
const ASPECT_MAX: f64 = 1.4;

impl DatasetPlan {
    pub fn new(profile: Profile, videos: usize, seed: u64) -> Self {
        let times = match profile {
            // Margins mirror AVA's: first keyframe = start + 2, last = end - 3.
            Profile::Quick => TimeRange {
                segment_start: 5,
                segment_end: 35,
                first_keyframe: 7,
                last_keyframe: 32,
            },
            Profile::AvaTimes => TimeRange {
                segment_start: 900,
                segment_end: 1801,
                first_keyframe: 902,
                last_keyframe: 1798,
            },
        };
        let mut master = ChaCha20Rng::seed_from_u64(seed);
        let ids = video_ids(&mut master, videos);
        let splits = splits(videos);
        let specs: Vec<VideoSpec> = (0..videos)
            .map(|i| {
                let video_seed = master.random::<u64>();
                VideoSpec::new(profile, &times, i, ids[i].clone(), splits[i], video_seed)
            })
            .collect();
        let excluded = excluded_keyframes(&mut master, &specs);
        let video_start = match profile {
            Profile::Quick => 900 - times.segment_start,
            Profile::AvaTimes => 0,
        };
        DatasetPlan {
            times,
            video_start,
            videos: specs,
            excluded,
        }
    }
}

/// 11 characters of the YouTube alphabet; every 4th id starts with '-' and every 4th with '_',
/// as real AVA ids do, to catch tools that treat ids as flags.
fn video_ids(rng: &mut ChaCha20Rng, n: usize) -> Vec<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut ids: Vec<String> = Vec::with_capacity(n);
    while ids.len() < n {
        let mut id: String = (0..11)
            .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
            .collect();
        match ids.len() % 4 {
            1 => id.replace_range(0..1, "-"),
            2 => id.replace_range(0..1, "_"),
            _ => {}
        }
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// Test videos last (from 6 videos on), then the val videos, the rest train. From 8 trainval
/// videos on val has at least 3, so a val mAP averages over several videos (the demo's 12: 7
/// train, 3 val, 2 test).
fn splits(n: usize) -> Vec<Split> {
    let n_test = if n >= 6 { (n / 6).max(2).min(n - 4) } else { 0 };
    let trainval = n - n_test;
    let n_val = match trainval {
        0 | 1 => 0,
        2..=7 => (trainval / 4).max(1),
        _ => (trainval / 4).max(MIN_VAL_VIDEOS),
    };
    (0..n)
        .map(|i| {
            if i >= trainval {
                Split::Test
            } else if i >= trainval - n_val {
                Split::Val
            } else {
                Split::Train
            }
        })
        .collect()
}

/// A few excluded keyframes per split: the second annotated keyframe of every third video,
/// plus one random keyframe of every video with probability 1/2.
fn excluded_keyframes(rng: &mut ChaCha20Rng, specs: &[VideoSpec]) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    for spec in specs {
        let (first, last) = spec.keyframes.unwrap_or(spec.nominal_keyframes());
        if spec.index % 3 == 0 {
            out.push((spec.index, first + 1));
        }
        if rng.random_bool(0.5) {
            let t = rng.random_range(first + 2..=last);
            out.push((spec.index, t));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

impl VideoSpec {
    fn new(
        profile: Profile,
        times: &TimeRange,
        index: usize,
        id: String,
        split: Split,
        seed: u64,
    ) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let kind = &KINDS[index % KINDS.len()];
        // Only one 720p video: later cycles reuse the kind at 640x360.
        let (width, height) = match profile {
            Profile::Quick if kind.quick_size.0 > 1000 && index >= KINDS.len() => (640, 360),
            Profile::Quick => kind.quick_size,
            Profile::AvaTimes => kind.small_size,
        };
        let duration_s = times.segment_end as i64 + 1;
        let duration_ticks = duration_s * TICKS;
        let frame_ticks = frame_times(&mut rng, kind.rate, duration_ticks);
        let keyframes = match split {
            Split::Test => None,
            // One video annotated over a shorter range, as 57 real AVA videos are.
            _ if index == 1 => Some((
                times.first_keyframe,
                times.last_keyframe - (times.last_keyframe - times.first_keyframe) / 4,
            )),
            _ => Some((times.first_keyframe, times.last_keyframe)),
        };
        let scene_start = match profile {
            Profile::Quick => 0.0,
            Profile::AvaTimes => times.segment_start as f64 - 3.0,
        };
        // Quick videos are short: more actors give every class enough boxes per split.
        let n_actors = match profile {
            Profile::Quick => rng.random_range(5..=7),
            Profile::AvaTimes => rng.random_range(3..=5),
        };
        let hue0 = rng.random_range(0.0..std::f64::consts::TAU);
        let actors = (0..n_actors)
            .map(|a| {
                let hue = hue0 + a as f64 * std::f64::consts::TAU / n_actors as f64;
                let geometry = Geometry::new(width, height);
                plan_actor(
                    &mut rng,
                    a as u32,
                    hue,
                    scene_start,
                    duration_s as f64,
                    &geometry,
                )
            })
            .collect();
        VideoSpec {
            index,
            id,
            split,
            codec: kind.codec,
            container: kind.container,
            width,
            height,
            rate: kind.rate,
            b_frames: kind.b_frames,
            start_ticks: kind.start_ms * TICKS / 1000,
            frame_ticks,
            duration_ticks,
            keyframes,
            scene_start,
            actors,
            seed: rng.random(),
        }
    }

    pub fn file_name(&self) -> String {
        format!("{}.{}", self.id, self.container.ext())
    }

    /// Keyframes the video would have if annotated; used for test-split exclusions.
    fn nominal_keyframes(&self) -> (u32, u32) {
        let last_s = (self.duration_ticks / TICKS) as u32;
        if last_s > 1000 { (902, 1798) } else { (7, 32) }
    }

    pub fn frame_time(&self, i: usize) -> f64 {
        self.frame_ticks[i] as f64 / TICKS as f64
    }

    pub fn rate_text(&self) -> String {
        match self.rate {
            Rate::Constant(n, d) => format!("{n}/{d}"),
            Rate::Variable => "vfr".into(),
        }
    }

    /// What the report says of the video; keyframe seconds on the dataset's clock, whose second
    /// `video_start` is the file's time 0.
    pub fn report(&self, video_start: u32) -> VideoReport {
        VideoReport {
            id: self.id.clone(),
            file_name: self.file_name(),
            split: self.split.name().into(),
            path: super::mirror::video_rel_path(self),
            codec: match self.codec {
                Codec::H264 => "h264".into(),
                Codec::Vp9 => "vp9".into(),
            },
            container: self.container.muxer().into(),
            width: self.width,
            height: self.height,
            frame_rate: self.rate_text(),
            b_frames: self.b_frames,
            frames: self.frame_ticks.len(),
            start_time_s: self.start_ticks as f64 / TICKS as f64,
            duration_s: self.duration_ticks as f64 / TICKS as f64,
            actors: self.actors.len(),
            first_keyframe: self.keyframes.map(|k| k.0 + video_start),
            last_keyframe: self.keyframes.map(|k| k.1 + video_start),
        }
    }

    /// Height of the frame-code band at the top; actors live below it.
    pub fn band_height(&self) -> u32 {
        super::code::band_height(self.width)
    }

    /// Actor geometry at AVA time `t`, or `None` when it is absent (not yet entered or left).
    pub fn actor_state(&self, actor: &Actor, t: f64) -> Option<ActorState> {
        if t < self.scene_start || t < actor.alive.0 || t >= actor.alive.1 {
            return None;
        }
        let seg = actor
            .segments
            .iter()
            .find(|s| t < s.t1)
            .or(actor.segments.last())?;
        let g = Geometry::new(self.width, self.height);
        let dt = t - seg.t0;
        let s = (seg.log_s0 + seg.log_rate * dt).exp();
        let half_h = 0.5 * s * self.height as f64;
        Some(ActorState {
            cx: g.wrap_x(seg.x0 + seg.vx * dt) * self.width as f64,
            cy: g.wrap_y(seg.y0 + seg.vy * dt) * self.height as f64,
            half_w: half_h * actor.aspect,
            half_h,
            theta: seg.theta0 + seg.omega * dt,
            motion: seg.motion,
            spin: seg.spin,
        })
    }
}

/// Frame times from 0 up to (excluding) the duration.
fn frame_times(rng: &mut ChaCha20Rng, rate: Rate, duration_ticks: i64) -> Vec<i64> {
    let mut out = Vec::new();
    match rate {
        Rate::Constant(num, den) => {
            // TICKS * den / num is exact for every rate in KINDS.
            let step = TICKS * den / num;
            let mut t = 0;
            while t < duration_ticks {
                out.push(t);
                t += step;
            }
        }
        Rate::Variable => {
            let mut t = 0;
            while t < duration_ticks {
                out.push(t);
                // Whole milliseconds so Matroska's 1 ms time base stores them exactly.
                t += rng.random_range(25..=50) * TICKS / 1000;
            }
        }
    }
    out
}

/// Where actor centres may be: a torus larger than the frame by the largest half-size, so an
/// actor leaving one edge re-enters at the other without a visible jump, and the position
/// distribution does not depend on the direction of motion.
struct Geometry {
    x_lo: f64,
    x_len: f64,
    y_lo: f64,
    y_len: f64,
}

impl Geometry {
    fn new(width: u32, height: u32) -> Self {
        let band = super::code::band_height(width) as f64 / height as f64;
        let s_max = LOG_S_MAX.exp();
        let mx = 0.5 * s_max * ASPECT_MAX * height as f64 / width as f64 + 0.01;
        let my = 0.5 * s_max + 0.01;
        Geometry {
            x_lo: -mx,
            x_len: 1.0 + 2.0 * mx,
            y_lo: band - my,
            y_len: 1.0 - band + 2.0 * my,
        }
    }
    fn wrap_x(&self, x: f64) -> f64 {
        self.x_lo + (x - self.x_lo).rem_euclid(self.x_len)
    }
    fn wrap_y(&self, y: f64) -> f64 {
        self.y_lo + (y - self.y_lo).rem_euclid(self.y_len)
    }
}

fn plan_actor(
    rng: &mut ChaCha20Rng,
    index: u32,
    hue: f64,
    scene_start: f64,
    end: f64,
    g: &Geometry,
) -> Actor {
    let shape = [Shape::Rect, Shape::Ellipse, Shape::Octagon][rng.random_range(0..3)];
    let chroma = rng.random_range(70.0..100.0);
    let hue = hue + rng.random_range(-0.3..0.3);
    let u = (128.0 + chroma * hue.cos()).round() as u8;
    let v = (128.0 + chroma * hue.sin()).round() as u8;
    let begin = scene_start.floor() - 0.5 - rng.random_range(0..3) as f64;
    // A quarter of the actors enter late and a quarter leave early (at half seconds).
    let alive_from = if rng.random_bool(0.25) {
        begin + rng.random_range(0..((end - begin) as u32 / 2).max(1)) as f64
    } else {
        f64::NEG_INFINITY
    };
    let alive_to = if rng.random_bool(0.25) {
        end - 0.5 - rng.random_range(0..((end - begin) as u32 / 3).max(1)) as f64
    } else {
        f64::INFINITY
    };
    Actor {
        // From 1, as annotation tools number people (CVAT's track 0 is person 1).
        person_id: index + 1,
        shape,
        aspect: rng.random_range(0.6..ASPECT_MAX),
        u,
        v,
        luma_lo: rng.random_range(40..90),
        luma_hi: rng.random_range(150..210),
        stripe: rng.random_range(0.2..0.4),
        alive: (alive_from, alive_to),
        segments: plan_segments(rng, begin, end + 1.0, g),
    }
}

fn plan_segments(rng: &mut ChaCha20Rng, begin: f64, end: f64, g: &Geometry) -> Vec<Segment> {
    let mut x = g.x_lo + rng.random_range(0.0..g.x_len);
    let mut y = g.y_lo + rng.random_range(0.0..g.y_len);
    let mut theta = rng.random_range(0.0..std::f64::consts::PI);
    let mut t0 = begin;
    let mut out = Vec::new();
    // Motions are dealt from shuffled decks of all seven, so every class gets its share of the
    // boxes in every split, not just on average over many videos.
    let mut deck: Vec<Action> = Vec::new();
    while t0 < end {
        let len = rng.random_range(3..=5) as f64;
        if deck.is_empty() {
            deck = MOTIONS.to_vec();
            deck.shuffle(rng);
        }
        let motion = deck.pop().expect("a refilled deck");
        let spin = rng.random_bool(0.3);
        // Fast enough to move an actor 4-6% of the frame within a 4-frame clip at 5 fps.
        let speed_x = rng.random_range(0.18..0.28);
        let speed_y = rng.random_range(0.20..0.30);
        let (vx, vy) = match motion {
            Action::MoveLeft => (-speed_x, 0.0),
            Action::MoveRight => (speed_x, 0.0),
            Action::MoveUp => (0.0, -speed_y),
            Action::MoveDown => (0.0, speed_y),
            _ => (0.0, 0.0),
        };
        let (log_s0, log_rate) = draw_log_size(rng, motion, len);
        let omega = if spin {
            rng.random_range(2.0..3.5) * if rng.random_bool(0.5) { 1.0 } else { -1.0 }
        } else {
            0.0
        };
        out.push(Segment {
            t0,
            t1: t0 + len,
            motion,
            spin,
            x0: x,
            y0: y,
            vx,
            vy,
            log_s0,
            log_rate,
            theta0: theta,
            omega,
        });
        x = g.wrap_x(x + vx * len);
        y = g.wrap_y(y + vy * len);
        theta += omega * len;
        t0 += len;
    }
    out
}

/// Size at segment start and its rate. Grow starts in [min, max - G], shrink in [min + G, max],
/// and every other motion draws a constant size as U[min, max - G] + U[0, G]: all three give the
/// same size distribution over time, so box size reveals nothing about the action.
fn draw_log_size(rng: &mut ChaCha20Rng, motion: Action, len: f64) -> (f64, f64) {
    let low = rng.random_range(LOG_S_MIN..LOG_S_MAX - LOG_GROW);
    match motion {
        Action::Grow => (low, LOG_GROW / len),
        Action::Shrink => (low + LOG_GROW, -LOG_GROW / len),
        _ => (low + rng.random_range(0.0..LOG_GROW), 0.0),
    }
}
