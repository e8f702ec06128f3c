//! Readers for the comma-separated box files: ground truth, person-detector
//! boxes, detections (submission format) and excluded timestamps.

use std::path::Path;

use super::error::{AnnotationError, LineError};
use super::lines::{
    Fields, Rows, display_name, parse_action, parse_box, parse_key, parse_lines, parse_score,
    parse_u32, read_file,
};
use super::types::{
    BoxLabel, Detection, FrameKey, GroundTruthBox, GroundTruthRow, KeyframeRange, PredictedBox,
    ReadOptions,
};

/// Reads `ava_{train,val}_v2.2.csv`: 8 fields, or 7 (no person id), or 2 (a
/// keyframe without boxes). An empty file is an error.
pub fn read_ground_truth(
    path: &Path,
    options: &ReadOptions<'_>,
) -> Result<Vec<GroundTruthRow>, AnnotationError> {
    parse_ground_truth(&read_file(path)?, &display_name(path), options)
}

/// [`read_ground_truth`] for bytes already in memory; `file` names them in errors.
pub fn parse_ground_truth(
    bytes: &[u8],
    file: &str,
    options: &ReadOptions<'_>,
) -> Result<Vec<GroundTruthRow>, AnnotationError> {
    parse_lines(bytes, file, "ground truth", Rows::Required, |_, line| {
        ground_truth_row(line, options)
    })
}

fn ground_truth_row(line: &[u8], options: &ReadOptions<'_>) -> Result<GroundTruthRow, LineError> {
    let f = Fields::split(line);
    f.expect(&[2, 7, 8], "2, 7 or 8")?;
    let key = parse_key(&f, options.keyframes)?;
    if f.count == 2 {
        return Ok(GroundTruthRow { key, entry: None });
    }
    let bbox = parse_box(&f, 2)?;
    let action = parse_action(f.get(6), 7, options.actions)?;
    let person = match f.count {
        8 => Some(parse_u32(f.get(7), 8, "person_id")?),
        _ => None,
    };
    Ok(GroundTruthRow {
        key,
        entry: Some(GroundTruthBox {
            bbox,
            action,
            person,
        }),
    })
}

/// Reads a person-detector box list (`ava_detection_*_boxes_and_labels*.csv`,
/// `ava_val_predicted_boxes.csv`): 8 fields, label in column 7 (empty, `-1`
/// or an action id), score in [0, 1] in column 8. An empty file is an error.
pub fn read_predicted_boxes(
    path: &Path,
    options: &ReadOptions<'_>,
) -> Result<Vec<PredictedBox>, AnnotationError> {
    parse_predicted_boxes(&read_file(path)?, &display_name(path), options)
}

/// [`read_predicted_boxes`] for bytes already in memory.
pub fn parse_predicted_boxes(
    bytes: &[u8],
    file: &str,
    options: &ReadOptions<'_>,
) -> Result<Vec<PredictedBox>, AnnotationError> {
    parse_lines(bytes, file, "predicted boxes", Rows::Required, |_, line| {
        predicted_box_row(line, options)
    })
}

fn predicted_box_row(line: &[u8], options: &ReadOptions<'_>) -> Result<PredictedBox, LineError> {
    let f = Fields::split(line);
    f.expect(&[8], "8")?;
    let key = parse_key(&f, options.keyframes)?;
    let bbox = parse_box(&f, 2)?;
    let label = match f.get(6) {
        b"" => BoxLabel::Unlabelled,
        b"-1" => BoxLabel::Negative,
        field => BoxLabel::Action(parse_action(field, 7, options.actions)?),
    };
    let score = parse_score(f.get(7), 8)?;
    Ok(PredictedBox {
        key,
        bbox,
        label,
        score,
    })
}

/// Reads a detections file in the official submission format
/// (`video_id,timestamp,x1,y1,x2,y2,action_id,score`). An empty file is
/// accepted: a model may legitimately detect nothing.
pub fn read_detections(
    path: &Path,
    options: &ReadOptions<'_>,
) -> Result<Vec<Detection>, AnnotationError> {
    parse_detections(&read_file(path)?, &display_name(path), options)
}

/// [`read_detections`] for bytes already in memory.
pub fn parse_detections(
    bytes: &[u8],
    file: &str,
    options: &ReadOptions<'_>,
) -> Result<Vec<Detection>, AnnotationError> {
    parse_lines(bytes, file, "detections", Rows::MayBeEmpty, |_, line| {
        detection_row(line, options)
    })
}

