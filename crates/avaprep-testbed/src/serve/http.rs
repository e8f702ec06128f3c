//! Minimal HTTP/1.x request-head parsing and response-head formatting.

use std::io::{self, BufRead, Read};

const MAX_LINE: u64 = 8 * 1024;
const MAX_HEADERS: usize = 100;

#[derive(Debug)]
pub(crate) struct RequestHead {
    pub method: String,
    pub target: String,
    pub http11: bool,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
}

#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed (or timed out) between requests: not an error.
    Closed,
    Malformed,
    TooLarge,
}

impl RequestHead {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn connection_has(&self, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n == "connection")
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    pub(crate) fn keep_alive(&self) -> bool {
        if self.http11 {
            !self.connection_has("close")
        } else {
            self.connection_has("keep-alive")
        }
    }

    /// GET/HEAD bodies are never read; a request announcing one makes the
    /// connection unusable afterwards, so we answer and close.
    pub(crate) fn has_body(&self) -> bool {
        self.header("transfer-encoding").is_some()
            || self
                .header("content-length")
                .is_some_and(|v| v.trim() != "0")
    }
}

pub(crate) fn read_head<R: BufRead>(reader: &mut R) -> Result<RequestHead, ReadError> {
    let mut line = Vec::new();
    // RFC 9112 2.2: ignore empty lines before the request line.
    loop {
        match read_line(reader, &mut line)? {
            None => return Err(ReadError::Closed),
            Some([]) => continue,
            Some(_) => break,
        }
    }
    let (method, target, http11) = parse_request_line(&line)?;
    let mut headers = Vec::new();
    loop {
        let l = read_line(reader, &mut line)?.ok_or(ReadError::Malformed)?;
        if l.is_empty() {
            break;
        }
        if headers.len() == MAX_HEADERS {
            return Err(ReadError::TooLarge);
        }
        headers.push(parse_header(l)?);
    }
    Ok(RequestHead {
        method,
        target,
        http11,
        headers,
    })
}

/// Reads one line without its terminator; `None` on EOF before any byte.
fn read_line<'a, R: BufRead>(
    reader: &mut R,
    buf: &'a mut Vec<u8>,
) -> Result<Option<&'a [u8]>, ReadError> {
    buf.clear();
    let n = reader
        .by_ref()
        .take(MAX_LINE)
        .read_until(b'\n', buf)
        .map_err(|_: io::Error| ReadError::Closed)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(if n as u64 == MAX_LINE {
            ReadError::TooLarge
        } else {
            ReadError::Closed
        });
    }
    buf.pop();
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(buf))
}

fn parse_request_line(line: &[u8]) -> Result<(String, String, bool), ReadError> {
    let line = std::str::from_utf8(line).map_err(|_| ReadError::Malformed)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Malformed);
    };
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(ReadError::Malformed),
    };
    if method.is_empty() || target.is_empty() {
        return Err(ReadError::Malformed);
    }
    Ok((method.to_owned(), target.to_owned(), http11))
}

fn parse_header(line: &[u8]) -> Result<(String, String), ReadError> {
    let line = std::str::from_utf8(line).map_err(|_| ReadError::Malformed)?;
    let (name, value) = line.split_once(':').ok_or(ReadError::Malformed)?;
    // Obsolete line folding and "Name :" are both rejected by RFC 9112.
    if name.is_empty() || name.contains([' ', '\t']) {
        return Err(ReadError::Malformed);
    }
    Ok((name.to_ascii_lowercase(), value.trim().to_owned()))
}

/// A response status line plus headers, rendered in one buffer so that small
/// responses go out in a single write.
pub(crate) struct ResponseHead {
    buf: Vec<u8>,
}

impl ResponseHead {
    pub(crate) fn new(status: u16) -> Self {
        let mut head = Self { buf: Vec::new() };
        head.buf
            .extend_from_slice(format!("HTTP/1.1 {status} {}\r\n", reason(status)).as_bytes());
        head.header("Server", "avaprep-serve");
        head.header(
            "Date",
            httpdate::fmt_http_date(std::time::SystemTime::now()),
        );
        head
    }

    pub(crate) fn header(&mut self, name: &str, value: impl std::fmt::Display) -> &mut Self {
        self.buf
            .extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        self
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(b"\r\n");
        self.buf
    }
}

pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<RequestHead, ReadError> {
        read_head(&mut io::Cursor::new(raw.as_bytes().to_vec()))
    }

    #[test]
    fn parses_request_head() {
        let h = parse("\r\nGET /a?b HTTP/1.1\r\nHost: x\r\nRange:  bytes=0-1 \r\n\r\n").unwrap();
        assert_eq!((h.method.as_str(), h.target.as_str()), ("GET", "/a?b"));
        assert_eq!(h.header("range"), Some("bytes=0-1"));
        assert!(h.keep_alive() && !h.has_body());
        let h = parse("GET / HTTP/1.1\nConnection: keep-alive, Close\n\n").unwrap();
        assert!(!h.keep_alive());
        let h = parse("GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(!h.keep_alive());
    }

    #[test]
    fn rejects_bad_heads() {
        assert!(matches!(parse(""), Err(ReadError::Closed)));
        assert!(matches!(parse("GET /\r\n\r\n"), Err(ReadError::Malformed)));
        assert!(matches!(
            parse("GET / HTTP/2\r\n\r\n"),
            Err(ReadError::Malformed)
        ));
        assert!(matches!(
            parse("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"),
            Err(ReadError::Malformed)
        ));
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(10_000));
        assert!(matches!(parse(&long), Err(ReadError::TooLarge)));
    }
}
