//! `Range` / `If-Range` evaluation for a single byte range.

use std::time::SystemTime;

/// Validators of the file being served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Validators {
    pub etag: String,
    pub last_modified: String,
}

impl Validators {
    pub(crate) fn new(len: u64, mtime: SystemTime) -> Self {
        let nanos = mtime
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Self {
            etag: format!("\"{len:x}-{nanos:x}\""),
            last_modified: httpdate::fmt_http_date(mtime),
        }
    }

    /// RFC 9110 13.1.5: an entity tag must match strongly; a date must be
    /// exactly the Last-Modified we would send. Anything else (including
    /// garbage and weak tags) means "do not honour Range".
    fn if_range_matches(&self, value: &str) -> bool {
        let value = value.trim();
        if value.starts_with('"') || value.starts_with("W/") {
            return value == self.etag;
        }
        match (
            httpdate::parse_http_date(value),
            httpdate::parse_http_date(&self.last_modified),
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

/// Which part of the file to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Selection {
    Full,
    /// Inclusive byte range, already clamped to the file.
    Partial {
        first: u64,
        last: u64,
    },
    Unsatisfiable,
}

pub(crate) fn select(
    range: Option<&str>,
    if_range: Option<&str>,
    validators: &Validators,
    len: u64,
) -> Selection {
    let Some(range) = range else {
        return Selection::Full;
    };
    if if_range.is_some_and(|v| !validators.if_range_matches(v)) {
        return Selection::Full;
    }
    parse(range, len).unwrap_or(Selection::Full)
}

/// `None` means the header is invalid or unsupported (multi-range), which
/// RFC 9110 says to answer by ignoring it.
fn parse(header: &str, len: u64) -> Option<Selection> {
    let (unit, spec) = header.trim().split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") || spec.contains(',') {
        return None;
    }
    let (start, end) = spec.trim().split_once('-')?;
    let (start, end) = (start.trim(), end.trim());
    if start.is_empty() {
        return suffix(number(end)?, len);
    }
    let first = number(start)?;
    let last = if end.is_empty() {
        None
    } else {
        Some(number(end)?)
    };
    if last.is_some_and(|l| l < first) {
        return None;
    }
    if first >= len {
        return Some(Selection::Unsatisfiable);
    }
    let last = last.map_or(len - 1, |l| l.min(len - 1));
    Some(Selection::Partial { first, last })
}

fn suffix(n: u64, len: u64) -> Option<Selection> {
    if n == 0 || len == 0 {
        return Some(Selection::Unsatisfiable);
    }
    Some(Selection::Partial {
        first: len.saturating_sub(n),
        last: len - 1,
    })
}

// u64::from_str accepts a leading '+', which the range grammar does not.
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn v() -> Validators {
        Validators::new(
            1000,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000),
        )
    }

    fn p(first: u64, last: u64) -> Selection {
        Selection::Partial { first, last }
    }

    #[test]
    fn parses_single_ranges() {
        let cases = [
            ("bytes=0-99", p(0, 99)),
            ("bytes=100-", p(100, 999)),
            ("bytes=-10", p(990, 999)),
            ("bytes=-5000", p(0, 999)),
            ("bytes=990-5000", p(990, 999)),
            ("BYTES = 5-5", p(5, 5)),
            ("bytes=1000-", Selection::Unsatisfiable),
            ("bytes=-0", Selection::Unsatisfiable),
            ("bytes=0-1,5-6", Selection::Full),
            ("bytes=9-5", Selection::Full),
            ("bytes=+1-2", Selection::Full),
            ("items=0-1", Selection::Full),
            ("bytes=x-", Selection::Full),
        ];
        for (header, want) in cases {
            assert_eq!(select(Some(header), None, &v(), 1000), want, "{header}");
        }
        assert_eq!(
            select(Some("bytes=0-"), None, &v(), 0),
            Selection::Unsatisfiable
        );
    }

    #[test]
    fn if_range_requires_exact_validator() {
        let val = v();
        let r = Some("bytes=0-9");
        assert_eq!(select(r, Some(&val.etag), &val, 1000), p(0, 9));
        assert_eq!(select(r, Some(&val.last_modified), &val, 1000), p(0, 9));
        let weak = format!("W/{}", val.etag);
        for other in [
            "\"nope\"",
            weak.as_str(),
            "Thu, 01 Jan 1970 00:00:00 GMT",
            "junk",
        ] {
            assert_eq!(
                select(r, Some(other), &val, 1000),
                Selection::Full,
                "{other}"
            );
        }
    }

    #[test]
    fn etag_depends_on_size_and_mtime() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(5);
        assert_ne!(Validators::new(1, t).etag, Validators::new(2, t).etag);
        let t2 = t + Duration::from_nanos(1);
        assert_ne!(Validators::new(1, t).etag, Validators::new(1, t2).etag);
    }
}
