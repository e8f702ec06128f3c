//! Byte-level machinery shared by the line-oriented readers: line and field
//! splitting, number parsing, and turning a failed line into the most useful
//! error (quoted field, header row) before it is reported.

use std::path::Path;

use super::error::{AnnotationError, LineError};
use super::labels::LabelMap;
use super::types::{ActionId, FrameKey, KeyframeRange, NormBox};
use super::video::VideoId;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Whether a file with no rows is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rows {
    Required,
    MayBeEmpty,
}

pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, AnnotationError> {
    crate::fsutil::read_regular(path, crate::fsutil::FileKind::Table).map_err(|source| {
        AnnotationError::Io {
            path: path.to_owned(),
            source,
        }
    })
}

pub(crate) fn display_name(path: &Path) -> String {
    path.display().to_string()
}

pub(crate) fn line_error(file: &str, line: usize, kind: LineError) -> AnnotationError {
    AnnotationError::Line {
        file: file.to_owned(),
        line,
        kind,
    }
}

/// Parses every non-blank line with `row`, collecting the results.
///
/// CRLF endings are accepted; blank lines are accepted only at the end of the
/// file (a blank line followed by data usually means two files were glued).
pub(crate) fn parse_lines<T>(
    bytes: &[u8],
    file: &str,
    what: &'static str,
    rows: Rows,
    mut row: impl FnMut(usize, &[u8]) -> Result<T, LineError>,
) -> Result<Vec<T>, AnnotationError> {
    if bytes.starts_with(BOM) {
        return Err(line_error(file, 1, LineError::ByteOrderMark));
    }
    let mut out = Vec::with_capacity(memchr::memchr_iter(b'\n', bytes).count() + 1);
    for item in NonBlankLines::new(bytes) {
        let (line_no, line) = item.map_err(|(n, kind)| line_error(file, n, kind))?;
        let value = row(line_no, line).map_err(|kind| {
            let kind = refine(line_no, line, kind);
            line_error(file, line_no, kind)
        })?;
        out.push(value);
    }
    if out.is_empty() && rows == Rows::Required {
        return Err(AnnotationError::Empty {
            file: file.to_owned(),
            what,
        });
    }
    Ok(out)
}

/// Replaces a generic failure by a more telling one: quotes and headers make
/// later fields fail in confusing ways, so they are named first.
fn refine(line_no: usize, line: &[u8], kind: LineError) -> LineError {
    if let Some((column, text)) = quoted_field(line) {
        return LineError::QuotedField { column, text };
    }
    if line_no == 1 && looks_like_header(line) {
        return LineError::Header {
            text: String::from_utf8_lossy(line).into_owned(),
        };
    }
    kind
}

fn quoted_field(line: &[u8]) -> Option<(usize, String)> {
    line.split(|&b| b == b',')
        .enumerate()
        .find(|(_, f)| f.contains(&b'"'))
        .map(|(i, f)| (i + 1, String::from_utf8_lossy(f).into_owned()))
}

/// A header is a line of words (letters, digits, `_`, spaces; each starting
/// with a letter) whose first word names a column, like `video_id`. Only
/// consulted for a first line that already failed to parse.
fn looks_like_header(line: &[u8]) -> bool {
    let is_word = |f: &[u8]| {
        f.first().is_some_and(u8::is_ascii_alphabetic)
            && f.iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b' ')
    };
    let first = line.split(|&b| b == b',').next().unwrap_or_default();
    let first = String::from_utf8_lossy(first).to_ascii_lowercase();
    let names_column = ["video", "id", "name", "time", "file", "second"]
        .iter()
        .any(|w| first.contains(w));
    names_column && line.split(|&b| b == b',').all(is_word)
}

struct NonBlankLines<'a> {
    rest: &'a [u8],
    line_no: usize,
    first_blank: Option<usize>,
}

impl<'a> NonBlankLines<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            rest: bytes,
            line_no: 0,
            first_blank: None,
        }
    }

    fn next_raw(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let (line, rest) = match memchr::memchr(b'\n', self.rest) {
            Some(i) => (&self.rest[..i], &self.rest[i + 1..]),
            None => (self.rest, &self.rest[self.rest.len()..]),
        };
        self.rest = rest;
        self.line_no += 1;
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }
}

impl<'a> Iterator for NonBlankLines<'a> {
    type Item = Result<(usize, &'a [u8]), (usize, LineError)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let line = self.next_raw()?;
            if line.is_empty() {
                self.first_blank.get_or_insert(self.line_no);
                continue;
            }
            if let Some(blank) = self.first_blank {
                self.rest = &[];
                return Some(Err((blank, LineError::BlankLine)));
            }
            return Some(Ok((self.line_no, line)));
        }
    }
}

