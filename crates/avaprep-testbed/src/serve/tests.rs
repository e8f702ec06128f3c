//! End-to-end tests over real sockets on 127.0.0.1:0.

use super::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

const BIG: &str = "/videos/big.bin";
const BIG_LEN: usize = 3 * 1024 * 1024 + 17;

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "avaprep-serve-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

/// Layout: tmp/secret.txt (outside the root) and tmp/root/{small.txt,
/// videos/big.bin, dir/}.
struct Fixture {
    tmp: TempDir,
    big: Vec<u8>,
}

impl Fixture {
    fn new() -> Self {
        let tmp = TempDir::new();
        let root = tmp.0.join("root");
        std::fs::create_dir_all(root.join("videos")).unwrap();
        std::fs::create_dir_all(root.join("dir")).unwrap();
        std::fs::write(tmp.0.join("secret.txt"), b"TOP-SECRET-CONTENT").unwrap();
        std::fs::write(root.join("small.txt"), b"hello, ava\n").unwrap();
        let big = pseudo_random(BIG_LEN, 0x9E37_79B9_7F4A_7C15);
        std::fs::write(root.join("videos/big.bin"), &big).unwrap();
        Self { tmp, big }
    }

    fn root(&self) -> PathBuf {
        self.tmp.0.join("root")
    }

    fn serve(&self) -> ServerHandle {
        self.serve_with(FaultPlan::none())
    }

    fn serve_with(&self, faults: FaultPlan) -> ServerHandle {
        let mut config = ServeConfig::new(self.root());
        config.faults = faults;
        config.expose_stats = true;
        start(config).unwrap()
    }
}

fn plan(json: &str) -> FaultPlan {
    FaultPlan::from_json_str(json).unwrap()
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn content_length(&self) -> usize {
        self.header("content-length").unwrap().parse().unwrap()
    }
}

fn connect(server: &ServerHandle) -> TcpStream {
    let stream = TcpStream::connect(server.addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
}

fn read_head(reader: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            return (status, headers);
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.to_owned(), v.trim().to_owned()));
    }
}

/// Sends raw request bytes and reads everything until the server closes.
fn raw(server: &ServerHandle, request: &str) -> Resp {
    let mut stream = connect(server);
    stream.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader);
    let mut body = Vec::new();
    reader.read_to_end(&mut body).unwrap();
    Resp {
        status,
        headers,
        body,
    }
}

fn get(server: &ServerHandle, path: &str, extra: &[&str]) -> Resp {
    request(server, "GET", path, extra)
}

