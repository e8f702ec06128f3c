//! An export's tracks sampled at a video's keyframes: AVA's rows (one per box and action) on the
//! video's own clock, boxes as fractions of the frame, clipped to it.

use super::export::{At, Browser, ExportedVideo, FrameSize, Motion, Rect, Shape, Track};

/// What the import knows of a video file (from libav): what frame numbers and pixels mean.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoFacts {
    /// Each frame's time, seconds from the first, in presentation order: the frame numbers of
    /// an export count these frames.
    pub frame_times: Vec<f64>,
    /// The file's own timestamp of `frame_times`' 0 (the earliest stream's start), in seconds,
    /// 0 where it is below 0.
    pub first_timestamp: f64,
    /// An MP4 or MOV file (ISO base media).
    pub iso_media: bool,
    /// When its last frame stops being shown ([`crate::media::shown_until`]).
    pub duration: f64,
    pub size: FrameSize,
}

impl VideoFacts {
    /// Where `browser`'s media timeline, which VIA's times are on, puts `frame_times`' 0.
    /// Measured by seeking in MP4 and Matroska files whose video starts at 1.5 s, with and without
    /// audio starting before it: Chromium puts every frame at its own timestamp; Firefox starts
    /// an MP4 or MOV file's timeline at its video's first frame (so its clock's 0 lies before
    /// the timeline's where audio starts first), and a Matroska or WebM file's at the earliest
    /// stream's start. Firefox's frames came out up to 0.09 s later still (B-frames, audio
    /// frames), which is not modelled: far less than the half keyframe interval that decides a
    /// box's keyframe.
    pub fn player_start(&self, browser: Browser) -> f64 {
        match browser {
            Browser::Chromium => self.first_timestamp,
            Browser::Firefox if self.iso_media => -self.frame_times.first().copied().unwrap_or(0.0),
            Browser::Firefox => 0.0,
        }
    }

    /// The last instant with a frame of its own: halfway from the last frame to the video's end,
    /// where that frame is still the nearest.
    /// A keyframe later than this would show the last frame from further away than any other.
    pub fn last_instant(&self) -> f64 {
        let last = self.frame_times.last().copied().unwrap_or(0.0);
        (last + self.duration) / 2.0
    }

    /// The frame shown nearest `t` (the earlier on a tie).
    fn frame_nearest(&self, t: f64) -> u64 {
        crate::frame_index::nearest_position(&self.frame_times, t) as u64
    }

    /// When frame `n` is shown; past the last frame, as far on at the mean rate.
    fn frame_time(&self, n: u64) -> f64 {
        match self.frame_times.get(n as usize) {
            Some(&time) => time,
            None => {
                let count = self.frame_times.len().max(1) as f64;
                n as f64 * self.duration / count
            }
        }
    }
}

/// One box of one person at one keyframe, with its actions, on the video's own clock.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyframeBox {
    /// Whole seconds from the video's start.
    pub second: u32,
    pub person: u32,
    /// x1, y1, x2, y2 as fractions of the frame, inside [0, 1].
    pub corners: [f64; 4],
    pub actions: Vec<String>,
}

/// What sampling changed or left out, for the import's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SampleCounts {
    /// Boxes partly outside the frame, cut to it.
    pub clipped: u64,
    /// Boxes with nothing inside the frame (or no area), left out.
    pub outside_frame: u64,
    /// Boxes with no action, left out: AVA's rows name one each.
    pub without_action: u64,
    /// Instant shapes (keyframe images, VIA regions) further than half a keyframe interval from
    /// any keyframe, left out.
    pub off_keyframe: u64,
}

impl SampleCounts {
    pub fn add(&mut self, other: &SampleCounts) {
        self.clipped += other.clipped;
        self.outside_frame += other.outside_frame;
        self.without_action += other.without_action;
        self.off_keyframe += other.off_keyframe;
    }

    pub fn is_empty(&self) -> bool {
        *self == SampleCounts::default()
    }
}

/// The keyframe seconds of a video: every `interval` seconds from its start up to `last_instant`
/// ([`VideoFacts::last_instant`]).
pub fn keyframe_seconds(last_instant: f64, interval: u32) -> Vec<u32> {
    let interval = interval.max(1);
    (0..)
        .step_by(interval as usize)
        .take_while(|&second| f64::from(second) <= last_instant)
        .collect()
}

