//! One resumable, verified HTTP download.
//!
//! Bytes stream into `<name>.part`. After a dropped connection the next attempt asks for the rest
//! with `Range` (guarded by `If-Range`, so a file that changed on the server is fetched whole) and
//! requires `206` with a matching `Content-Range`; a server that ignores Range gets a clean restart.
//! The file takes its final name only after its size and, where known, its sha256 check out.
//! Ctrl-C stops a transfer within a fraction of a second, the partial file kept for the resume.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{CONTENT_RANGE, ETAG, IF_RANGE, LAST_MODIFIED, RANGE, RETRY_AFTER};
use reqwest::{Client, Response, StatusCode};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::fsutil;

/// What the manifest knows about a file; unknown values are not checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expected {
    pub size: Option<u64>,
    pub sha256: Option<String>,
}

/// A finished download.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Downloaded {
    pub url: String,
    pub size: u64,
    pub sha256: String,
    pub etag: Option<String>,
    /// Bytes received over the network by this call (less than `size` after a resume).
    #[serde(skip)]
    pub transferred: u64,
    /// Where this call resumed a partial file from (0: from the start).
    #[serde(skip)]
    pub resumed_from: u64,
}

/// A download complete and verified, still under its `.part` name with its validator beside
/// it. It takes its final name only from [`Completed::put_in_place`], which the caller calls once
/// it has recorded the download: a file under its final name always has its record, and a
/// record that could not be written (a full disk) leaves a whole `.part` that the next fetch
/// resumes at its end, sending nothing again.
#[derive(Debug)]
#[must_use = "a completed download is under its final name only once put in place"]
pub struct Completed {
    pub downloaded: Downloaded,
    part: PathBuf,
    destination: PathBuf,
}

impl Completed {
    /// Renames the `.part` file to its destination and drops its validator.
    pub fn put_in_place(self) -> Result<Downloaded, DownloadError> {
        let destination = &self.destination;
        fs::rename(&self.part, destination).map_err(|source| io_error(destination, source))?;
        fsutil::sync_parent(destination).map_err(|source| io_error(destination, source))?;
        let _ = fs::remove_file(meta_path(&self.part));
        Ok(self.downloaded)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("{url}: not found on the server (HTTP {status})")]
    NotFound { url: String, status: u16 },
    #[error("{url}: the server answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url}: gave up after {attempts} attempts; last error: {last}")]
    GaveUp {
        url: String,
        attempts: u32,
        last: String,
    },
    #[error("{url}: size is {actual} bytes, expected {expected}; the file was not kept")]
    SizeMismatch {
        url: String,
        expected: u64,
        actual: u64,
    },
    #[error("{url}: sha256 is {actual}, expected {expected}; the file was not kept")]
    ChecksumMismatch {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "{path}: not enough free space: the download needs {needed} more bytes, {available} are free"
    )]
    NoSpace {
        path: PathBuf,
        needed: u64,
        available: u64,
    },
    #[error("building the HTTP client: {0}")]
    Client(String),
    /// Not something another attempt can mend: a redirect loop, a redirect to another scheme,
    /// a URL the client cannot request.
    #[error("{url}: {reason}; not retried")]
    Refused { url: String, reason: String },
    #[error("{url}: interrupted; the partial file resumes next time")]
    Interrupted { url: String },
}

impl DownloadError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, DownloadError::NotFound { .. })
    }
}

/// Retries for connection errors, timeouts, 5xx and 429: exponential backoff with jitter, capped,
/// and at least what `Retry-After` asks for.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 8,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exponential = self.base_delay.saturating_mul(1 << attempt.min(16));
        let capped = exponential.min(self.max_delay);
        // Jitter in [50%, 100%] spreads the retries of concurrent transfers apart.
        let jittered = capped.mul_f64(rand::random_range(0.5..1.0));
        match retry_after {
            Some(asked) => asked.min(self.max_delay).max(jittered),
            None => jittered,
        }
    }
}

/// Receives byte progress of one download: (bytes of the file on disk, total if known).
pub trait Progress: Sync {
    fn update(&self, done: u64, total: Option<u64>);
}

impl<F: Fn(u64, Option<u64>) + Sync> Progress for F {
    fn update(&self, done: u64, total: Option<u64>) {
        self(done, total)
    }
}

