//! Value types shared by the readers and the records they return.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::labels::LabelMap;
use super::video::VideoId;

/// Inclusive range of keyframe seconds a file may mention.
///
/// AVA uses 902..=1798; the synthetic miniature dataset uses other ranges,
/// which is why every reader takes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawRange")]
pub struct KeyframeRange {
    first: u32,
    last: u32,
}

#[derive(Deserialize)]
struct RawRange {
    first: u32,
    last: u32,
}

impl TryFrom<RawRange> for KeyframeRange {
    type Error = String;

    fn try_from(r: RawRange) -> Result<Self, String> {
        Self::new(r.first, r.last)
            .ok_or_else(|| format!("keyframe range {}..={} is empty", r.first, r.last))
    }
}

impl KeyframeRange {
    /// The official AVA v2.2 keyframes.
    pub const AVA: KeyframeRange = KeyframeRange {
        first: 902,
        last: 1798,
    };

    /// `None` when `first > last`.
    pub const fn new(first: u32, last: u32) -> Option<Self> {
        if first > last {
            None
        } else {
            Some(Self { first, last })
        }
    }

    pub const fn first(self) -> u32 {
        self.first
    }

    pub const fn last(self) -> u32 {
        self.last
    }

    pub const fn contains(self, second: u32) -> bool {
        self.first <= second && second <= self.last
    }

    /// Number of keyframes in the range.
    pub const fn len(self) -> u32 {
        self.last - self.first + 1
    }

    /// Never true: a range holds at least one second. Here for clippy's sake.
    pub const fn is_empty(self) -> bool {
        false
    }
}

impl Default for KeyframeRange {
    fn default() -> Self {
        Self::AVA
    }
}

impl fmt::Display for KeyframeRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.first, self.last)
    }
}

/// A box in normalised image coordinates: top-left `(x1, y1)`, bottom-right
/// `(x2, y2)`, each in [0, 1], `x1 <= x2`, `y1 <= y2`.
///
/// Degenerate (zero-width or zero-height) boxes are allowed because the
/// official files contain a few. Fields are private so the invariant holds
/// for every value, including deserialised ones.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawBox")]
pub struct NormBox {
    x1: f32,
    y1: f32,
    x2: f32,
    y2: f32,
}

#[derive(Deserialize)]
struct RawBox {
    x1: f32,
    y1: f32,
    x2: f32,
    y2: f32,
}

impl TryFrom<RawBox> for NormBox {
    type Error = BoxError;

    fn try_from(r: RawBox) -> Result<Self, BoxError> {
        Self::new(r.x1, r.y1, r.x2, r.y2)
    }
}

/// Why four numbers are not a [`NormBox`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum BoxError {
    #[error("box coordinate {name} = {value} is outside [0, 1]")]
    OutOfRange { name: &'static str, value: f32 },
    #[error("box is inverted: {low_name} = {low} is greater than {high_name} = {high}")]
    Inverted {
        low_name: &'static str,
        low: f32,
        high_name: &'static str,
        high: f32,
    },
}

impl NormBox {
    pub fn new(x1: f32, y1: f32, x2: f32, y2: f32) -> Result<Self, BoxError> {
        let named = [("x1", x1), ("y1", y1), ("x2", x2), ("y2", y2)];
        // `contains` is false for NaN, so NaN is rejected here too.
        if let Some(&(name, value)) = named.iter().find(|(_, v)| !(0.0..=1.0).contains(v)) {
            return Err(BoxError::OutOfRange { name, value });
        }
        check_order("x1", x1, "x2", x2)?;
        check_order("y1", y1, "y2", y2)?;
        Ok(Self { x1, y1, x2, y2 })
    }

    pub fn x1(&self) -> f32 {
        self.x1
    }

    pub fn y1(&self) -> f32 {
        self.y1
    }

    pub fn x2(&self) -> f32 {
        self.x2
    }

    pub fn y2(&self) -> f32 {
        self.y2
    }

    /// `[x1, y1, x2, y2]`.
    pub fn to_array(&self) -> [f32; 4] {
        [self.x1, self.y1, self.x2, self.y2]
    }

    pub fn area(&self) -> f32 {
        (self.x2 - self.x1) * (self.y2 - self.y1)
    }

    /// [`iou`] of two boxes.
    pub fn iou(&self, other: &NormBox) -> f64 {
        iou(
            &self.to_array().map(f64::from),
            &other.to_array().map(f64::from),
        )
    }
}

/// Intersection over union of `[x1, y1, x2, y2]` boxes, the one avaprep uses everywhere (training
/// labels, evaluation, the synthetic detector), with the official evaluator's operations in its
/// order (`np_box_ops.iou`: heights, widths, then the union) so it agrees with the evaluator to
/// the last bit. Normalised coordinates: no `+1` on widths. 0 for two empty boxes.
pub fn iou(a: &[f64; 4], b: &[f64; 4]) -> f64 {
    let heights = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let widths = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let intersection = heights * widths;
    let area = |r: &[f64; 4]| (r[3] - r[1]) * (r[2] - r[0]);
    let union = (area(a) + area(b)) - intersection;
    if union > 0.0 {
        intersection / union
    } else {
        0.0
    }
}

