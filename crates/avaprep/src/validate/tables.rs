//! Lenient readers for what validation looks at. The product's readers stop at the first bad
//! line; these keep every row they can and hand each bad one to a check, so one run reports
//! every defect with its file and line.

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use super::CheckResult;
use crate::layout::FolderName;

/// One row of a PySlowFast frame list. AVA's lists hold 8 M rows, a video's rows one name and
/// each frame's rows (six at 30 a second from 5 fps) one path: those are shared, not copied.
#[derive(Debug, Clone, PartialEq)]
pub struct ListRow {
    pub line: u32,
    pub number: i32,
    pub frame_id: i32,
    pub video: Arc<str>,
    pub path: Arc<str>,
}

/// A frame list: its name, the rows that parsed, and the lines that did not (each with the
/// video it sits among, when that can be told), so the rows after a bad one keep their places.
#[derive(Debug, Clone, Default)]
pub struct FrameList {
    pub name: String,
    pub rows: Vec<ListRow>,
    pub malformed: Vec<MalformedRow>,
}

/// A list line that is not a row: it still takes a place among its video's rows, as it would in
/// the file PySlowFast reads.
#[derive(Debug, Clone, PartialEq)]
pub struct MalformedRow {
    pub line: usize,
    /// Its own first token when that is a plain id, else the video of the row before it.
    pub video: Option<String>,
}

impl FrameList {
    /// Every line in file order: a parsed row, or the video a malformed line sits among. Without
    /// malformed lines (the usual case, 8 M rows on AVA) the rows themselves, nothing copied.
    pub fn entries(&self) -> Box<dyn Iterator<Item = (usize, &str, Option<&ListRow>)> + '_> {
        let rows = self
            .rows
            .iter()
            .map(|row| (row.line as usize, &*row.video, Some(row)));
        if self.malformed.is_empty() {
            return Box::new(rows);
        }
        let mut entries: Vec<(usize, &str, Option<&ListRow>)> = rows
            .chain(self.malformed.iter().filter_map(|bad| {
                bad.video
                    .as_deref()
                    .map(|video| (bad.line, video, None::<&ListRow>))
            }))
            .collect();
        entries.sort_by_key(|(line, _, _)| *line);
        Box::new(entries.into_iter())
    }
}

/// One row of a box file (ground truth or person-detector boxes).
#[derive(Debug, Clone, PartialEq)]
pub struct BoxRow {
    pub line: usize,
    pub video: String,
    pub second: i64,
    pub bbox: [f64; 4],
    pub action: Option<i64>,
    /// A detector's score (its boxes only).
    pub score: Option<f64>,
}

#[derive(Debug, Clone, Default)]
pub struct BoxFile {
    pub name: String,
    pub rows: Vec<BoxRow>,
    /// Lines (1-based) whose text repeats an earlier line.
    pub duplicates: Vec<usize>,
    /// Ground truth (not a detector's boxes).
    pub ground_truth: bool,
}

/// What kind of box file: a detector's boxes need their score column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoxKind {
    GroundTruth,
    Predicted,
}

/// PySlowFast's loader reads a list's first line as a header whatever it holds, so a list
/// without one silently loses its first frame.
#[cfg(test)]
pub fn read_frame_list(name: &str, text: &str, format: &mut CheckResult) -> FrameList {
    read_frame_list_from(name, text.as_bytes(), format).expect("a string reads")
}

/// [`read_frame_list`] from a reader, line by line: a list of AVA's size is never held whole.
/// An error is the reader's (not UTF-8 text, a read that failed).
pub fn read_frame_list_from(
    name: &str,
    reader: impl BufRead,
    format: &mut CheckResult,
) -> std::io::Result<FrameList> {
    let mut list = FrameList {
        name: name.to_string(),
        ..FrameList::default()
    };
    let mut lines = reader.lines().enumerate();
    match lines.next().map(|(_, header)| header).transpose()? {
        Some(header) if parse_list_row(1, &header, &list).is_err() => {}
        Some(_) => format.fail(format!(
            "{name}:1: the first line is a frame row; PySlowFast skips the first line as the header, so this frame is lost"
        )),
        None => format.fail(format!("{name}: empty (not even the header line)")),
    }
    for (n, line) in lines {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match parse_list_row(n + 1, &line, &list) {
            Ok(row) => {
                format.pass(1);
                list.rows.push(row);
            }
            Err(problem) => {
                format.fail(format!("{name}:{}: {problem}", n + 1));
                let own = line
                    .split_whitespace()
                    .next()
                    .filter(|token| check_plain_id(token).is_ok());
                let before = list.rows.last().map(|row| &*row.video);
                list.malformed.push(MalformedRow {
                    line: n + 1,
                    video: own.or(before).map(str::to_string),
                });
            }
        }
    }
    Ok(list)
}