/// Up to 8 comma-separated fields of a line, plus the total count.
pub(crate) struct Fields<'a> {
    pub count: usize,
    slots: [&'a [u8]; Fields::MAX],
}

impl<'a> Fields<'a> {
    pub const MAX: usize = 8;

    pub fn split(line: &'a [u8]) -> Self {
        let mut slots = [&line[..0]; Self::MAX];
        let mut count = 0;
        let mut start = 0;
        for comma in memchr::memchr_iter(b',', line) {
            if count < Self::MAX {
                slots[count] = &line[start..comma];
            }
            count += 1;
            start = comma + 1;
        }
        if count < Self::MAX {
            slots[count] = &line[start..];
        }
        Self {
            count: count + 1,
            slots,
        }
    }

    /// Field `i` (0-based); empty past the end.
    pub fn get(&self, i: usize) -> &'a [u8] {
        self.slots[i]
    }

    pub fn expect(&self, allowed: &[usize], expected: &'static str) -> Result<(), LineError> {
        if allowed.contains(&self.count) {
            Ok(())
        } else {
            Err(LineError::FieldCount {
                found: self.count,
                expected,
            })
        }
    }
}

fn text(field: &[u8]) -> String {
    String::from_utf8_lossy(field).into_owned()
}

pub(crate) fn parse_video_id(field: &[u8], column: usize) -> Result<VideoId, LineError> {
    VideoId::from_bytes(field).map_err(|reason| LineError::BadVideoId {
        column,
        text: text(field),
        reason,
    })
}

/// Digits only: signs, decimals and spaces are refused because they mean the
/// file was not written by the AVA tooling.
fn parse_digits(field: &[u8], max: u64) -> Option<u64> {
    if field.is_empty() || field.len() > 19 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in field {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value * 10 + u64::from(digit);
    }
    (value <= max).then_some(value)
}

fn bad_number(
    field: &[u8],
    column: usize,
    name: &'static str,
    expected: &'static str,
) -> LineError {
    LineError::BadNumber {
        column,
        name,
        text: text(field),
        expected,
    }
}

pub(crate) fn parse_u32(field: &[u8], column: usize, name: &'static str) -> Result<u32, LineError> {
    parse_digits(field, u64::from(u32::MAX))
        .map(|v| v as u32)
        .ok_or_else(|| {
            bad_number(
                field,
                column,
                name,
                "a non-negative whole number (digits only)",
            )
        })
}

pub(crate) fn parse_second(
    field: &[u8],
    column: usize,
    range: KeyframeRange,
) -> Result<u32, LineError> {
    let second = parse_digits(field, u64::from(u32::MAX))
        .map(|v| v as u32)
        .ok_or_else(|| {
            bad_number(
                field,
                column,
                "timestamp",
                "a whole number of seconds (digits only)",
            )
        })?;
    if !range.contains(second) {
        return Err(LineError::SecondOutOfRange { second, range });
    }
    Ok(second)
}

pub(crate) fn parse_key(fields: &Fields<'_>, range: KeyframeRange) -> Result<FrameKey, LineError> {
    Ok(FrameKey {
        video: parse_video_id(fields.get(0), 1)?,
        second: parse_second(fields.get(1), 2, range)?,
    })
}

pub(crate) fn parse_action(
    field: &[u8],
    column: usize,
    actions: Option<&LabelMap>,
) -> Result<ActionId, LineError> {
    let id = parse_digits(field, u64::from(u16::MAX))
        .map(|v| ActionId(v as u16))
        .ok_or_else(|| bad_number(field, column, "action_id", "an action id (digits only)"))?;
    if id.0 == 0 {
        return Err(LineError::ZeroAction);
    }
    match actions {
        Some(map) if !map.contains(id) => Err(LineError::UnknownAction { id: id.0 }),
        _ => Ok(id),
    }
}

const BOX_NAMES: [&str; 4] = ["x1", "y1", "x2", "y2"];

/// Reads the four box columns starting at 0-based field `first`.
pub(crate) fn parse_box(fields: &Fields<'_>, first: usize) -> Result<NormBox, LineError> {
    let mut v = [0.0f32; 4];
    for (i, slot) in v.iter_mut().enumerate() {
        *slot = parse_f32(fields.get(first + i), first + i + 1, BOX_NAMES[i])?;
    }
    Ok(NormBox::new(v[0], v[1], v[2], v[3])?)
}

pub(crate) fn parse_score(field: &[u8], column: usize) -> Result<f32, LineError> {
    let value = parse_f32(field, column, "score")?;
    if !(0.0..=1.0).contains(&value) {
        return Err(LineError::ScoreOutOfRange {
            column,
            name: "score",
            value,
        });
    }
    Ok(value)
}