/// Every box of `video`'s tracks at its keyframes.
pub fn sample(
    video: &ExportedVideo,
    facts: &VideoFacts,
    keyframes: &[u32],
    interval: u32,
    counts: &mut SampleCounts,
) -> Vec<KeyframeBox> {
    let size = video.frame_size.unwrap_or(facts.size);
    let frame = |at: At| match at {
        At::Frame(frame) => Some(frame),
        At::Seconds(_) | At::PlayerSeconds(..) => None,
    };
    let seconds = |at: At| match at {
        At::Frame(_) => facts.frame_time(frame(at).unwrap_or(0)),
        At::Seconds(seconds) => seconds,
        At::PlayerSeconds(seconds, browser) => seconds - facts.player_start(browser),
    };
    let mut boxes = Vec::new();
    for track in &video.tracks {
        let times: Vec<f64> = track.shapes.iter().map(|shape| seconds(shape.at)).collect();
        // A tool that counts frames shows at keyframe `t` the box of the frame shown nearest
        // `t`: the track is followed frame by frame, not second by second.
        let by_frame = track
            .shapes
            .first()
            .is_some_and(|shape| frame(shape.at).is_some());
        let positions: Vec<f64> = match by_frame {
            true => track
                .shapes
                .iter()
                .map(|shape| frame(shape.at).unwrap_or(0) as f64)
                .collect(),
            false => times.clone(),
        };
        let position_of = |second: u32| match by_frame {
            true => facts.frame_nearest(f64::from(second)) as f64,
            false => f64::from(second),
        };
        let found = match track.motion {
            Motion::Instant => instants_at_keyframes(track, &times, keyframes, interval, counts),
            Motion::Held | Motion::Interpolated => keyframes
                .iter()
                .filter_map(|&second| {
                    track_at(track, &positions, position_of(second))
                        .map(|(shape, at)| (second, shape, at))
                })
                .collect(),
        };
        for (second, shape, corners) in found {
            let Some(corners) = fraction_of_frame(corners, shape.rect, size, counts) else {
                continue;
            };
            if shape.actions.is_empty() {
                counts.without_action += 1;
                continue;
            }
            boxes.push(KeyframeBox {
                second,
                person: track.person,
                corners,
                actions: shape.actions.clone(),
            });
        }
    }
    boxes.sort_by_key(|b| (b.second, b.person));
    boxes
}

/// Each instant shape at the keyframe nearest it (the earlier on a tie), when that keyframe is
/// within half an interval; one shape a keyframe, the nearest.
fn instants_at_keyframes<'a>(
    track: &'a Track,
    times: &[f64],
    keyframes: &[u32],
    interval: u32,
    counts: &mut SampleCounts,
) -> Vec<(u32, &'a Shape, Option<[f64; 4]>)> {
    let half = f64::from(interval.max(1)) / 2.0 + SAME;
    let mut nearest: std::collections::BTreeMap<u32, (f64, &Shape)> = Default::default();
    for (shape, &time) in track.shapes.iter().zip(times) {
        let closest = keyframes
            .iter()
            .map(|&second| (second, (f64::from(second) - time).abs()))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match closest {
            Some((second, distance)) if distance <= half => {
                let better = nearest.get(&second).is_none_or(|(d, _)| distance < *d);
                if better && !shape.outside {
                    nearest.insert(second, (distance, shape));
                }
            }
            _ => counts.off_keyframe += 1,
        }
    }
    nearest
        .into_iter()
        .map(|(second, (_, shape))| (second, shape, pixels(shape.rect)))
        .collect()
}

/// A frame's instant and a keyframe's may differ by rounding: within a millisecond is the same.
const SAME: f64 = 1e-3;

/// The shape of a held or interpolated track in force at `t` and its corners there
/// (interpolated between two shapes for an interpolated track), or none where the person is not
/// in view.
fn track_at<'a>(track: &'a Track, times: &[f64], t: f64) -> Option<(&'a Shape, Option<[f64; 4]>)> {
    let index = times
        .partition_point(|&time| time <= t + SAME)
        .checked_sub(1)?;
    let shape = &track.shapes[index];
    if shape.outside {
        return None;
    }
    let next = track.shapes.get(index + 1).filter(|next| !next.outside);
    let corners = match (track.motion, next, pixels(shape.rect)) {
        (Motion::Interpolated, Some(next), Some(from)) => {
            let to = pixels(next.rect)?;
            let span = times[index + 1] - times[index];
            let share = if span > 0.0 {
                ((t - times[index]) / span).clamp(0.0, 1.0)
            } else {
                0.0
            };
            Some(std::array::from_fn(|i| from[i] + (to[i] - from[i]) * share))
        }
        (_, _, corners) => corners,
    };
    Some((shape, corners))
}

fn pixels(rect: Rect) -> Option<[f64; 4]> {
    match rect {
        Rect::Pixels(corners) => Some(corners),
        Rect::WholeFrame => None,
    }
}

