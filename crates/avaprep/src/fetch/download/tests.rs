use super::*;

/// A real server on 127.0.0.1 whose every answer redirects back to itself.
fn redirect_loop_server() -> String {
    use std::io::{BufRead, BufReader, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let _ = stream.write_all(
                b"HTTP/1.1 302 Found\r\nLocation: /loop\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    format!("http://{address}/loop")
}

#[test]
fn a_redirect_loop_fails_at_once_and_says_so() {
    let url = redirect_loop_server();
    let dir = tempfile::tempdir().unwrap();
    let cancel = AtomicBool::new(false);
    let downloader = Downloader::new(RetryPolicy::default(), &cancel).unwrap();
    let started = std::time::Instant::now();
    let error = downloader
        .fetch(
            &url,
            &dir.path().join("file"),
            &Expected::default(),
            &|_: u64, _: Option<u64>| {},
        )
        .unwrap_err();
    assert!(matches!(error, DownloadError::Refused { .. }), "{error}");
    assert!(error.to_string().contains("redirect"), "{error}");
    // The default policy's retries would take tens of seconds.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn content_range_parsing() {
    assert_eq!(
        parse_content_range("bytes 10-99/100"),
        Some((10, 99, Some(100)))
    );
    assert_eq!(parse_content_range("bytes 0-0/*"), Some((0, 0, None)));
    assert_eq!(parse_content_range("10-99/100"), None);
}

#[test]
fn backoff_grows_is_capped_and_honours_retry_after() {
    let policy = RetryPolicy::default();
    for attempt in 0..20 {
        let delay = policy.delay(attempt, None);
        let full = policy
            .base_delay
            .saturating_mul(1 << attempt.min(16))
            .min(policy.max_delay);
        assert!(
            delay <= full && delay >= full / 2,
            "attempt {attempt}: {delay:?}"
        );
    }
    let asked = policy.delay(0, Some(Duration::from_secs(7)));
    assert_eq!(asked, Duration::from_secs(7));
    let too_long = policy.delay(0, Some(Duration::from_secs(3600)));
    assert_eq!(too_long, policy.max_delay);
}