/// One downloader per worker thread: its runtime drives only this thread's transfer, so bytes go
/// from the socket to the file without crossing threads.
pub struct Downloader<'c> {
    client: Client,
    policy: RetryPolicy,
    runtime: tokio::runtime::Runtime,
    /// Set by Ctrl-C: a transfer, a request or a wait between attempts ends at the next poll.
    cancel: &'c AtomicBool,
}

/// How often a transfer waiting on the network looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(100);

/// How one attempt ended when it did not finish the file.
enum AttemptError {
    /// Worth another attempt after a delay (and the partial file is kept).
    Retry {
        reason: String,
        retry_after: Option<Duration>,
    },
    Fatal(DownloadError),
    /// Ctrl-C: the partial file is kept as it stands.
    Interrupted,
}

/// The validators saved beside a partial file, so a resume asks for the same version of it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct PartMeta {
    url: String,
    etag: Option<String>,
    last_modified: Option<String>,
}

const BUFFER: usize = 1 << 20;

impl<'c> Downloader<'c> {
    pub fn new(policy: RetryPolicy, cancel: &'c AtomicBool) -> Result<Self, DownloadError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| DownloadError::Client(error.to_string()))?;
        // The client's connection pool and resolver belong to this runtime.
        let _context = runtime.enter();
        let client = Client::builder()
            .user_agent(concat!("avaprep/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(30))
            // An idle timeout, not a total one: a 3 GB video may take long, a silent server may not.
            .read_timeout(Duration::from_secs(60))
            .build()
            .map_err(|error| DownloadError::Client(error.to_string()))?;
        drop(_context);
        Ok(Downloader {
            client,
            policy,
            runtime,
            cancel,
        })
    }

    /// Downloads `url` for `destination`, resuming a `.part` file left by an earlier attempt;
    /// the caller puts the completed file in place.
    pub fn fetch(
        &self,
        url: &str,
        destination: &Path,
        expected: &Expected,
        progress: &dyn Progress,
    ) -> Result<Completed, DownloadError> {
        // Responses and connections are created and dropped inside this downloader's runtime.
        let _context = self.runtime.enter();
        if let Some(parent) = destination.parent() {
            fs::create_dir_all(parent).map_err(|source| io_error(parent, source))?;
        }
        let part = part_path(destination);
        let mut resumed_from = None;
        let mut transferred = 0;
        let mut last = String::new();
        let mut hash = PartHash::default();
        for attempt in 0..self.policy.attempts {
            let offset = usable_part_len(&part);
            resumed_from.get_or_insert(offset);
            let mut progress_in_attempt = Transfer {
                hash: &mut hash,
                transferred: &mut transferred,
                progress,
            };
            match self.attempt(url, &part, offset, expected, &mut progress_in_attempt) {
                Ok(()) => {
                    let mut downloaded = finish(url, &part, expected, &mut hash)?;
                    downloaded.transferred = transferred;
                    downloaded.resumed_from = resumed_from.unwrap_or(0);
                    return Ok(Completed {
                        downloaded,
                        part,
                        destination: destination.to_path_buf(),
                    });
                }
                Err(AttemptError::Fatal(error)) => return Err(error),
                Err(AttemptError::Interrupted) => return Err(self.interrupted(url)),
                Err(AttemptError::Retry {
                    reason,
                    retry_after,
                }) => {
                    tracing::warn!("{url}: attempt {} failed: {reason}", attempt + 1);
                    last = reason;
                    if attempt + 1 < self.policy.attempts
                        && !self.wait(self.policy.delay(attempt, retry_after))
                    {
                        return Err(self.interrupted(url));
                    }
                }
            }
        }
        Err(DownloadError::GaveUp {
            url: url.to_string(),
            attempts: self.policy.attempts,
            last,
        })
    }

    fn interrupted(&self, url: &str) -> DownloadError {
        DownloadError::Interrupted {
            url: url.to_string(),
        }
    }

    /// Sleeps `delay` unless cancelled first; whether the wait ran to its end.
    fn wait(&self, delay: Duration) -> bool {
        let end = Instant::now() + delay;
        while !self.cancel.load(Ordering::Relaxed) {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(CANCEL_POLL));
        }
        false
    }

    fn attempt(
        &self,
        url: &str,
        part: &Path,
        offset: u64,
        expected: &Expected,
        transfer: &mut Transfer<'_>,
    ) -> Result<(), AttemptError> {
        let meta = read_meta(part);
        let mut request = self.client.get(url);
        if offset > 0 {
            request = request.header(RANGE, format!("bytes={offset}-"));
            if let Some(validator) = meta.etag.as_ref().or(meta.last_modified.as_ref()) {
                request = request.header(IF_RANGE, validator);
            }
        }
        let response = self
            .runtime
            .block_on(unless_cancelled(request.send(), self.cancel));
        let response = response
            .ok_or(AttemptError::Interrupted)?
            .map_err(|error| match error.is_redirect() || error.is_builder() {
                true => AttemptError::Fatal(DownloadError::Refused {
                    url: url.to_string(),
                    reason: describe(&error),
                }),
                false => retry(describe(&error)),
            })?;
        let status = response.status();
        let start = match status {
            StatusCode::PARTIAL_CONTENT if offset > 0 => {
                check_content_range(&response, offset, url)?
            }
            StatusCode::OK => 0,
            StatusCode::RANGE_NOT_SATISFIABLE if offset > 0 => {
                return range_not_satisfiable(&response, part, offset, expected);
            }
            _ => return Err(status_error(url, &response)),
        };
        let length = response.content_length();
        let total = length.map(|length| start + length);
        check_space(part, total.map(|total| total.saturating_sub(start)))?;
        save_meta(part, url, &response);
        let file = open_part(part, start).map_err(AttemptError::Fatal)?;
        transfer
            .hash
            .rewind_to(part, start)
            .map_err(AttemptError::Fatal)?;
        let body = stream_body(response, file, part, start, total, transfer, self.cancel);
        self.runtime.block_on(body)
    }
}

/// `future`'s output, or None when `cancel` is set before it is ready.
async fn unless_cancelled<F: std::future::Future>(
    future: F,
    cancel: &AtomicBool,
) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    loop {
        if let Ok(output) = tokio::time::timeout(CANCEL_POLL, future.as_mut()).await {
            return Some(output);
        }
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
    }
}

