//! The extracted frames of one video (the extract stage's `frame_index/<id>.csv`, read by the
//! lists stage, validation and the trainer) and the choice of frames for a clip, by time.
//!
//! The contract with the extraction stage: `frames/<id>/<id>_%06d.jpg` (1-based k) and
//! `frame_index/<id>.csv` with
//! `frame,target_seconds,source_seconds,width,height,source_gap_seconds,source_file_seconds`,
//! one row per written frame, where frame k shows the instant `segment_start + (k - 1) / fps`,
//! taken from the source frame at `source_seconds`, the nearer of the two source frames
//! `source_gap_seconds` apart around the target (empty when none precedes it). Times are the
//! dataset's (AVA seconds); `source_file_seconds` is the same frame's time in the video file,
//! which differs for a pre-cut clip (`--video-start 900`: file time 0 is AVA second 900).
//! Indexes written before the gap or the file time were recorded lack those columns. Only frames
//! around annotated keyframes exist, so clips are built from the index's times, never from a
//! frame rate assumed here.

use std::path::Path;

use crate::records::RecordError;

pub const HEADER: &str =
    "frame,target_seconds,source_seconds,width,height,source_gap_seconds,source_file_seconds";
const HEADER_WITHOUT_FILE_TIME: &str =
    "frame,target_seconds,source_seconds,width,height,source_gap_seconds";
const HEADER_WITHOUT_GAP: &str = "frame,target_seconds,source_seconds,width,height";

/// The clip of the trainer's AVA preset: 16 frames, one frame period apart (3.2 s at 5 fps). The
/// report shows this clip's ends when no run says which clip it used.
pub const DEFAULT_CLIP_FRAMES: usize = 16;
pub const DEFAULT_CLIP_STRIDE: u32 = 1;

/// One video's written frames, ascending by number (and so by time).
#[derive(Debug, Clone, PartialEq)]
pub struct FrameIndex {
    pub frames: Vec<u32>,
    pub times: Vec<f64>,
    /// The time of the source frame each frame shows, and the gap between the source frames
    /// around its target (see the module's contract).
    pub source_times: Vec<f64>,
    pub source_gaps: Vec<Option<f64>>,
    /// Whether the index has the gap column (written after gaps were recorded); a row without
    /// a gap then has no source frame before its target.
    pub gaps_recorded: bool,
    /// Seconds between consecutive frame numbers.
    pub period: f64,
    pub width: u32,
    pub height: u32,
}

impl FrameIndex {
    pub fn read(path: &Path) -> Result<Self, RecordError> {
        let text = crate::fsutil::read_regular_text(path, crate::fsutil::FileKind::Table).map_err(
            |source| RecordError::Io {
                path: path.to_path_buf(),
                source,
            },
        )?;
        Self::parse(&text).map_err(|message| RecordError::Invalid {
            path: path.to_path_buf(),
            message,
        })
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let mut lines = text.lines();
        let columns = match lines.next().map(str::trim) {
            Some(HEADER) => 7,
            Some(HEADER_WITHOUT_FILE_TIME) => 6,
            Some(HEADER_WITHOUT_GAP) => 5,
            _ => return Err(format!("the first line must be `{HEADER}`")),
        };
        let mut rows = Vec::new();
        for (n, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            rows.push(parse_row(line, columns).map_err(|e| format!("line {}: {e}", n + 2))?);
        }
        rows.sort_by_key(|r| r.frame);
        Self::from_rows(&rows, columns > 5)
    }

    fn from_rows(rows: &[Row], gaps_recorded: bool) -> Result<Self, String> {
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            return Err("no frames".into());
        };
        if rows
            .windows(2)
            .any(|w| w[0].frame == w[1].frame || w[0].target >= w[1].target)
        {
            return Err("frame numbers must be unique and times must ascend with them".into());
        }
        // target = start + (k - 1) / fps exactly, so any two rows give the period.
        let period = if last.frame > first.frame {
            (last.target - first.target) / f64::from(last.frame - first.frame)
        } else {
            return Err("a clip needs at least two frames to know the frame rate".into());
        };
        Ok(Self {
            frames: rows.iter().map(|r| r.frame).collect(),
            times: rows.iter().map(|r| r.target).collect(),
            source_times: rows.iter().map(|r| r.source).collect(),
            source_gaps: rows.iter().map(|r| r.gap).collect(),
            gaps_recorded,
            period,
            width: first.width,
            height: first.height,
        })
    }

    /// The frame whose target time is nearest `t` (the earlier on a tie).
    pub fn nearest(&self, t: f64) -> u32 {
        self.frames[nearest_position(&self.times, t)]
    }

    /// The frames of a clip of `len` frames, `stride` frame periods apart, around `centre`
    /// (seconds). As in PySlowFast the keyframe is frame `len / 2` of the clip. Instants outside
    /// the extracted frames repeat the nearest frame, as PySlowFast clamps at the video's ends.
    pub fn clip(&self, centre: f64, len: usize, stride: u32) -> Vec<u32> {
        let step = self.period * f64::from(stride);
        (0..len)
            .map(|i| self.nearest(centre + (i as f64 - (len / 2) as f64) * step))
            .collect()
    }

    /// Whether a frame lies within half a period of `t`: a keyframe without one has no frames.
    pub fn covers(&self, t: f64) -> bool {
        let k = self.nearest(t);
        let i = self
            .frames
            .binary_search(&k)
            .expect("nearest returns an indexed frame");
        (self.times[i] - t).abs() <= self.period * 0.5 + 1e-6
    }
}

