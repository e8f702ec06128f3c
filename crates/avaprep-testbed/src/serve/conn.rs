//! One connection: read requests, answer them, apply faults.

use super::http::{self, ReadError, RequestHead, ResponseHead};
use super::paths::{self, Resolved};
use super::range::{self, Selection, Validators};
use super::server::Shared;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant, SystemTime};

/// Body bytes per write. Large writes keep syscall overhead negligible when
/// the server is benchmarked against curl on multi-GB files.
const CHUNK: usize = 256 * 1024;
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// How a request is to misbehave; always the default (a correct answer) unless the
/// `fault-injection` feature's plan says otherwise.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Selected {
    pub status: Option<(u16, Option<u64>)>,
    pub ignore_range: bool,
    pub drop_after: Option<u64>,
    pub slow: Option<u64>,
    pub declared_delta: Option<i64>,
    pub corrupt_at: Option<u64>,
}

/// Path of the JSON statistics endpoint (only when `expose_stats` is on).
pub const STATS_PATH: &str = "/__avaprep/stats";

pub(crate) fn serve_connection(shared: &Shared, stream: TcpStream) {
    // Nodelay: a small response must not wait for the client's delayed ACK.
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut out = stream;
    while !shared.is_stopping() {
        let keep_going = match http::read_head(&mut reader) {
            Ok(head) => Exchange::new(shared, &mut out, &head).run(&head),
            Err(ReadError::Closed) => false,
            Err(ReadError::Malformed) => reject(shared, &mut out, 400),
            Err(ReadError::TooLarge) => reject(shared, &mut out, 431),
        };
        if !keep_going {
            break;
        }
    }
    let _ = out.shutdown(Shutdown::Both);
}

fn reject(shared: &Shared, out: &mut TcpStream, status: u16) -> bool {
    let mut ex = Exchange {
        shared,
        out,
        head_only: false,
        keep_alive: false,
        status,
        sent: 0,
    };
    let _ = ex.simple(status, &[]);
    shared.stats.record("<malformed>", status, ex.sent);
    false
}

struct Exchange<'a> {
    shared: &'a Shared,
    out: &'a mut TcpStream,
    head_only: bool,
    keep_alive: bool,
    status: u16,
    sent: u64,
}

impl<'a> Exchange<'a> {
    fn new(shared: &'a Shared, out: &'a mut TcpStream, head: &RequestHead) -> Self {
        Self {
            shared,
            out,
            head_only: head.method == "HEAD",
            keep_alive: head.keep_alive() && !head.has_body(),
            status: 0,
            sent: 0,
        }
    }

    /// Answers one request; returns whether the connection stays open.
    fn run(mut self, head: &RequestHead) -> bool {
        let (key, result) = self.route(head);
        tracing::debug!(method = %head.method, target = %head.target, status = self.status, bytes = self.sent, "request");
        if let Some(key) = key {
            self.shared.stats.record(&key, self.status, self.sent);
        }
        result.is_ok() && self.keep_alive
    }

    /// Returns the stats key (None for the stats endpoint itself).
    fn route(&mut self, head: &RequestHead) -> (Option<String>, io::Result<()>) {
        let Some(raw) = paths::target_path(&head.target) else {
            self.keep_alive = false;
            return (Some(head.target.clone()), self.simple(400, &[]));
        };
        if head.method != "GET" && head.method != "HEAD" {
            self.keep_alive = false;
            let allow = [("Allow", "GET, HEAD".to_owned())];
            return (Some(raw.to_owned()), self.simple(405, &allow));
        }
        if self.shared.expose_stats && raw == STATS_PATH {
            return (None, self.stats());
        }
        match paths::resolve(&self.shared.root, raw) {
            Ok(resolved) => {
                let result = self.serve_file(&resolved, head);
                (Some(resolved.key), result)
            }
            Err(()) => (Some(raw.to_owned()), self.simple(400, &[])),
        }
    }