/// Where a partial download is kept until it is complete and verified.
pub fn part_path(destination: &Path) -> PathBuf {
    let mut name = destination.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    destination.with_file_name(name)
}

fn meta_path(part: &Path) -> PathBuf {
    let mut name = part.file_name().unwrap_or_default().to_os_string();
    name.push(".json");
    part.with_file_name(name)
}

fn read_meta(part: &Path) -> PartMeta {
    fs::read(meta_path(part))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn save_meta(part: &Path, url: &str, response: &Response) {
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string)
    };
    let meta = PartMeta {
        url: url.to_string(),
        etag: header(ETAG),
        last_modified: header(LAST_MODIFIED),
    };
    let bytes = serde_json::to_vec(&meta).expect("meta serialises");
    if let Err(error) = fsutil::write_atomic(&meta_path(part), &bytes) {
        tracing::warn!("{}: {error}", meta_path(part).display());
    }
}

/// A partial file is resumed only with a validator to send as `If-Range`: the server then sends
/// the rest only if it still has the same file (from any URL, such as a restarted mirror).
fn usable_part_len(part: &Path) -> u64 {
    let Ok(metadata) = fs::metadata(part) else {
        return 0;
    };
    let meta = read_meta(part);
    if meta.etag.is_some() || meta.last_modified.is_some() {
        metadata.len()
    } else {
        0
    }
}

fn check_content_range(response: &Response, offset: u64, url: &str) -> Result<u64, AttemptError> {
    let header = response
        .headers()
        .get(CONTENT_RANGE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    match parse_content_range(header) {
        Some((start, _, _)) if start == offset => Ok(start),
        _ => Err(AttemptError::Fatal(DownloadError::Status {
            url: format!("{url} (asked for bytes {offset}- and got Content-Range `{header}`)"),
            status: 206,
        })),
    }
}

/// `bytes a-b/total` (total may be `*`).
fn parse_content_range(header: &str) -> Option<(u64, u64, Option<u64>)> {
    let range = header.strip_prefix("bytes ")?;
    let (span, total) = range.split_once('/')?;
    let (start, end) = span.split_once('-')?;
    let total = if total == "*" {
        None
    } else {
        Some(total.parse().ok()?)
    };
    Some((start.parse().ok()?, end.parse().ok()?, total))
}

/// 416 for a resume: the partial file may already be whole; otherwise start over.
fn range_not_satisfiable(
    response: &Response,
    part: &Path,
    offset: u64,
    expected: &Expected,
) -> Result<(), AttemptError> {
    let total = response
        .headers()
        .get(CONTENT_RANGE)
        .and_then(|value| value.to_str().ok())
        .and_then(|header| header.strip_prefix("bytes */"))
        .and_then(|total| total.parse::<u64>().ok());
    if total == Some(offset) && expected.size.is_none_or(|size| size == offset) {
        return Ok(());
    }
    let _ = fs::remove_file(part);
    Err(retry(format!(
        "the server cannot resume at byte {offset} (HTTP 416); starting over"
    )))
}

fn status_error(url: &str, response: &Response) -> AttemptError {
    let status = response.status();
    if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
        return AttemptError::Fatal(DownloadError::NotFound {
            url: url.to_string(),
            status: status.as_u16(),
        });
    }
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        return AttemptError::Retry {
            reason: format!("HTTP {status}"),
            retry_after: retry_after(response),
        };
    }
    AttemptError::Fatal(DownloadError::Status {
        url: url.to_string(),
        status: status.as_u16(),
    })
}