pub(crate) fn parse_f32(field: &[u8], column: usize, name: &'static str) -> Result<f32, LineError> {
    if let Some(v) = fast_decimal(field) {
        return Ok(v);
    }
    std::str::from_utf8(field)
        .ok()
        .filter(|s| !s.is_empty() && !s.starts_with('+'))
        .and_then(|s| s.parse::<f32>().ok())
        .ok_or_else(|| bad_number(field, column, name, "a decimal number"))
}

/// Fast path for the `D.DDD` forms AVA writes (at most 7 significant digits).
///
/// The integer mantissa and the power of ten are exact in f64 and the f64
/// quotient is correctly rounded; since f64 has more than 2*24+2 bits,
/// rounding that to f32 equals rounding the exact decimal to f32 directly,
/// i.e. exactly what `str::parse::<f32>` returns. Anything else falls back.
fn fast_decimal(field: &[u8]) -> Option<f32> {
    const POW10: [f64; 8] = [1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7];
    if field.len() > 8 {
        return None;
    }
    let mut mantissa: u32 = 0;
    let mut frac_digits: Option<usize> = None;
    for &b in field {
        match b {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u32::from(b - b'0');
                frac_digits = frac_digits.map(|n| n + 1);
            }
            b'.' if frac_digits.is_none() => frac_digits = Some(0),
            _ => return None,
        }
    }
    let frac = frac_digits.unwrap_or(0);
    // "5." or "." or "": let std decide (it accepts "5." and rejects ".").
    if frac_digits == Some(0) || field.len() == frac + usize::from(frac_digits.is_some()) {
        return None;
    }
    Some((f64::from(mantissa) / POW10[frac]) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(bytes: &[u8]) -> Vec<Result<(usize, String), (usize, LineError)>> {
        NonBlankLines::new(bytes)
            .map(|r| r.map(|(n, l)| (n, text(l))))
            .collect()
    }

    #[test]
    fn line_splitting_handles_crlf_trailing_blank_and_no_final_newline() {
        assert_eq!(
            lines(b"a\r\nb\n\n"),
            vec![Ok((1, "a".into())), Ok((2, "b".into()))]
        );
        assert_eq!(
            lines(b"a\nb"),
            vec![Ok((1, "a".into())), Ok((2, "b".into()))]
        );
        assert_eq!(
            lines(b"a\n\nb\n"),
            vec![Ok((1, "a".into())), Err((2, LineError::BlankLine))]
        );
        assert!(lines(b"").is_empty());
    }

    #[test]
    fn field_splitting_counts_beyond_capacity() {
        let f = Fields::split(b"a,,c");
        assert_eq!(f.count, 3);
        assert_eq!(f.get(1), b"");
        assert_eq!(f.get(2), b"c");
        assert_eq!(Fields::split(b"1,2,3,4,5,6,7,8,9,10").count, 10);
        assert_eq!(Fields::split(b"").count, 1);
    }

    #[test]
    fn fast_decimal_matches_std_exactly() {
        for i in 0..=1_000_000u32 {
            for s in [
                format!("{}.{:06}", i / 1_000_000, i % 1_000_000),
                format!("0.{i:03}"),
            ] {
                let want: f32 = s.parse().unwrap();
                assert_eq!(
                    parse_f32(s.as_bytes(), 1, "x").unwrap().to_bits(),
                    want.to_bits(),
                    "{s}"
                );
            }
        }
        for s in [
            "1",
            "0",
            "12.5",
            "1234567",
            "0.1234567",
            "1.000",
            "5.",
            "1e-05",
            "0.12345678",
        ] {
            let want: f32 = s.parse().unwrap();
            assert_eq!(parse_f32(s.as_bytes(), 1, "x").unwrap(), want, "{s}");
        }
    }

    #[test]
    fn numbers_reject_signs_and_garbage() {
        for s in ["", ".", "+0.5", "0,5", " 0.5", "0.5 ", "abc", "0.5.1"] {
            assert!(parse_f32(s.as_bytes(), 3, "x1").is_err(), "{s:?}");
        }
        for s in ["", "+1", "-1", "1.0", " 1", "1e3", "99999999999999999999"] {
            assert!(parse_u32(s.as_bytes(), 8, "person_id").is_err(), "{s:?}");
        }
        assert_eq!(parse_u32(b"0042", 8, "person_id"), Ok(42));
    }

    #[test]
    fn header_heuristic() {
        assert!(looks_like_header(
            b"video_id,timestamp,x1,y1,x2,y2,action_id,person_id"
        ));
        assert!(looks_like_header(b"timestamp"));
        assert!(looks_like_header(b"file_name"));
        assert!(!looks_like_header(b"abc,0902"));
        assert!(!looks_like_header(b"bad.mkv"));
    }
}