    fn serve_file(&mut self, resolved: &Resolved, head: &RequestHead) -> io::Result<()> {
        let faults = self.shared.faults_for(&resolved.key, self.head_only);
        if let Some((code, retry_after)) = faults.status {
            let extra: Vec<_> = retry_after
                .map(|s| ("Retry-After", s.to_string()))
                .into_iter()
                .collect();
            return self.simple(code, &extra);
        }
        let Some((file, meta)) = paths::open_regular_file(&self.shared.root, &resolved.fs_path)
        else {
            return self.simple(404, &[]);
        };
        let len = meta.len();
        let validators = Validators::new(len, meta.modified().unwrap_or(SystemTime::UNIX_EPOCH));
        let selection = if faults.ignore_range {
            Selection::Full
        } else {
            range::select(
                head.header("range"),
                head.header("if-range"),
                &validators,
                len,
            )
        };
        let (status, first, count) = match selection {
            Selection::Full => (200, 0, len),
            Selection::Partial { first, last } => (206, first, last - first + 1),
            Selection::Unsatisfiable => {
                let cr = [("Content-Range", format!("bytes */{len}"))];
                return self.simple(416, &cr);
            }
        };
        let mut h = ResponseHead::new(status);
        h.header("Content-Type", "application/octet-stream")
            .header("ETag", &validators.etag)
            .header("Last-Modified", &validators.last_modified);
        if !faults.ignore_range {
            h.header("Accept-Ranges", "bytes");
        }
        if status == 206 {
            h.header(
                "Content-Range",
                format!("bytes {first}-{}/{len}", first + count - 1),
            );
        }
        let declared = match faults.declared_delta {
            Some(delta) => {
                // The stream is out of sync after a lying Content-Length.
                self.keep_alive = false;
                count.saturating_add_signed(delta)
            }
            None => count,
        };
        h.header("Content-Length", declared);
        if !self.keep_alive {
            h.header("Connection", "close");
        }
        self.status = status;
        if self.head_only {
            return self.out.write_all(&h.finish());
        }
        let body = BodyPlan {
            start: first,
            send: faults.drop_after.map_or(count, |n| n.min(count)),
            corrupt_at: faults.corrupt_at,
            bytes_per_second: faults.slow.or(self.shared.throttle),
        };
        if faults.drop_after.is_some() {
            // Abrupt close: no "Connection: close" warning was sent.
            self.keep_alive = false;
        }
        self.stream_body(h.finish(), file, &body)
    }

    fn stream_body(&mut self, head: Vec<u8>, mut file: File, plan: &BodyPlan) -> io::Result<()> {
        file.seek(SeekFrom::Start(plan.start))?;
        let chunk = plan.chunk_size();
        // The head shares the first write so small files take one syscall.
        let mut buf = vec![0u8; head.len() + chunk];
        buf[..head.len()].copy_from_slice(&head);
        let mut prefix = head.len();
        let started = Instant::now();
        let mut done = 0u64;
        loop {
            let want = (plan.send - done).min(chunk as u64) as usize;
            let body = &mut buf[prefix..prefix + want];
            // A file shrinking under us surfaces here and closes the
            // connection, which is all HTTP/1.1 allows once headers are out.
            file.read_exact(body)?;
            plan.corrupt(body, done);
            self.out.write_all(&buf[..prefix + want])?;
            self.sent += want as u64;
            done += want as u64;
            prefix = 0;
            if let Some(bps) = plan.bytes_per_second {
                pace(started, done, bps);
            }
            if done == plan.send {
                return Ok(());
            }
        }
    }

    fn stats(&mut self) -> io::Result<()> {
        let body =
            serde_json::to_vec_pretty(&self.shared.stats.snapshot()).map_err(io::Error::other)?;
        let mut h = ResponseHead::new(200);
        h.header("Content-Type", "application/json")
            .header("Cache-Control", "no-store");
        self.status = 200;
        self.small(h, &body)
    }

    /// A short text/plain response for errors.
    fn simple(&mut self, status: u16, extra: &[(&str, String)]) -> io::Result<()> {
        let body = format!("{status} {}\n", http::reason(status));
        let mut h = ResponseHead::new(status);
        h.header("Content-Type", "text/plain; charset=utf-8");
        for (name, value) in extra {
            h.header(name, value);
        }
        self.status = status;
        self.small(h, body.as_bytes())
    }

    fn small(&mut self, mut h: ResponseHead, body: &[u8]) -> io::Result<()> {
        h.header("Content-Length", body.len());
        if !self.keep_alive {
            h.header("Connection", "close");
        }
        let mut buf = h.finish();
        if !self.head_only {
            buf.extend_from_slice(body);
        }
        self.out.write_all(&buf)?;
        if !self.head_only {
            self.sent += body.len() as u64;
        }
        Ok(())
    }
}

struct BodyPlan {
    start: u64,
    /// Bytes to send; less than the declared length under drop_after_bytes.
    send: u64,
    corrupt_at: Option<u64>,
    bytes_per_second: Option<u64>,
}

impl BodyPlan {
    fn chunk_size(&self) -> usize {
        // Throttled bodies go out in ~20 slices per second so the rate is
        // smooth even over short transfers.
        match self.bytes_per_second {
            Some(bps) => (bps / 20).clamp(1, CHUNK as u64) as usize,
            None => CHUNK,
        }
    }

    fn corrupt(&self, body: &mut [u8], body_offset: u64) {
        if let Some(at) = self.corrupt_at {
            let index = at
                .checked_sub(body_offset)
                .and_then(|i| usize::try_from(i).ok());
            if let Some(i) = index
                && let Some(byte) = body.get_mut(i)
            {
                *byte ^= 0xFF;
            }
        }
    }
}

fn pace(started: Instant, sent: u64, bytes_per_second: u64) {
    let due = Duration::from_secs_f64(sent as f64 / bytes_per_second as f64);
    if let Some(wait) = due.checked_sub(started.elapsed()) {
        std::thread::sleep(wait);
    }
}