/// `Retry-After` in seconds or as an HTTP date.
fn retry_after(response: &Response) -> Option<Duration> {
    let value = response.headers().get(RETRY_AFTER)?.to_str().ok()?;
    if let Ok(seconds) = value.trim().parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    when.duration_since(std::time::SystemTime::now()).ok()
}

fn check_space(part: &Path, needed: Option<u64>) -> Result<(), AttemptError> {
    let (Some(needed), Some(folder)) = (needed, part.parent()) else {
        return Ok(());
    };
    match fs4::available_space(folder) {
        Ok(available) if available < needed => Err(AttemptError::Fatal(DownloadError::NoSpace {
            path: part.to_path_buf(),
            needed,
            available,
        })),
        _ => Ok(()),
    }
}

/// The part file, holding exactly its first `start` bytes. A fresh start removes the old part
/// rather than truncating it: ext4 flushes a file truncated to zero when it is closed (its
/// safeguard for programs that rewrite files in place), which would put the writeback of the
/// whole video on this thread.
fn open_part(part: &Path, start: u64) -> Result<File, DownloadError> {
    if start == 0 {
        match fs::remove_file(part) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => {
                return Err(io_error(part, error));
            }
            _ => {}
        }
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(part)
        .map_err(|source| io_error(part, source))?;
    // A resume appends exactly where the server's range starts.
    let len = file
        .metadata()
        .map_err(|source| io_error(part, source))?
        .len();
    if len != start {
        file.set_len(start)
            .map_err(|source| io_error(part, source))?;
    }
    Ok(file)
}

/// Each chunk is written as it arrives: hyper's reads grow to a few hundred KiB at speed, so a
/// buffer in between would only add a copy. Data is not fsynced: a killed process can never leave
/// a partial file under the final name (the rename comes after the last write), and the recorded
/// sha256 lets `--verify` catch what a power loss might leave. Syncing every video would halve the
/// download rate.
async fn stream_body(
    mut response: Response,
    mut file: File,
    part: &Path,
    start: u64,
    total: Option<u64>,
    transfer: &mut Transfer<'_>,
    cancel: &AtomicBool,
) -> Result<(), AttemptError> {
    let fatal = |source| AttemptError::Fatal(io_error(part, source));
    use io::Seek;
    file.seek(io::SeekFrom::Start(start)).map_err(fatal)?;
    let mut position = start;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(AttemptError::Interrupted);
        }
        let next = unless_cancelled(response.chunk(), cancel).await;
        let chunk = match next.ok_or(AttemptError::Interrupted)? {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(error) => {
                return Err(retry(format!(
                    "connection lost after {position} bytes: {}",
                    describe(&error)
                )));
            }
        };
        file.write_all(&chunk).map_err(fatal)?;
        position += chunk.len() as u64;
        *transfer.transferred += chunk.len() as u64;
        transfer.hash.update(chunk);
        transfer.progress.update(position, total);
    }
    match total {
        Some(total) if position < total => Err(retry(format!(
            "the connection closed after {position} of {total} bytes"
        ))),
        _ => Ok(()),
    }
}

/// The sha256 of the partial file's first `len` bytes, kept up to date while bytes arrive so the
/// finished file is not read again. Hashing runs on its own thread, beside the transfer: chunks
/// are reference-counted, so handing one over copies nothing.
struct PartHash {
    jobs: mpsc::SyncSender<HashJob>,
    len: u64,
}