fn request(server: &ServerHandle, method: &str, path: &str, extra: &[&str]) -> Resp {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for h in extra {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    raw(server, &req)
}

fn curl(args: &[&str]) -> std::process::Output {
    Command::new("/usr/bin/curl")
        .args(["-s", "--max-time", "10"])
        .args(args)
        .output()
        .expect("curl must be installed at /usr/bin/curl")
}

// ---- normal serving -------------------------------------------------------

#[test]
fn full_get_returns_bytes_and_headers() {
    let fx = Fixture::new();
    let server = fx.serve();
    let r = get(&server, BIG, &[]);
    assert_eq!(r.status, 200);
    assert!(r.body == fx.big, "body differs");
    assert_eq!(r.content_length(), BIG_LEN);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    let etag = r.header("etag").unwrap();
    assert!(etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'));
    let modified = httpdate::parse_http_date(r.header("last-modified").unwrap()).unwrap();
    let on_disk = std::fs::metadata(fx.root().join("videos/big.bin"))
        .unwrap()
        .modified()
        .unwrap();
    let diff = on_disk.duration_since(modified).unwrap();
    assert!(diff < Duration::from_secs(1));
}

#[test]
fn head_has_length_and_no_body() {
    let fx = Fixture::new();
    let server = fx.serve();
    let r = request(&server, "HEAD", BIG, &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.content_length(), BIG_LEN);
    assert!(r.body.is_empty());
    assert_eq!(server.stats().total_body_bytes, 0);
}

#[test]
fn single_ranges_return_the_right_bytes() {
    let fx = Fixture::new();
    let server = fx.serve();
    let total = BIG_LEN;
    let cases = [
        ("bytes=100-199", 100, 199),
        ("bytes=3000000-", 3_000_000, total - 1),
        ("bytes=-500", total - 500, total - 1),
        ("bytes=0-0", 0, 0),
        ("bytes=10-99999999", 10, total - 1),
    ];
    for (range, first, last) in cases {
        let r = get(&server, BIG, &[&format!("Range: {range}")]);
        assert_eq!(r.status, 206, "{range}");
        assert_eq!(
            r.header("content-range").unwrap(),
            format!("bytes {first}-{last}/{total}")
        );
        assert_eq!(r.content_length(), last - first + 1);
        assert!(r.body == fx.big[first..=last], "{range}");
    }
}

#[test]
fn multi_range_is_served_whole() {
    let fx = Fixture::new();
    let server = fx.serve();
    let r = get(&server, "/small.txt", &["Range: bytes=0-1,3-4"]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello, ava\n"[..]));
}

#[test]
fn unsatisfiable_range_is_416() {
    let fx = Fixture::new();
    let server = fx.serve();
    for range in [format!("bytes={BIG_LEN}-"), "bytes=-0".to_owned()] {
        let r = get(&server, BIG, &[&format!("Range: {range}")]);
        assert_eq!(r.status, 416);
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes */{BIG_LEN}").as_str())
        );
    }
}

#[test]
fn if_range_mismatch_sends_full_body() {
    let fx = Fixture::new();
    let server = fx.serve();
    let full = get(&server, BIG, &[]);
    let etag = full.header("etag").unwrap().to_owned();
    let lm = full.header("last-modified").unwrap().to_owned();
    let range = "Range: bytes=10-19";
    for good in [&etag, &lm] {
        let r = get(&server, BIG, &[range, &format!("If-Range: {good}")]);
        assert_eq!((r.status, r.body.len()), (206, 10));
    }
    for bad in ["\"other\"", "Thu, 01 Jan 1970 00:00:00 GMT"] {
        let r = get(&server, BIG, &[range, &format!("If-Range: {bad}")]);
        assert_eq!(r.status, 200);
        assert!(r.body == fx.big);
    }
}

#[test]
fn etag_is_stable_and_changes_with_the_file() {
    let fx = Fixture::new();
    let server = fx.serve();
    let etag = |s: &ServerHandle| get(s, "/small.txt", &[]).header("etag").unwrap().to_owned();
    let first = etag(&server);
    assert_eq!(first, etag(&server));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(fx.root().join("small.txt"))
        .unwrap();
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
        .unwrap();
    assert_ne!(first, etag(&server));
}

#[test]
fn keep_alive_serves_two_requests_on_one_connection() {
    let fx = Fixture::new();
    let server = fx.serve();
    let mut stream = connect(&server);
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    for expected in [&b"hello"[..], &b"ava"[..]] {
        let range = if expected == b"hello" { "0-4" } else { "7-9" };
        let req = format!("GET /small.txt HTTP/1.1\r\nHost: x\r\nRange: bytes={range}\r\n\r\n");
        stream.write_all(req.as_bytes()).unwrap();
        let (status, headers) = read_head(&mut reader);
        assert_eq!(status, 206);
        assert!(
            !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("connection"))
        );
        let mut body = vec![0; expected.len()];
        reader.read_exact(&mut body).unwrap();
        assert_eq!(body, expected);
    }
    // Connection: close on the same connection ends it after the response.
    stream
        .write_all(b"HEAD /small.txt HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (status, headers) = read_head(&mut reader);
    assert_eq!(status, 200);
    assert!(headers.contains(&("Connection".into(), "close".into())));
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    assert_eq!(server.stats().path("/small.txt").unwrap().requests, 3);
}

#[test]
fn missing_files_directories_and_bad_methods() {
    let fx = Fixture::new();
    let server = fx.serve();
    for path in ["/nope.bin", "/dir", "/dir/", "/", "/videos"] {
        assert_eq!(get(&server, path, &[]).status, 404, "{path}");
    }
    let r = request(&server, "POST", "/small.txt", &["Content-Length: 0"]);
    assert_eq!((r.status, r.header("allow")), (405, Some("GET, HEAD")));
    assert_eq!(raw(&server, "garbage\r\n\r\n").status, 400);
}

#[test]
fn path_traversal_never_leaves_the_root() {
    let fx = Fixture::new();
    #[cfg(unix)]
    std::os::unix::fs::symlink(fx.tmp.0.join("secret.txt"), fx.root().join("link.txt")).unwrap();
    let server = fx.serve();
    let attempts = [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/videos/../../secret.txt",
        "/a/../../secret.txt",
        "/..%5csecret.txt",
        "/..\\secret.txt",
        "/x%00/../secret.txt",
        "//etc/passwd",
        "/link.txt",
    ];
    for path in attempts {
        let r = get(&server, path, &[]);
        assert!(matches!(r.status, 400 | 404), "{path}: {}", r.status);
        let body = String::from_utf8_lossy(&r.body);
        assert!(
            !body.contains("TOP-SECRET") && !body.contains("root:"),
            "{path}"
        );
    }
}

#[test]
fn stats_count_bytes_exactly() {
    let fx = Fixture::new();
    let server = fx.serve();
    get(&server, BIG, &[]);
    get(&server, BIG, &["Range: bytes=100-199"]);
    get(&server, "/nope", &[]);
    let stats = server.stats();
    let big = stats.path(BIG).unwrap();
    assert_eq!(big.requests, 2);
    assert_eq!(big.body_bytes, BIG_LEN as u64 + 100);
    assert_eq!(big.statuses.get(&200), Some(&1));
    assert_eq!(big.statuses.get(&206), Some(&1));
    let nope = stats.path("/nope").unwrap();
    assert_eq!(stats.total_body_bytes, big.body_bytes + nope.body_bytes);
    assert_eq!(stats.total_requests, 3);

    // The JSON endpoint reports the same and does not count itself.
    let r = get(&server, STATS_PATH, &[]);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let json: ServerStats = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(json, stats);
    server.reset_stats();
    assert_eq!(server.stats(), ServerStats::default());
}

#[test]
fn stats_endpoint_is_off_by_default() {
    let fx = Fixture::new();
    let server = start(ServeConfig::new(fx.root())).unwrap();
    assert_eq!(get(&server, STATS_PATH, &[]).status, 404);
}

#[test]
fn start_reports_errors() {
    let fx = Fixture::new();
    let file_root = ServeConfig::new(fx.root().join("small.txt"));
    assert!(matches!(
        start(file_root),
        Err(ServeError::RootNotDirectory { .. })
    ));
    let missing = ServeConfig::new(fx.root().join("missing"));
    assert!(matches!(
        start(missing),
        Err(ServeError::RootUnreadable { .. })
    ));
    let first = fx.serve();
    let mut taken = ServeConfig::new(fx.root());
    taken.addr = first.addr();
    assert!(matches!(start(taken), Err(ServeError::Bind { .. })));
}

#[test]
fn fault_plan_files_load_and_report_errors() {
    let fx = Fixture::new();
    let good = fx.tmp.0.join("plan.json");
    std::fs::write(&good, r#"{"rules":[{"path":"*","fault":"not_found"}]}"#).unwrap();
    assert_eq!(FaultPlan::from_json_file(&good).unwrap().rules.len(), 1);
    let bad = fx.tmp.0.join("bad.json");
    std::fs::write(&bad, r#"{"rules":[{"path":"*","fault":"boom"}]}"#).unwrap();
    let err = FaultPlan::from_json_file(&bad).unwrap_err();
    assert!(matches!(err, ServeError::FaultPlanParse { .. }));
    assert!(err.to_string().contains("bad.json"), "{err}");
    assert!(matches!(
        FaultPlan::from_json_file(&fx.tmp.0.join("none.json")),
        Err(ServeError::FaultPlanRead { .. })
    ));
}

#[test]
fn shutdown_closes_idle_keep_alive_connections() {
    let fx = Fixture::new();
    let server = fx.serve();
    let addr = server.addr();
    let mut idle = connect(&server);
    idle.write_all(b"GET /small.txt HTTP/1.1\r\n\r\n").unwrap();
    let started = Instant::now();
    server.shutdown();
    assert!(started.elapsed() < Duration::from_secs(2));
    let mut all = Vec::new();
    let _ = idle.read_to_end(&mut all);
    assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err());
}

// ---- curl -----------------------------------------------------------------

fn big_url(server: &ServerHandle) -> String {
    format!("{}videos/big.bin", server.url())
}

#[test]
fn curl_range_and_full_download() {
    let fx = Fixture::new();
    let server = fx.serve();
    let out = curl(&["-r", "100-199", &big_url(&server)]);
    assert!(out.status.success());
    assert!(out.stdout == fx.big[100..200]);
    let dest = fx.tmp.0.join("full.bin");
    let out = curl(&["-f", "-o", dest.to_str().unwrap(), &big_url(&server)]);
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::read(&dest).unwrap() == fx.big);
}

#[test]
fn curl_resumes_a_partial_file() {
    let fx = Fixture::new();
    let server = fx.serve();
    let dest = fx.tmp.0.join("partial.bin");
    std::fs::write(&dest, &fx.big[..1_000_000]).unwrap();
    let out = curl(&[
        "-f",
        "-C",
        "-",
        "-o",
        dest.to_str().unwrap(),
        &big_url(&server),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::read(&dest).unwrap() == fx.big);
    let stats = server.stats();
    let big = stats.path(BIG).unwrap();
    assert_eq!(big.statuses.get(&206), Some(&1));
    assert_eq!(big.body_bytes, (BIG_LEN - 1_000_000) as u64);
}

// ---- faults ---------------------------------------------------------------

#[test]
fn fault_drop_after_bytes_then_success() {
    let fx = Fixture::new();
    let server = fx.serve_with(plan(
        r#"{"rules":[{"path":"/videos/*","fault":{"drop_after_bytes":1000},"first":1}]}"#,
    ));
    let cut = get(&server, BIG, &[]);
    assert_eq!(cut.status, 200);
    assert_eq!(cut.content_length(), BIG_LEN);
    assert!(cut.body == fx.big[..1000]);
    let whole = get(&server, BIG, &[]);
    assert!(whole.body == fx.big);
    assert_eq!(
        server.stats().path(BIG).unwrap().body_bytes,
        1000 + BIG_LEN as u64
    );
}

#[test]
fn fault_status_first_then_ok() {
    let fx = Fixture::new();
    let server = fx.serve_with(plan(
        r#"{"rules":[{"path":"*.txt","fault":{"status_first":{"code":503,"count":2,"retry_after":3}}}]}"#,
    ));
    for _ in 0..2 {
        let r = get(&server, "/small.txt", &[]);
        assert_eq!((r.status, r.header("retry-after")), (503, Some("3")));
    }
    let r = get(&server, "/small.txt", &[]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello, ava\n"[..]));
    assert_eq!(r.header("retry-after"), None);
    let statuses = &server.stats().paths["/small.txt"].statuses;
    assert_eq!((statuses[&503], statuses[&200]), (2, 1));
}

#[test]
fn fault_slow_throttles_the_body() {
    let fx = Fixture::new();
    std::fs::write(fx.root().join("slow.bin"), &fx.big[..100_000]).unwrap();
    let server = fx.serve_with(plan(
        r#"{"rules":[{"path":"/slow.bin","fault":{"slow":200000}}]}"#,
    ));
    let started = Instant::now();
    let r = get(&server, "/slow.bin", &[]);
    let took = started.elapsed();
    assert!(r.body == fx.big[..100_000]);
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// `serve --throttle`: every response at most that many bytes a second, the bytes unchanged.
#[test]
fn a_throttle_slows_every_response() {
    let fx = Fixture::new();
    std::fs::write(fx.root().join("part.bin"), &fx.big[..100_000]).unwrap();
    let mut config = ServeConfig::new(fx.root());
    config.throttle = Some(200_000);
    let server = start(config).unwrap();
    let started = Instant::now();
    let r = get(&server, "/part.bin", &[]);
    let took = started.elapsed();
    assert!(r.body == fx.big[..100_000]);
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn fault_wrong_length_declares_more_than_sent() {
    let fx = Fixture::new();
    let server = fx.serve_with(plan(
        r#"{"rules":[{"path":"/videos/big.bin","fault":{"wrong_length":{"declared_delta":100}}}]}"#,
    ));
    let r = get(&server, BIG, &[]);
    assert_eq!(r.content_length(), BIG_LEN + 100);
    assert!(r.body == fx.big, "real bytes then close");
    let out = curl(&[&big_url(&server)]);
    assert_eq!(
        out.status.code(),
        Some(18),
        "curl reports a partial transfer"
    );
}

#[test]
fn fault_wrong_length_declares_less_than_sent() {
    let fx = Fixture::new();
    let server = fx.serve_with(plan(
        r#"{"rules":[{"path":"/videos/big.bin","fault":{"wrong_length":{"declared_delta":-100}}}]}"#,
    ));
    let r = get(&server, BIG, &[]);
    assert_eq!(r.content_length(), BIG_LEN - 100);
    assert_eq!(r.header("connection"), Some("close"));
    let out = curl(&[&big_url(&server)]);
    assert!(
        out.stdout == fx.big[..BIG_LEN - 100],
        "client gets fewer bytes"
    );
}

#[test]
fn fault_not_found_hides_an_existing_file() {
    let fx = Fixture::new();
    let server = fx.serve_with(plan(
        r#"{"rules":[{"path":"/small.txt","fault":"not_found"}]}"#,
    ));
    assert_eq!(get(&server, "/small.txt", &[]).status, 404);
    assert_eq!(request(&server, "HEAD", "/small.txt", &[]).status, 404);
    assert_eq!(get(&server, BIG, &["Range: bytes=0-0"]).status, 206);
}

#[test]
fn fault_ignore_range_sends_full_body() {
    let fx = Fixture::new();
    let server = fx.serve_with(plan(r#"{"rules":[{"path":"*","fault":"ignore_range"}]}"#));
    let r = get(&server, BIG, &["Range: bytes=100-199"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("accept-ranges"), None);
    assert_eq!(r.header("content-range"), None);
    assert!(r.body == fx.big);
}

#[test]
fn fault_corrupt_body_flips_one_byte() {
    let fx = Fixture::new();
    let offset = 300_000;
    let server = fx.serve_with(plan(&format!(
        r#"{{"rules":[{{"path":"{BIG}","fault":{{"corrupt_body":{{"offset":{offset}}}}}}}]}}"#
    )));
    let r = get(&server, BIG, &[]);
    assert_eq!(r.body.len(), BIG_LEN);
    let diffs: Vec<usize> = (0..BIG_LEN).filter(|&i| r.body[i] != fx.big[i]).collect();
    assert_eq!(diffs, vec![offset]);
    // The offset is relative to the body actually sent, ranges included.
    let r = get(&server, BIG, &["Range: bytes=1000-"]);
    let diffs: Vec<usize> = (0..r.body.len())
        .filter(|&i| r.body[i] != fx.big[1000 + i])
        .collect();
    assert_eq!(diffs, vec![offset]);
    assert_eq!(r.body[offset], !fx.big[1000 + offset]);
    let r = get(&server, BIG, &["Range: bytes=0-99"]);
    assert!(r.body == fx.big[..100]);
}

#[test]
fn fault_plan_does_not_leak_into_other_servers() {
    let fx = Fixture::new();
    let _faulty = fx.serve_with(plan(r#"{"rules":[{"path":"*","fault":"not_found"}]}"#));
    let normal = fx.serve();
    assert_eq!(get(&normal, "/small.txt", &[]).status, 200);
    assert!(Path::new(&fx.root()).is_dir());
}