/// A row; its video and path shared with the row before when they are the same.
fn parse_list_row(line: usize, text: &str, list: &FrameList) -> Result<ListRow, String> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    if tokens.len() != 5 {
        return Err(format!(
            "{} space-separated tokens; PySlowFast needs exactly 5 (original_vido_id video_id frame_id path labels)",
            tokens.len()
        ));
    }
    check_plain_id(tokens[0])?;
    let number = tokens[1]
        .parse()
        .map_err(|_| format!("video_id `{}` is not an integer", tokens[1]))?;
    let frame_id = tokens[2]
        .parse()
        .map_err(|_| format!("frame_id `{}` is not an integer", tokens[2]))?;
    let path = tokens[3];
    for component in path.split('/') {
        FolderName::try_from(component).map_err(|_| {
            format!("path `{path}` is not a plain relative path inside the frame folder")
        })?;
    }
    let previous = list.rows.last();
    let shared = |text: &str, earlier: Option<&Arc<str>>| match earlier {
        Some(earlier) if **earlier == *text => earlier.clone(),
        _ => Arc::from(text),
    };
    Ok(ListRow {
        line: u32::try_from(line).map_err(|_| "more than 4 billion lines".to_string())?,
        number,
        frame_id,
        video: shared(tokens[0], previous.map(|row| &row.video)),
        path: shared(path, previous.map(|row| &row.path)),
    })
}

/// A quoted or spaced id becomes part of PySlowFast's dictionary key and matches nothing.
fn check_plain_id(id: &str) -> Result<(), String> {
    let plain = !id.is_empty()
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
    if plain {
        Ok(())
    } else {
        Err(format!(
            "video id `{id}` is not plain (letters, digits, `-`, `_`; quotes become part of the key)"
        ))
    }
}

/// A box file as PySlowFast splits it: on commas, no header, no quoting; ground truth has 7 or
/// 8 columns (the 8th a person id), a detector's boxes 8 (the 8th a score).
pub fn read_box_file(name: &str, text: &str, kind: BoxKind, format: &mut CheckResult) -> BoxFile {
    let mut file = BoxFile {
        name: name.to_string(),
        ground_truth: kind == BoxKind::GroundTruth,
        ..BoxFile::default()
    };
    let mut seen = std::collections::HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let line_text = line.trim();
        if line_text.is_empty() {
            continue;
        }
        if !seen.insert(line_text) {
            file.duplicates.push(n + 1);
        }
        match parse_box_row(n + 1, line_text, kind) {
            Ok(row) => {
                format.pass(1);
                file.rows.push(row);
            }
            Err(problem) => format.fail(format!("{name}:{}: {problem}", n + 1)),
        }
    }
    file
}

fn parse_box_row(line: usize, text: &str, kind: BoxKind) -> Result<BoxRow, String> {
    let fields: Vec<&str> = text.split(',').collect();
    let columns_ok = match kind {
        BoxKind::GroundTruth => fields.len() == 7 || fields.len() == 8,
        BoxKind::Predicted => fields.len() == 8,
    };
    if !columns_ok {
        let wanted = match kind {
            BoxKind::GroundTruth => "7 or 8 (video,second,x1,y1,x2,y2,action[,person])",
            BoxKind::Predicted => "8 (video,second,x1,y1,x2,y2,action,score)",
        };
        return Err(format!("{} fields, expected {wanted}", fields.len()));
    }
    check_plain_id(fields[0])?;
    let second = fields[1].parse::<i64>().map_err(|_| {
        format!(
            "second `{}` is not an integer (a header row, or quoting?)",
            fields[1]
        )
    })?;
    let mut bbox = [0.0; 4];
    for (slot, field) in bbox.iter_mut().zip(&fields[2..6]) {
        *slot = field
            .parse::<f64>()
            .ok()
            .filter(|value| value.is_finite())
            .ok_or_else(|| format!("box coordinate `{field}` is not a number"))?;
    }
    let action = match fields[6] {
        "" | "-1" if kind == BoxKind::Predicted => None,
        field => Some(
            field
                .parse::<i64>()
                .map_err(|_| format!("action id `{field}` is not an integer"))?,
        ),
    };
    let score = match kind {
        BoxKind::Predicted => Some(
            fields[7]
                .parse::<f64>()
                .ok()
                .filter(|score| score.is_finite())
                .ok_or_else(|| format!("score `{}` is not a number", fields[7]))?,
        ),
        BoxKind::GroundTruth => None,
    };
    Ok(BoxRow {
        line,
        video: fields[0].to_string(),
        second,
        bbox,
        action,
        score,
    })
}