enum HashJob {
    Update(Bytes),
    Reset,
    Finish(mpsc::Sender<String>),
}

impl Default for PartHash {
    fn default() -> Self {
        let (jobs, received) = mpsc::sync_channel::<HashJob>(64);
        std::thread::spawn(move || {
            let mut hasher = Sha256::new();
            for job in received {
                match job {
                    HashJob::Update(bytes) => hasher.update(&bytes),
                    HashJob::Reset => hasher = Sha256::new(),
                    HashJob::Finish(reply) => {
                        let digest = std::mem::take(&mut hasher).finalize();
                        let _ = reply.send(hex::encode(digest));
                    }
                }
            }
        });
        PartHash { jobs, len: 0 }
    }
}

impl PartHash {
    fn update(&mut self, bytes: Bytes) {
        self.len += bytes.len() as u64;
        self.jobs
            .send(HashJob::Update(bytes))
            .expect("the hashing thread lives as long as its sender");
    }

    /// Makes the hash cover exactly the part's first `start` bytes (re-reading them only when the
    /// transfer resumes somewhere other than where this hash stands: a part from an earlier run).
    fn rewind_to(&mut self, part: &Path, start: u64) -> Result<(), DownloadError> {
        if self.len == start {
            return Ok(());
        }
        self.len = 0;
        self.jobs.send(HashJob::Reset).expect("hashing thread");
        let file = File::open(part).map_err(|source| io_error(part, source))?;
        let mut prefix = file.take(start);
        loop {
            let mut buffer = vec![0; BUFFER];
            let read = prefix
                .read(&mut buffer)
                .map_err(|source| io_error(part, source))?;
            if read == 0 {
                break;
            }
            buffer.truncate(read);
            self.update(Bytes::from(buffer));
        }
        Ok(())
    }

    fn finish(&mut self) -> (u64, String) {
        let (reply, answer) = mpsc::channel();
        self.jobs
            .send(HashJob::Finish(reply))
            .expect("hashing thread");
        let digest = answer.recv().expect("the hashing thread answers");
        let len = std::mem::take(&mut self.len);
        (len, digest)
    }
}

/// What one attempt updates as bytes arrive.
struct Transfer<'a> {
    hash: &'a mut PartHash,
    transferred: &'a mut u64,
    progress: &'a dyn Progress,
}

/// Checks the complete partial file: its size and hash against what was expected.
fn finish(
    url: &str,
    part: &Path,
    expected: &Expected,
    hash: &mut PartHash,
) -> Result<Downloaded, DownloadError> {
    // A 416 answer means the part was already whole: its hash may still need computing.
    let on_disk = fs::metadata(part)
        .map_err(|source| io_error(part, source))?
        .len();
    hash.rewind_to(part, on_disk)?;
    let (size, sha256) = hash.finish();
    let reject = |error: DownloadError| {
        let _ = fs::remove_file(part);
        let _ = fs::remove_file(meta_path(part));
        Err(error)
    };
    if let Some(expected_size) = expected.size
        && expected_size != size
    {
        return reject(DownloadError::SizeMismatch {
            url: url.to_string(),
            expected: expected_size,
            actual: size,
        });
    }
    if let Some(expected_sha) = &expected.sha256
        && !expected_sha.eq_ignore_ascii_case(&sha256)
    {
        return reject(DownloadError::ChecksumMismatch {
            url: url.to_string(),
            expected: expected_sha.clone(),
            actual: sha256,
        });
    }
    Ok(Downloaded {
        url: url.to_string(),
        size,
        sha256,
        etag: read_meta(part).etag,
        transferred: 0,
        resumed_from: 0,
    })
}

/// Size and sha256 of a file, read once.
pub fn hash_file(path: &Path) -> Result<(u64, String), DownloadError> {
    let mut file = File::open(path).map_err(|source| io_error(path, source))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; BUFFER];
    let mut size = 0;
    loop {
        let read = file
            .read(&mut buffer)
            .map_err(|source| io_error(path, source))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        size += read as u64;
    }
    Ok((size, hex::encode(hasher.finalize())))
}

fn retry(reason: String) -> AttemptError {
    AttemptError::Retry {
        reason,
        retry_after: None,
    }
}

/// reqwest's error with its chain of causes (its own text is often just "error sending request").
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn io_error(path: &Path, source: io::Error) -> DownloadError {
    DownloadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests;