fn detection_row(line: &[u8], options: &ReadOptions<'_>) -> Result<Detection, LineError> {
    let f = Fields::split(line);
    f.expect(&[8], "8")?;
    Ok(Detection {
        key: parse_key(&f, options.keyframes)?,
        bbox: parse_box(&f, 2)?,
        action: parse_action(f.get(6), 7, options.actions)?,
        score: parse_score(f.get(7), 8)?,
    })
}

/// Reads `ava_*_excluded_timestamps_v2.2.csv` (`video_id,timestamp`). An
/// empty file is accepted: having nothing to exclude is valid.
pub fn read_excluded_timestamps(
    path: &Path,
    keyframes: KeyframeRange,
) -> Result<Vec<FrameKey>, AnnotationError> {
    parse_excluded_timestamps(&read_file(path)?, &display_name(path), keyframes)
}

/// [`read_excluded_timestamps`] for bytes already in memory.
pub fn parse_excluded_timestamps(
    bytes: &[u8],
    file: &str,
    keyframes: KeyframeRange,
) -> Result<Vec<FrameKey>, AnnotationError> {
    parse_lines(
        bytes,
        file,
        "excluded timestamps",
        Rows::MayBeEmpty,
        |_, line| {
            let f = Fields::split(line);
            f.expect(&[2], "2")?;
            parse_key(&f, keyframes)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::labels::{Label, LabelMap};
    use crate::annotations::types::ActionId;

    const GOOD: &str = "1j20qq1JyX4,0902,0.002,0.118,0.714,0.977,12,1\n";

    fn gt(text: &str) -> Result<Vec<GroundTruthRow>, AnnotationError> {
        parse_ground_truth(text.as_bytes(), "data/gt.csv", &ReadOptions::AVA)
    }

    fn gt_err(text: &str) -> String {
        gt(text).unwrap_err().to_string()
    }

    #[test]
    fn ground_truth_row_shapes() {
        let rows = gt(&format!(
            "{GOOD}1j20qq1JyX4,0903\r\n-5KQ66BBWC4,1798,0,0,1,1,80\r\n\n"
        ))
        .unwrap();
        assert_eq!(rows.len(), 3);
        let first = rows[0].entry.unwrap();
        assert_eq!(rows[0].key.to_string(), "1j20qq1JyX4,0902");
        assert_eq!(first.bbox.to_array(), [0.002, 0.118, 0.714, 0.977]);
        assert_eq!(first.action, ActionId(12));
        assert_eq!(first.person, Some(1));
        assert_eq!(rows[1].entry, None);
        assert_eq!(rows[1].key.second, 903);
        assert_eq!(rows[2].entry.unwrap().person, None);
        assert_eq!(rows[2].key.video.as_str(), "-5KQ66BBWC4");
    }

    #[test]
    fn error_io_names_path() {
        let e = read_ground_truth(Path::new("/nonexistent/dir/gt.csv"), &ReadOptions::AVA)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/nonexistent/dir/gt.csv: cannot read: "),
            "{e}"
        );
    }

    #[test]
    fn error_field_count() {
        assert_eq!(
            gt(&format!("{GOOD}1j20qq1JyX4,0902,0.1,0.1,0.2\n"))
                .unwrap_err()
                .to_string(),
            "data/gt.csv:2: found 5 fields, expected 2, 7 or 8"
        );
        assert_eq!(
            gt_err("1j20qq1JyX4,0902,0.1,0.1,0.2,0.2,1,1,9,9\n"),
            "data/gt.csv:1: found 10 fields, expected 2, 7 or 8"
        );
    }

    #[test]
    fn error_bad_number() {
        assert_eq!(
            gt_err("1j20qq1JyX4,0902,0.1,abc,0.2,0.2,1,1"),
            "data/gt.csv:1: column 4 (y1): \"abc\" is not a decimal number"
        );
        assert_eq!(
            gt_err("1j20qq1JyX4,0902,0.1,0.1,0.2,0.2,1,-1"),
            "data/gt.csv:1: column 8 (person_id): \"-1\" is not a non-negative whole number (digits only)"
        );
        assert_eq!(
            gt_err("1j20qq1JyX4,0902,0.1,0.1,0.2,0.2,1.5,1"),
            "data/gt.csv:1: column 7 (action_id): \"1.5\" is not an action id (digits only)"
        );
    }

    #[test]
    fn error_timestamp_not_digits() {
        for bad in ["902.0", "+902", "-902", "9o2", ""] {
            assert_eq!(
                gt_err(&format!("1j20qq1JyX4,{bad}")),
                format!(
                    "data/gt.csv:1: column 2 (timestamp): {bad:?} is not a whole number of seconds (digits only)"
                )
            );
        }
        assert_eq!(gt("1j20qq1JyX4,902").unwrap()[0].key.second, 902);
    }

    #[test]
    fn error_box() {
        assert_eq!(
            gt_err("1j20qq1JyX4,0902,0.1,0.1,1.2,0.2,1,1"),
            "data/gt.csv:1: box coordinate x2 = 1.2 is outside [0, 1]"
        );
        assert_eq!(
            gt_err("1j20qq1JyX4,0902,0.5,0.1,0.4,0.2,1,1"),
            "data/gt.csv:1: box is inverted: x1 = 0.5 is greater than x2 = 0.4"
        );
        assert_eq!(
            gt_err("1j20qq1JyX4,0902,0.1,0.3,0.4,0.2,1,1"),
            "data/gt.csv:1: box is inverted: y1 = 0.3 is greater than y2 = 0.2"
        );
        assert!(
            gt("1j20qq1JyX4,0902,0.1,0.2,0.1,0.2,1,1").is_ok(),
            "degenerate box"
        );
    }

    #[test]
    fn error_second_out_of_range() {
        assert_eq!(
            gt_err(&format!("{GOOD}1j20qq1JyX4,0901,0.1,0.1,0.2,0.2,1,1")),
            "data/gt.csv:2: second 901 is outside the keyframe range 902..=1798"
        );
        let mini = ReadOptions::new(KeyframeRange::new(2, 10).unwrap(), None);
        let rows = parse_ground_truth(b"1j20qq1JyX4,0002", "m.csv", &mini).unwrap();
        assert_eq!(rows[0].key.second, 2);
    }

    #[test]
    fn error_unknown_and_zero_action() {
        let map = LabelMap::new(vec![Label {
            id: ActionId(12),
            name: "stand".into(),
            kind: None,
        }])
        .unwrap();
        let opts = ReadOptions::new(KeyframeRange::AVA, Some(&map));
        assert!(parse_ground_truth(GOOD.as_bytes(), "gt.csv", &opts).is_ok());
        let e = parse_ground_truth(b"1j20qq1JyX4,0902,0.1,0.1,0.2,0.2,2,1", "gt.csv", &opts);
        assert_eq!(
            e.unwrap_err().to_string(),
            "gt.csv:1: action id 2 is not in the label map"
        );
        assert_eq!(
            gt_err("1j20qq1JyX4,0902,0.1,0.1,0.2,0.2,0,1"),
            "data/gt.csv:1: action id 0 is invalid: AVA action ids start at 1"
        );
    }

    #[test]
    fn error_quoted_field() {
        assert_eq!(
            gt_err("\"1j20qq1JyX4\",0902,0.1,0.1,0.2,0.2,1,1"),
            "data/gt.csv:1: column 1 is quoted (\"1j20qq1JyX4\"); AVA files are unquoted and PySlowFast would keep the quotes as part of the key"
        );
        let e = gt(&format!("{GOOD}1j20qq1JyX4,\"0902\",0.1,0.1,0.2,0.2,1,1")).unwrap_err();
        assert_eq!(e.line(), Some(2));
        assert!(matches!(
            e.kind(),
            Some(LineError::QuotedField { column: 2, .. })
        ));
    }

    #[test]
    fn error_header() {
        assert_eq!(
            gt_err(&format!(
                "video_id,timestamp,x1,y1,x2,y2,action_id,person_id\n{GOOD}"
            )),
            "data/gt.csv:1: the first line looks like a header row (\"video_id,timestamp,x1,y1,x2,y2,action_id,person_id\"); AVA annotation files have no header"
        );
    }

    #[test]
    fn error_invalid_video_id() {
        assert_eq!(
            gt_err("cam 3,0902"),
            "data/gt.csv:1: column 1 (video_id): invalid video id \"cam 3\": character 4 is ' '; allowed are A-Z, a-z, 0-9, '-' and '_'"
        );
        assert_eq!(
            gt_err(&format!("{GOOD}../etc/pass,0902")),
            "data/gt.csv:2: column 1 (video_id): invalid video id \"../etc/pass\": character 1 is '.'; allowed are A-Z, a-z, 0-9, '-' and '_'"
        );
    }

    #[test]
    fn error_empty_blank_and_bom() {
        for empty in ["", "\n", "\r\n\n"] {
            assert_eq!(
                gt_err(empty),
                "data/gt.csv: the ground truth file has no rows; an empty file here usually means a truncated or wrong download"
            );
        }
        assert_eq!(
            gt_err(&format!("{GOOD}\n{GOOD}")),
            "data/gt.csv:2: blank line before the end of the file"
        );
        assert_eq!(
            gt_err(&format!("\u{feff}{GOOD}")),
            "data/gt.csv:1: the file starts with a UTF-8 byte order mark"
        );
    }

    #[test]
    fn predicted_boxes_labels_and_score() {
        let rows = parse_predicted_boxes(
            b"1j20qq1JyX4,0902,0.036,0.098,0.550,0.979,,0.995518\n\
              1j20qq1JyX4,0902,0.036,0.098,0.550,0.979,-1,0.5\n\
              1j20qq1JyX4,0902,0.036,0.098,0.550,0.979,17,1\n",
            "p.csv",
            &ReadOptions::AVA,
        )
        .unwrap();
        let labels: Vec<BoxLabel> = rows.iter().map(|r| r.label).collect();
        assert_eq!(
            labels,
            [
                BoxLabel::Unlabelled,
                BoxLabel::Negative,
                BoxLabel::Action(ActionId(17))
            ]
        );
        assert_eq!(rows[0].score, 0.995518);
        let e = parse_predicted_boxes(
            b"1j20qq1JyX4,0902,0.036,0.098,0.550,0.979,,1.5\n",
            "p.csv",
            &ReadOptions::AVA,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "p.csv:1: column 8 (score): score 1.5 is outside [0, 1]"
        );
        let e = parse_predicted_boxes(
            b"1j20qq1JyX4,0902,0.036,0.098,0.550,0.979,-2,0.5\n",
            "p.csv",
            &ReadOptions::AVA,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "p.csv:1: column 7 (action_id): \"-2\" is not an action id (digits only)"
        );
        let e = parse_predicted_boxes(
            b"1j20qq1JyX4,0902,0.036,0.098,0.550,0.979,",
            "p.csv",
            &ReadOptions::AVA,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "p.csv:1: found 7 fields, expected 8"
        );
    }

    #[test]
    fn detections_require_action_and_score() {
        let ok = parse_detections(
            b"1j20qq1JyX4,0902,0.036,0.098,0.550,0.979,12,0.0123\n",
            "det.csv",
            &ReadOptions::AVA,
        )
        .unwrap();
        assert_eq!(ok[0].action, ActionId(12));
        assert_eq!(ok[0].score, 0.0123);
        assert!(
            parse_detections(b"", "det.csv", &ReadOptions::AVA)
                .unwrap()
                .is_empty()
        );
        let e = parse_detections(
            b"1j20qq1JyX4,0902,0.036,0.098,0.550,0.979,,0.5\n",
            "det.csv",
            &ReadOptions::AVA,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "det.csv:1: column 7 (action_id): \"\" is not an action id (digits only)"
        );
        let e = parse_detections(
            b"1j20qq1JyX4,0902,0.036,0.098,0.550,0.979,3,\n",
            "det.csv",
            &ReadOptions::AVA,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "det.csv:1: column 8 (score): \"\" is not a decimal number"
        );
    }

    #[test]
    fn excluded_timestamps() {
        let rows = parse_excluded_timestamps(
            b"-5KQ66BBWC4,0902\r\n_-Z6wFjXtGQ,1798",
            "ex.csv",
            KeyframeRange::AVA,
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].to_string(), "_-Z6wFjXtGQ,1798");
        assert!(
            parse_excluded_timestamps(b"", "ex.csv", KeyframeRange::AVA)
                .unwrap()
                .is_empty()
        );
        let e = parse_excluded_timestamps(b"-5KQ66BBWC4,0902,1", "ex.csv", KeyframeRange::AVA);
        assert_eq!(
            e.unwrap_err().to_string(),
            "ex.csv:1: found 3 fields, expected 2"
        );
    }
}