/// The position in ascending, non-empty `times` of the time nearest `t` (the earlier on a tie).
pub fn nearest_position(times: &[f64], t: f64) -> usize {
    match times.partition_point(|&x| x < t) {
        0 => 0,
        i if i == times.len() => i - 1,
        i if t - times[i - 1] <= times[i] - t => i - 1,
        i => i,
    }
}

struct Row {
    frame: u32,
    target: f64,
    source: f64,
    width: u32,
    height: u32,
    gap: Option<f64>,
}

fn parse_row(line: &str, columns: usize) -> Result<Row, String> {
    let fields: Vec<&str> = line.trim_end_matches(['\r', '\n']).split(',').collect();
    if fields.len() != columns {
        return Err(format!("expected {columns} fields, found {}", fields.len()));
    }
    let bad = |name: &str| format!("field {name} is not a number");
    let frame: u32 = fields[0].trim().parse().map_err(|_| bad("frame"))?;
    let target: f64 = fields[1]
        .trim()
        .parse()
        .map_err(|_| bad("target_seconds"))?;
    let source: f64 = fields[2]
        .trim()
        .parse()
        .map_err(|_| bad("source_seconds"))?;
    let width: u32 = fields[3].trim().parse().map_err(|_| bad("width"))?;
    let height: u32 = fields[4].trim().parse().map_err(|_| bad("height"))?;
    let gap = match fields.get(5).map(|field| field.trim()) {
        None | Some("") => None,
        Some(field) => Some(
            field
                .parse::<f64>()
                .ok()
                .filter(|gap| gap.is_finite() && *gap >= 0.0)
                .ok_or_else(|| bad("source_gap_seconds"))?,
        ),
    };
    if let Some(field) = fields.get(6) {
        field
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|seconds| seconds.is_finite())
            .ok_or_else(|| bad("source_file_seconds"))?;
    }
    if frame == 0 || !target.is_finite() || !source.is_finite() || width == 0 || height == 0 {
        return Err("frame numbers start at 1; times are finite; sizes are positive".into());
    }
    Ok(Row {
        frame,
        target,
        source,
        width,
        height,
        gap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames 1..=5 and 21..=25 of a 5 fps extraction starting at 900 s.
    fn index() -> FrameIndex {
        let mut text = format!("{HEADER}\n");
        for k in (1..=5).chain(21..=25) {
            let t = 900.0 + f64::from(k - 1) / 5.0;
            text.push_str(&format!(
                "{k},{t:.6},{:.6},854,480,0.033,{t:.6}\n",
                t + 0.01
            ));
        }
        FrameIndex::parse(&text).unwrap()
    }

    #[test]
    fn period_comes_from_the_index_not_an_assumed_rate() {
        let index = index();
        assert!((index.period - 0.2).abs() < 1e-9);
        assert_eq!((index.width, index.height), (854, 480));
        assert_eq!(index.source_gaps[0], Some(0.033));
        assert!((index.source_times[0] - 900.01).abs() < 1e-9);
    }

    #[test]
    fn indexes_without_the_file_time_are_read() {
        let text =
            format!("{HEADER_WITHOUT_FILE_TIME}\n1,900.0,900.01,4,4,0.03\n2,900.2,900.2,4,4,\n");
        assert_eq!(FrameIndex::parse(&text).unwrap().frames, vec![1, 2]);
    }

    #[test]
    fn indexes_without_the_gap_column_are_read() {
        let text = format!("{HEADER_WITHOUT_GAP}\n1,900.0,900.01,4,4\n2,900.2,900.2,4,4\n");
        let index = FrameIndex::parse(&text).unwrap();
        assert_eq!(index.source_gaps, vec![None, None]);
        assert!(!index.gaps_recorded);
    }

    #[test]
    fn clips_take_the_nearest_frames_and_centre_on_the_keyframe() {
        let index = index();
        // Keyframe 904.4 s is frame 23; 4 frames at stride 1: 23 - 2 .. 23 + 1.
        assert_eq!(index.clip(904.4, 4, 1), vec![21, 22, 23, 24]);
        assert_eq!(index.clip(904.4, 4, 2), vec![21, 21, 23, 25]);
        // Past the last written frame: the last one repeats.
        assert_eq!(index.clip(904.8, 4, 1), vec![23, 24, 25, 25]);
        assert!(index.covers(904.4));
        assert!(!index.covers(902.0), "in the gap between ranges");
    }

    #[test]
    fn malformed_indexes_are_refused() {
        assert!(FrameIndex::parse("frame,x\n1,2\n").is_err());
        let dup = format!("{HEADER}\n1,900.0,900.0,4,4,\n1,900.2,900.2,4,4,\n");
        assert!(FrameIndex::parse(&dup).is_err());
        let one = format!("{HEADER}\n1,900.0,900.0,4,4,\n");
        assert!(FrameIndex::parse(&one).is_err());
    }
}