fn check_order(
    low_name: &'static str,
    low: f32,
    high_name: &'static str,
    high: f32,
) -> Result<(), BoxError> {
    if low > high {
        return Err(BoxError::Inverted {
            low_name,
            low,
            high_name,
            high,
        });
    }
    Ok(())
}

/// An AVA action class id (1-based; 1..=80 in v2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ActionId(pub u16);

impl fmt::Display for ActionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One keyframe: a video and a whole second. This is the evaluator's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FrameKey {
    pub video: VideoId,
    pub second: u32,
}

impl fmt::Display for FrameKey {
    /// The evaluator's spelling: `video_id,SSSS` with a 4-digit second.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{:04}", self.video, self.second)
    }
}

/// A row of `ava_{train,val}_v2.2.csv`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GroundTruthRow {
    pub key: FrameKey,
    /// `None` for a 2-field row: a keyframe that was annotated and has no boxes.
    pub entry: Option<GroundTruthBox>,
}

/// The box part of a ground-truth row (7 or 8 fields).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GroundTruthBox {
    pub bbox: NormBox,
    pub action: ActionId,
    /// `None` for a 7-field row.
    pub person: Option<u32>,
}

/// Column 7 of a person-detector box row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BoxLabel {
    /// Empty field: val/test detector boxes.
    Unlabelled,
    /// `-1`: a negative box in the `include_negative` train file.
    Negative,
    Action(ActionId),
}

/// A row of a person-detector box list (PySlowFast bundle or
/// `ava_val_predicted_boxes.csv`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PredictedBox {
    pub key: FrameKey,
    pub bbox: NormBox,
    pub label: BoxLabel,
    /// Detector score in [0, 1].
    pub score: f32,
}

/// A row of a detections file (the official submission format).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    pub key: FrameKey,
    pub bbox: NormBox,
    pub action: ActionId,
    /// Score in [0, 1].
    pub score: f32,
}

/// Options for the CSV readers.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions<'a> {
    /// Seconds outside this range are errors.
    pub keyframes: KeyframeRange,
    /// When set, every action id must be in this map.
    pub actions: Option<&'a LabelMap>,
}

impl ReadOptions<'static> {
    /// AVA keyframes, no label-map check.
    pub const AVA: ReadOptions<'static> = ReadOptions {
        keyframes: KeyframeRange::AVA,
        actions: None,
    };
}

impl<'a> ReadOptions<'a> {
    pub fn new(keyframes: KeyframeRange, actions: Option<&'a LabelMap>) -> Self {
        Self { keyframes, actions }
    }
}

impl Default for ReadOptions<'static> {
    fn default() -> Self {
        Self::AVA
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyframe_range() {
        assert_eq!(KeyframeRange::AVA.len(), 897);
        assert!(KeyframeRange::AVA.contains(902));
        assert!(KeyframeRange::AVA.contains(1798));
        assert!(!KeyframeRange::AVA.contains(901));
        assert!(!KeyframeRange::AVA.contains(1799));
        assert_eq!(KeyframeRange::new(5, 4), None);
        assert_eq!(KeyframeRange::AVA.to_string(), "902..=1798");
    }

    #[test]
    fn norm_box_validation() {
        assert!(NormBox::new(0.0, 0.0, 1.0, 1.0).is_ok());
        assert!(
            NormBox::new(0.5, 0.5, 0.5, 0.5).is_ok(),
            "degenerate allowed"
        );
        assert_eq!(
            NormBox::new(0.6, 0.0, 0.5, 1.0),
            Err(BoxError::Inverted {
                low_name: "x1",
                low: 0.6,
                high_name: "x2",
                high: 0.5
            })
        );
        assert!(matches!(
            NormBox::new(0.0, 0.7, 0.5, 0.2),
            Err(BoxError::Inverted { low_name: "y1", .. })
        ));
        assert_eq!(
            NormBox::new(0.0, 0.0, 1.001, 1.0),
            Err(BoxError::OutOfRange {
                name: "x2",
                value: 1.001
            })
        );
        assert!(NormBox::new(f32::NAN, 0.0, 1.0, 1.0).is_err());
        assert!(NormBox::new(-0.1, 0.0, 1.0, 1.0).is_err());
    }

    #[test]
    fn frame_key_display_pads_seconds() {
        let key = FrameKey {
            video: "-5KQ66BBWC4".parse().unwrap(),
            second: 902,
        };
        assert_eq!(key.to_string(), "-5KQ66BBWC4,0902");
    }
}