/// The exclusion file: `video,second` rows.
pub fn read_exclusions(
    name: &str,
    text: &str,
    format: &mut CheckResult,
) -> std::collections::HashSet<(String, i64)> {
    let mut excluded = std::collections::HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let parsed = line.split_once(',').and_then(|(video, second)| {
            check_plain_id(video).ok()?;
            Some((video.to_string(), second.trim().parse::<i64>().ok()?))
        });
        match parsed {
            Some(key) => {
                format.pass(1);
                excluded.insert(key);
            }
            None => format.fail(format!(
                "{name}:{}: expected `video_id,second`, found `{line}`",
                n + 1
            )),
        }
    }
    excluded
}

/// The frame number in PySlowFast's frame name `<id>_NNNNNN.jpg`.
pub fn frame_number(path: &str) -> Option<u32> {
    let name = Path::new(path).file_stem()?.to_str()?;
    let (_, digits) = name.rsplit_once('_')?;
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check() -> CheckResult {
        CheckResult::new(super::super::CheckId::AnnotationFormat)
    }

    #[test]
    fn box_rows_with_a_header_quoting_or_bad_fields_fail_with_their_line() {
        let mut format = check();
        let text = "video_id,second,x1,y1,x2,y2,action\n\"-5KQ66BBWC4\",902,0.1,0.1,0.5,0.5,12\n-5KQ66BBWC4,902,0.1,0.1,0.5,0.5,12,0\n-5KQ66BBWC4,903,0.1,x,0.5,0.5,12\n";
        let file = read_box_file("gt.csv", text, BoxKind::GroundTruth, &mut format);
        assert_eq!(file.rows.len(), 1);
        assert_eq!(format.failed, 3);
        assert!(
            format.examples[0].starts_with("gt.csv:1:"),
            "{:?}",
            format.examples
        );
        assert!(
            format.examples[1].contains("quotes"),
            "{:?}",
            format.examples
        );
    }

    #[test]
    fn predicted_boxes_need_a_score_and_may_have_no_action() {
        let mut format = check();
        let text = "-5KQ66BBWC4,902,0.1,0.1,0.5,0.5,,0.93\n-5KQ66BBWC4,902,0.1,0.1,0.5,0.5,-1\n";
        let file = read_box_file("boxes.csv", text, BoxKind::Predicted, &mut format);
        assert_eq!(file.rows.len(), 1);
        assert_eq!(file.rows[0].action, None);
        assert_eq!(format.failed, 1);
    }

    #[test]
    fn list_rows_need_five_tokens_a_header_and_a_confined_path() {
        let mut format = check();
        let text = "-5KQ66BBWC4 0 0 -5KQ66BBWC4/-5KQ66BBWC4_000001.jpg \"\"\n\
                    -5KQ66BBWC4 0 1 ../../etc/passwd \"\"\n\
                    -5KQ66BBWC4 0 2 -5KQ66BBWC4/-5KQ66BBWC4_000002.jpg\n";
        let list = read_frame_list("train.csv", text, &mut format);
        assert!(list.rows.is_empty());
        assert_eq!(format.failed, 3, "{:?}", format.examples);
        assert!(format.examples[0].contains("header"));
        assert!(format.examples[1].contains("../../etc/passwd"));
    }

    #[test]
    fn frame_numbers_come_from_the_file_name() {
        assert_eq!(frame_number("a_b/a_b_000012.jpg"), Some(12));
        assert_eq!(frame_number("x/frame.jpg"), None);
    }
}