/// Corners in pixels as fractions of the frame, cut to it; none for a box with nothing inside.
fn fraction_of_frame(
    corners: Option<[f64; 4]>,
    rect: Rect,
    size: FrameSize,
    counts: &mut SampleCounts,
) -> Option<[f64; 4]> {
    let Some([x1, y1, x2, y2]) = corners else {
        debug_assert_eq!(rect, Rect::WholeFrame);
        return Some([0.0, 0.0, 1.0, 1.0]);
    };
    let (width, height) = (f64::from(size.width), f64::from(size.height));
    if width == 0.0 || height == 0.0 {
        counts.outside_frame += 1;
        return None;
    }
    let raw = [x1 / width, y1 / height, x2 / width, y2 / height];
    let cut = raw.map(|value| value.clamp(0.0, 1.0));
    // AVA's files keep three decimals: a box must still have an area at that precision.
    if cut[2] - cut[0] < 1e-3 || cut[3] - cut[1] < 1e-3 {
        counts.outside_frame += 1;
        return None;
    }
    if cut != raw {
        counts.clipped += 1;
    }
    Some(cut)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::import::export::Origin;

    fn origin() -> Origin {
        Origin {
            file: PathBuf::from("export.xml"),
            place: "test".into(),
        }
    }

    fn shape(at: At, corners: [f64; 4], outside: bool, action: &str) -> Shape {
        Shape {
            at,
            rect: Rect::Pixels(corners),
            outside,
            actions: if action.is_empty() {
                Vec::new()
            } else {
                vec![action.to_string()]
            },
        }
    }

    fn video(motion: Motion, shapes: Vec<Shape>) -> ExportedVideo {
        ExportedVideo {
            name: "clip25.mp4".into(),
            origin: origin(),
            frame_size: Some(FrameSize {
                width: 100,
                height: 50,
            }),
            last_frame: None,
            tracks: vec![Track {
                person: 3,
                motion,
                shapes,
                origin: origin(),
            }],
        }
    }

    fn facts() -> VideoFacts {
        VideoFacts {
            frame_times: (0..40).map(|n| f64::from(n) / 10.0).collect(),
            first_timestamp: 0.0,
            iso_media: true,
            duration: 4.0,
            size: FrameSize {
                width: 640,
                height: 360,
            },
        }
    }

    #[test]
    fn keyframes_are_whole_seconds_inside_the_video() {
        assert_eq!(keyframe_seconds(3.95, 1), vec![0, 1, 2, 3]);
        assert_eq!(keyframe_seconds(4.0, 2), vec![0, 2, 4]);
        assert_eq!(keyframe_seconds(0.5, 1), vec![0]);
        // Frames every 0.1 s up to 3.9: second 4 would show the frame at 3.9, a period away.
        let facts = facts();
        assert!((facts.last_instant() - 3.95).abs() < 1e-9);
        assert_eq!(keyframe_seconds(facts.last_instant(), 1), vec![0, 1, 2, 3]);
        // A 36 s variable-rate video whose last frame is shown until 36.0 s.
        let vfr = VideoFacts {
            frame_times: vec![0.0, 35.964],
            duration: 36.0,
            ..facts
        };
        assert_eq!(keyframe_seconds(vfr.last_instant(), 1).last(), Some(&35));
    }

    #[test]
    fn an_interpolated_track_is_sampled_between_its_shapes_and_ends_where_it_goes_outside() {
        // Frames at 10 a second: frame 10 is second 1, frame 30 second 3.
        let video = video(
            Motion::Interpolated,
            vec![
                shape(At::Frame(0), [0.0, 0.0, 20.0, 10.0], false, "wave"),
                shape(At::Frame(20), [40.0, 20.0, 60.0, 30.0], false, "fall"),
                shape(At::Frame(30), [40.0, 20.0, 60.0, 30.0], true, ""),
            ],
        );
        let mut counts = SampleCounts::default();
        let boxes = sample(&video, &facts(), &[0, 1, 2, 3], 1, &mut counts);
        let seconds: Vec<u32> = boxes.iter().map(|b| b.second).collect();
        assert_eq!(seconds, vec![0, 1, 2], "outside from second 3 on");
        // Halfway between (0,0,20,10) and (40,20,60,30) at second 1, over a 100x50 frame.
        let middle = boxes[1].corners;
        let expected = [0.2, 0.2, 0.4, 0.4];
        for (got, want) in middle.iter().zip(expected) {
            assert!((got - want).abs() < 1e-9, "{middle:?}");
        }
        assert_eq!(boxes[1].actions, vec!["wave".to_string()]);
        assert_eq!(boxes[2].actions, vec!["fall".to_string()]);
        assert!(boxes.iter().all(|b| b.person == 3));
    }

    #[test]
    fn instants_count_only_at_a_keyframe_near_them_and_held_shapes_hold() {
        let instants = video(
            Motion::Instant,
            vec![
                shape(At::Seconds(1.2), [0.0, 0.0, 50.0, 50.0], false, "wave"),
                shape(At::Seconds(2.5), [0.0, 0.0, 50.0, 50.0], false, "wave"),
            ],
        );
        let mut counts = SampleCounts::default();
        let boxes = sample(&instants, &facts(), &[0, 1, 2, 3], 1, &mut counts);
        let seconds: Vec<u32> = boxes.iter().map(|b| b.second).collect();
        // 2.5 is half a second from both 2 and 3: it counts once, for the earlier.
        assert_eq!(seconds, vec![1, 2]);
        assert_eq!(counts.off_keyframe, 0);
        let boxes = sample(&instants, &facts(), &[0, 3], 1, &mut counts);
        assert_eq!(boxes.len(), 1, "{boxes:?}");
        assert_eq!(counts.off_keyframe, 1, "1.2 s is far from 0 and 3");

        let held = video(
            Motion::Held,
            vec![Shape {
                at: At::Seconds(1.0),
                rect: Rect::WholeFrame,
                outside: false,
                actions: vec!["fight".into(), "fall".into()],
            }],
        );
        let boxes = sample(&held, &facts(), &[0, 1, 2, 3], 1, &mut counts);
        assert_eq!(boxes.len(), 3, "from second 1 to the end");
        assert_eq!(boxes[0].corners, [0.0, 0.0, 1.0, 1.0]);
        assert_eq!(boxes[0].actions.len(), 2);
    }

    #[test]
    fn boxes_are_clipped_to_the_frame_and_counted() {
        let video = video(
            Motion::Instant,
            vec![
                shape(At::Seconds(0.0), [-10.0, 10.0, 50.0, 60.0], false, "wave"),
                shape(At::Seconds(1.0), [200.0, 0.0, 300.0, 50.0], false, "wave"),
                shape(At::Seconds(2.0), [10.0, 10.0, 20.0, 20.0], false, ""),
            ],
        );
        let mut counts = SampleCounts::default();
        let boxes = sample(&video, &facts(), &[0, 1, 2], 1, &mut counts);
        assert_eq!(boxes.len(), 1);
        assert_eq!(boxes[0].corners, [0.0, 0.2, 0.5, 1.0]);
        assert_eq!(counts.clipped, 1);
        assert_eq!(counts.outside_frame, 1);
        assert_eq!(counts.without_action, 1);
    }

    /// A file whose clock (its sound) starts at 1.2 s and its video at 1.9 s: the video's first
    /// frame is at 0.7 s on the clock. A box at the clock's second 1 and a segment from its
    /// second 2 are where each browser showed them: Chromium at the file's own timestamps,
    /// Firefox from the video's first frame (MP4) or from the clock's 0 (Matroska).
    #[test]
    fn via_times_are_read_on_the_timeline_of_the_browser_and_container() {
        let file = VideoFacts {
            frame_times: (7..40).map(|n| f64::from(n) / 10.0).collect(),
            first_timestamp: 1.2,
            ..facts()
        };
        let matroska = VideoFacts {
            iso_media: false,
            ..file.clone()
        };
        let via = |box_at: f64, segment_from: f64, browser: Browser| {
            let instant = video(
                Motion::Instant,
                vec![shape(
                    At::PlayerSeconds(box_at, browser),
                    [0.0, 0.0, 50.0, 50.0],
                    false,
                    "wave",
                )],
            );
            let segment = video(
                Motion::Held,
                vec![Shape {
                    at: At::PlayerSeconds(segment_from, browser),
                    rect: Rect::WholeFrame,
                    outside: false,
                    actions: vec!["fall".into()],
                }],
            );
            (instant, segment)
        };
        for (facts, box_at, segment_from, browser) in [
            (&file, 2.2, 3.2, Browser::Chromium),
            (&file, 0.3, 1.3, Browser::Firefox),
            (&matroska, 2.2, 3.2, Browser::Chromium),
            (&matroska, 1.0, 2.0, Browser::Firefox),
        ] {
            let (instant, segment) = via(box_at, segment_from, browser);
            let mut counts = SampleCounts::default();
            let seconds = |video: &ExportedVideo, counts: &mut SampleCounts| -> Vec<u32> {
                let boxes = sample(video, facts, &[0, 1, 2, 3], 1, counts);
                boxes.iter().map(|b| b.second).collect()
            };
            let case = format!("{browser:?}, MP4 {}", facts.iso_media);
            assert_eq!(seconds(&instant, &mut counts), [1], "{case}");
            assert_eq!(seconds(&segment, &mut counts), [2, 3], "{case}");
        }
    }
}
