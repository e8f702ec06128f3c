//! `avaprep fetch` against the real loopback server, with faults injected: resumes, retries,
//! restarts, refusals, missing videos, and a kill -9 in the middle of a download.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use avaprep_testbed::serve::{self, Fault, FaultPlan, FaultRule, ServeConfig, ServerHandle};

use crate::support::{avaprep, first_named, mirror, run_named, stderr, stdout};

fn start(root: &Path, rules: Vec<FaultRule>) -> ServerHandle {
    let mut config = ServeConfig::new(root);
    config.faults = FaultPlan { rules };
    serve::start(config).unwrap()
}

fn rule(path: &str, fault: Fault, first: Option<u64>) -> FaultRule {
    FaultRule {
        path: path.to_string(),
        fault,
        first,
    }
}

fn fetch(data: &Path, mirror_root: &Path, server: &ServerHandle, extra: &[&str]) -> Output {
    avaprep(data)
        .arg("fetch")
        .arg("--dataset")
        .arg(mirror_root.join("manifest.toml"))
        .args(["--base-url", &server.url(), "--split", "train,val,test"])
        .args(extra)
        .output()
        .unwrap()
}

/// The mirror's videos: (URL path, file on disk).
pub(crate) fn mirror_videos(root: &Path) -> Vec<(String, PathBuf)> {
    let mut videos = Vec::new();
    for folder in ["trainval", "test"] {
        for entry in fs::read_dir(root.join("ava-dataset").join(folder)).unwrap() {
            let path = entry.unwrap().path();
            let url = format!(
                "/ava-dataset/{folder}/{}",
                path.file_name().unwrap().to_string_lossy()
            );
            videos.push((url, path));
        }
    }
    videos.sort();
    videos
}

fn fetched(data: &Path, url_path: &str) -> PathBuf {
    data.join("videos")
        .join(url_path.trim_start_matches("/ava-dataset/"))
}

/// The line of a summary that names the command asking again for the one missing video, and
/// that command.
pub(crate) fn retry_named(output: &Output) -> (String, String) {
    let hint = stdout(output)
        .lines()
        .find(|line| line.contains("ask for the 1 missing again"))
        .unwrap_or_else(|| panic!("no hint to ask again: {}", stdout(output)))
        .to_string();
    let named = first_named(&hint).to_string();
    (hint, named)
}

/// How many times the server was asked for a video (not an annotation file).
pub(crate) fn video_requests(server: &ServerHandle) -> u64 {
    server
        .stats()
        .paths
        .iter()
        .filter(|(path, _)| path.contains("/trainval/") || path.contains("/test/"))
        .map(|(_, stats)| stats.requests)
        .sum()
}

fn largest_video(root: &Path) -> (String, PathBuf) {
    mirror_videos(root)
        .into_iter()
        .max_by_key(|(_, path)| fs::metadata(path).unwrap().len())
        .unwrap()
}

fn assert_same_files(data: &Path, root: &Path) {
    for (url, source) in mirror_videos(root) {
        let copy = fetched(data, &url);
        assert_eq!(
            fs::read(&copy).unwrap(),
            fs::read(&source).unwrap(),
            "{url} differs"
        );
    }
}

#[test]
fn downloads_everything_then_skips_it_without_the_network() {
    let root = mirror();
    let server = start(root, Vec::new());
    let data = tempfile::tempdir().unwrap();
    let first = fetch(data.path(), root, &server, &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_same_files(data.path(), root);
    assert!(data.path().join("annotations/ava_val_v2.2.csv").exists());
    assert!(
        data.path()
            .join("annotations/person_box_67091280_iou90/ava_detection_val_boxes_and_labels.csv")
            .exists()
    );

    let sent = server.stats().total_body_bytes;
    let again = fetch(data.path(), root, &server, &[]);
    assert!(again.status.success());
    assert!(stdout(&again).contains("up to date"), "{}", stdout(&again));
    // It says it did nothing; it once said "4 downloaded", the first run's count.
    assert!(
        stdout(&again).contains("nothing to download") && !stdout(&again).contains(" downloaded,"),
        "{}",
        stdout(&again)
    );
    assert_eq!(
        server.stats().total_body_bytes,
        sent,
        "a re-run must not download"
    );

    // An annotation edited in the data directory's copy is made again from the archive, and
    // the run says where an edit belongs: it once vanished without a word.
    let table = data.path().join("annotations/ava_val_v2.2.csv");
    let original = fs::read(&table).unwrap();
    fs::write(&table, b"edited by hand\n").unwrap();
    let remade = fetch(data.path(), root, &server, &[]);
    assert!(remade.status.success(), "{}", stderr(&remade));
    let said = stdout(&remade) + &stderr(&remade);
    assert!(
        said.contains("changed since made") && said.contains("annotations/ is a copy"),
        "{said}"
    );
    assert_eq!(fs::read(&table).unwrap(), original);
}

#[test]
fn a_dropped_connection_resumes_with_only_the_missing_bytes() {
    let root = mirror();
    let (url, source) = largest_video(root);
    let size = fs::metadata(&source).unwrap().len();
    let server = start(
        root,
        vec![rule(&url, Fault::DropAfterBytes(size / 2), Some(1))],
    );
    let data = tempfile::tempdir().unwrap();
    let output = fetch(data.path(), root, &server, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_same_files(data.path(), root);
    let stats = server.stats();
    let path_stats = stats.path(&url).unwrap();
    assert_eq!(path_stats.requests, 2);
    assert_eq!(
        path_stats.body_bytes, size,
        "the resume must transfer only the second half"
    );
}

#[test]
fn service_unavailable_is_retried_after_the_servers_delay() {
    let root = mirror();
    let zip = "/ava-dataset/annotations/ava_v2.2.zip";
    let fault = Fault::StatusFirst {
        code: 503,
        count: 2,
        retry_after: Some(1),
    };
    let server = start(root, vec![rule(zip, fault, None)]);
    let data = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let output = fetch(data.path(), root, &server, &["--annotations-only"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "Retry-After: 1 was not honoured"
    );
    let stats = server.stats();
    assert_eq!(stats.path(zip).unwrap().statuses.get(&503), Some(&2));
    assert!(data.path().join("annotations/ava_train_v2.2.csv").exists());
}

#[test]
fn a_server_that_ignores_range_gets_a_clean_restart() {
    let root = mirror();
    let (url, _) = largest_video(root);
    let rules = vec![
        rule(&url, Fault::IgnoreRange, None),
        rule(&url, Fault::DropAfterBytes(100_000), Some(1)),
    ];
    let server = start(root, rules);
    let data = tempfile::tempdir().unwrap();
    let output = fetch(data.path(), root, &server, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_same_files(data.path(), root);
}

#[test]
fn a_short_body_under_a_longer_content_length_is_completed() {
    let root = mirror();
    let (url, _) = largest_video(root);
    let fault = Fault::WrongLength {
        declared_delta: 5000,
    };
    let server = start(root, vec![rule(&url, fault, Some(1))]);
    let data = tempfile::tempdir().unwrap();
    let output = fetch(data.path(), root, &server, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_same_files(data.path(), root);
}

#[test]
fn a_file_shorter_than_the_manifest_says_is_not_kept() {
    let root = mirror();
    let zip = "/ava-dataset/annotations/ava_v2.2.zip";
    let fault = Fault::WrongLength {
        declared_delta: -100,
    };
    let server = start(root, vec![rule(zip, fault, None)]);
    let data = tempfile::tempdir().unwrap();
    let output = fetch(data.path(), root, &server, &["--annotations-only"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("ava_v2.2.zip") && message.contains("expected"),
        "{message}"
    );
    assert!(!data.path().join("downloads/ava_v2.2.zip").exists());
}

#[test]
fn a_checksum_mismatch_is_refused_with_a_clear_error() {
    let root = mirror();
    let zip = "/ava-dataset/annotations/ava_v2.2.zip";
    let server = start(
        root,
        vec![rule(zip, Fault::CorruptBody { offset: 100 }, None)],
    );
    let data = tempfile::tempdir().unwrap();
    let output = fetch(data.path(), root, &server, &["--annotations-only"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("sha256 is") && message.contains("not kept"),
        "{message}"
    );
    assert!(!data.path().join("downloads/ava_v2.2.zip").exists());
    assert!(!data.path().join("annotations/ava_train_v2.2.csv").exists());
}

#[test]
fn a_missing_video_is_reported_recorded_and_the_rest_finish() {
    let root = mirror();
    let videos = mirror_videos(root);
    let (missing_url, missing_path) = &videos[0];
    let missing_id = missing_path
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let server = start(root, vec![rule(missing_url, Fault::NotFound, None)]);
    let data = tempfile::tempdir().unwrap();
    let output = fetch(data.path(), root, &server, &["--json"]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "finding a missing video fails the run"
    );
    assert!(stderr(&output).contains(&missing_id), "{}", stderr(&output));
    // Its kind says it will not come: the source does not have it.
    let missing: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|record| record["type"] == "stage")
        .flat_map(|record| {
            record["newly_missing"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0]["item"], missing_id.as_str());
    assert_eq!(missing[0]["kind"], "missing");
    let marker = fs::read_to_string(data.path().join("work/missing").join(&missing_id)).unwrap();
    assert!(marker.contains("not found"), "{marker}");
    for (url, _) in &videos[1..] {
        assert!(
            fetched(data.path(), url).exists(),
            "{url} should have finished"
        );
    }
    // The missing set is recorded: the next run does not fail again on it, nor asks for it,
    // and names the command that does.
    server.reset_stats();
    let again = fetch(data.path(), root, &server, &[]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(server.stats().path(missing_url).is_none());
    // The fetch that made the data directory, word for word, asking again.
    let (hint, named) = retry_named(&again);
    assert!(
        named.contains(" fetch --dataset ") && named.ends_with(" --retry-missing"),
        "{hint}"
    );
    // Once the server has it, the named command downloads it, and only it; the video is missing
    // no more. (The mended server is the same mirror at another port.)
    let mended = start(root, Vec::new());
    let retried = run_named(&named.replace(&server.url(), &mended.url()));
    assert!(retried.status.success(), "{}", stderr(&retried));
    assert!(
        stderr(&retried).contains(&format!(
            "asking again for 1 videos found missing before: {missing_id}"
        )),
        "{}",
        stderr(&retried)
    );
    assert!(fetched(data.path(), missing_url).exists());
    for (url, _) in &videos[1..] {
        assert!(mended.stats().path(url).is_none(), "{url} asked again");
    }
    assert!(!data.path().join("work/missing").join(&missing_id).exists());
    assert!(
        !stdout(&retried).contains("missing again"),
        "{}",
        stdout(&retried)
    );
}

/// The first Ctrl-C stops a download in progress within seconds, its partial file kept, and the
/// next fetch sends only the rest. Before, fetch finished every download in progress first (here
/// about 30 s at the throttled rate).
#[test]
fn the_first_ctrl_c_stops_a_download_in_progress_and_keeps_its_partial_file() {
    stops_a_download_in_progress_keeping_its_partial_file(libc::SIGINT);
}

/// So does the SIGTERM a batch scheduler sends at a job's time limit (Slurm, then SIGKILL after a
/// grace period): it once ended the process at once, without the run's summary.
#[test]
fn a_sigterm_stops_a_download_as_ctrl_c_does() {
    stops_a_download_in_progress_keeping_its_partial_file(libc::SIGTERM);
}

/// A fetch started under `nohup` (SIGHUP ignored) goes on when its terminal closes.
#[test]
fn a_hangup_under_nohup_does_not_stop_a_download() {
    let root = mirror();
    let mut slow = SlowFetch::start_as(root, 30, Stdio::piped(), Hangup::Ignored);
    slow.wait_for_part(slow.size / 20);
    // SAFETY: a signal to the child this test started and has not yet waited for.
    assert_eq!(
        unsafe { libc::kill(slow.child.id() as i32, libc::SIGHUP) },
        0
    );
    std::thread::sleep(Duration::from_millis(1500));
    let still_running = slow.child.try_wait().unwrap().is_none();
    slow.child.kill().unwrap();
    slow.child.wait().unwrap();
    let mut errors = String::new();
    std::io::Read::read_to_string(&mut slow.child.stderr.take().unwrap(), &mut errors).unwrap();
    assert!(still_running && !errors.contains("interrupted"), "{errors}");
}

fn stops_a_download_in_progress_keeping_its_partial_file(signal: libc::c_int) {
    let root = mirror();
    let mut slow = SlowFetch::start(root, 30, Stdio::piped());
    let size = slow.size;
    slow.wait_for_part(size / 20);
    let (data, child, part) = (&slow.data, &mut slow.child, &slow.part);
    // SAFETY: a signal to the child this test started and has not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let interrupted = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            interrupted.elapsed() < Duration::from_secs(5),
            "fetch went on downloading after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut errors = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut errors).unwrap();
    assert_eq!(status.code(), Some(1), "{errors}");
    assert!(errors.contains("interrupted"), "{errors}");
    assert!(!fetched(data.path(), &slow.url).exists());
    let kept = fs::metadata(part).unwrap().len();
    assert!(kept >= size / 20 && kept < size, "{kept} of {size}");

    let fast = start(root, Vec::new());
    let output = fetch(data.path(), root, &fast, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_same_files(data.path(), root);
    let sent = fast.stats().path(&slow.url).unwrap().body_bytes;
    assert!(
        sent <= size - kept,
        "{sent} bytes sent again; {kept} were kept"
    );
}

/// `avaprep status` in another terminal while fetch downloads: the stage is running, by that
/// command; after its Ctrl-C, interrupted. It once said "interrupted" in both cases.
#[test]
fn status_beside_a_fetch_says_running_then_interrupted() {
    let root = mirror();
    let mut slow = SlowFetch::start(root, 30, Stdio::null());
    slow.wait_for_part(slow.size / 20);
    let pipeline = slow.data.path().join("fetch.toml");
    fs::write(
        &pipeline,
        format!(
            "dataset = {:?}\nsplits = [\"train\", \"val\", \"test\"]\n[fetch]\nbase_url = [{:?}]\n",
            root.join("manifest.toml"),
            slow._server.url()
        ),
    )
    .unwrap();
    let fetch_videos = || {
        let output = avaprep(slow.data.path())
            .args(["--json", "status"])
            .arg(&pipeline)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find(|record| record["stage"] == "fetch-videos")
            .expect("a fetch-videos line")
    };
    let during = fetch_videos();
    assert_eq!(during["condition"], "running", "{during}");
    let detail = during["detail"].as_str().unwrap();
    assert!(
        detail.contains(" fetch --dataset ")
            && detail.contains(&format!("pid {}", slow.child.id()))
            && detail.contains(&format!(
                "of {} items made so far",
                mirror_videos(root).len()
            )),
        "{detail}"
    );
    // SAFETY: a signal to the child this test started and has not yet waited for.
    assert_eq!(
        unsafe { libc::kill(slow.child.id() as i32, libc::SIGINT) },
        0
    );
    assert_eq!(slow.child.wait().unwrap().code(), Some(1));
    let after = fetch_videos();
    assert_eq!(after["condition"], "interrupted", "{after}");
}

#[test]
fn kill_9_mid_download_then_rerun_resumes_and_skips_what_was_complete() {
    let root = mirror();
    let mut slow = SlowFetch::start(root, 6, Stdio::null());
    let size = slow.size;
    slow.wait_for_part(size / 4);
    let (data, child, part) = (&slow.data, &mut slow.child, &slow.part);
    let slow_url = slow.url.clone();
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = fs::metadata(part).unwrap().len();
    assert!(kept < size);
    let others_done: Vec<String> = mirror_videos(root)
        .into_iter()
        .filter(|(url, _)| *url != slow_url && fetched(data.path(), url).exists())
        .map(|(url, _)| url)
        .collect();
    assert!(
        !others_done.is_empty(),
        "the other videos should have finished first"
    );

    let fast = start(root, Vec::new());
    let output = fetch(data.path(), root, &fast, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_same_files(data.path(), root);
    let stats = fast.stats();
    assert_eq!(
        stats.path(&slow_url).unwrap().body_bytes,
        size - kept,
        "only the rest is sent"
    );
    for url in &others_done {
        assert!(
            stats.path(url).is_none(),
            "{url} was complete and must not be downloaded again"
        );
    }
}

#[test]
fn hostile_archive_entries_and_names_are_refused() {
    let root = mirror();
    // A copy of the mirror's annotations with one hostile entry in the zip and one hostile name.
    let hostile = tempfile::tempdir().unwrap();
    let annotations = hostile.path().join("ava-dataset/annotations");
    fs::create_dir_all(&annotations).unwrap();
    let mut zip = zip::ZipWriter::new(fs::File::create(annotations.join("ava_v2.2.zip")).unwrap());
    zip.start_file(
        "../../escaped.csv",
        zip::write::SimpleFileOptions::default(),
    )
    .unwrap();
    std::io::Write::write_all(&mut zip, b"x").unwrap();
    zip.finish().unwrap();
    let manifest = fs::read_to_string(root.join("manifest.toml")).unwrap();
    let manifest = without_checksums_of(&manifest, "annotations/ava_v2.2.zip");
    fs::write(hostile.path().join("manifest.toml"), manifest).unwrap();
    let server = start(hostile.path(), Vec::new());
    let data = tempfile::tempdir().unwrap();
    let output = fetch(
        data.path(),
        hostile.path(),
        &server,
        &["--annotations-only"],
    );
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("refusing entry `../../escaped.csv`"),
        "{message}"
    );
    assert!(!data.path().parent().unwrap().join("escaped.csv").exists());
    // The refused archive is not kept as downloaded: once the mirror is put right, a fetch
    // downloads it anew (it once refused the same bytes on every run).
    assert!(
        message.contains("the next `avaprep fetch` downloads it anew"),
        "{message}"
    );
    assert!(!data.path().join("downloads/ava_v2.2.zip").exists());
    crate::invalidation::copy_tree(&root.join("ava-dataset/annotations"), &annotations);
    crate::invalidation::copy_tree(&root.join("pyslowfast"), &hostile.path().join("pyslowfast"));
    let again = fetch(
        data.path(),
        hostile.path(),
        &server,
        &["--annotations-only"],
    );
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(data.path().join("annotations/ava_train_v2.2.csv").is_file());

    // Hostile names in a name list are refused by the parser with file and line.
    let names = data.path().join("names");
    fs::create_dir_all(&names).unwrap();
    let list = names.join("list.txt");
    fs::write(&list, "-5KQ66BBWC4.mkv\n../../etc/passwd.mp4\n").unwrap();
    let error = avaprep::annotations::read_video_file_names(&list)
        .unwrap_err()
        .to_string();
    assert!(error.contains("list.txt:2"), "{error}");
}

/// The manifest entry of `path` without its size and sha256, so a replaced file is accepted.
/// Another dataset's manifest would refuse the annotations there and remove their archive from
/// the downloads: a data directory holds one dataset, and naming another is refused before any
/// work. A new version of the same dataset goes on.
#[test]
fn a_fetch_naming_another_dataset_is_refused_and_keeps_the_downloads() {
    let root = mirror();
    let server = start(root, Vec::new());
    let data = tempfile::tempdir().unwrap();
    let made = fetch(data.path(), root, &server, &["--annotations-only"]);
    assert!(made.status.success(), "{}", stderr(&made));
    let downloads = || {
        let mut names: Vec<_> = fs::read_dir(data.path().join("downloads"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let kept = downloads();
    assert!(!kept.is_empty());

    let manifests = tempfile::tempdir().unwrap();
    let renamed = |key: &str, value: &str| {
        let mut manifest: toml::Table = fs::read_to_string(root.join("manifest.toml"))
            .unwrap()
            .parse()
            .unwrap();
        manifest["dataset"].as_table_mut().unwrap()[key] = value.into();
        let path = manifests.path().join(format!("{key}.toml"));
        fs::write(&path, toml::to_string(&manifest).unwrap()).unwrap();
        path
    };
    let other = renamed("name", "Somebody's dataset");
    let refused = avaprep(data.path())
        .args(["fetch", "--annotations-only", "--base-url", &server.url()])
        .arg("--dataset")
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(
        message.contains("holds the dataset `avaprep synthetic AVA`")
            && message.contains("names `Somebody's dataset`")
            && message.contains("another `--data-dir`"),
        "{message}"
    );
    // The refusal names the command that made the data directory, as it was typed.
    assert!(
        message.contains(&format!(
            "fetch --dataset {}",
            root.join("manifest.toml").display()
        )),
        "{message}"
    );
    assert_eq!(downloads(), kept);

    let next_version = renamed("version", "next");
    let updated = avaprep(data.path())
        .args(["fetch", "--annotations-only", "--base-url", &server.url()])
        .arg("--dataset")
        .arg(&next_version)
        .output()
        .unwrap();
    assert!(updated.status.success(), "{}", stderr(&updated));
}

fn without_checksums_of(manifest: &str, path: &str) -> String {
    let mut value: toml::Table = manifest.parse().unwrap();
    let annotations = value["annotations"].as_table_mut().unwrap();
    assert_eq!(annotations["path"].as_str(), Some(path));
    annotations.remove("size");
    annotations.remove("sha256");
    annotations.remove("contents");
    toml::to_string(&value).unwrap()
}

#[test]
fn verify_rehashes_and_downloads_a_damaged_file_again() {
    let root = mirror();
    let server = start(root, Vec::new());
    let data = tempfile::tempdir().unwrap();
    assert!(fetch(data.path(), root, &server, &[]).status.success());
    let (url, source) = largest_video(root);
    let copy = fetched(data.path(), &url);
    let mut bytes = fs::read(&copy).unwrap();
    bytes[1000] ^= 0xff; // same size: only re-hashing can tell
    fs::write(&copy, &bytes).unwrap();

    let plain = fetch(data.path(), root, &server, &[]);
    assert!(
        stdout(&plain).contains("up to date"),
        "without --verify nothing is re-read"
    );
    let verified = fetch(data.path(), root, &server, &["--verify"]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    let message = stderr(&verified);
    assert!(
        message.contains(&*copy.to_string_lossy()) && message.contains("downloaded again"),
        "{message}"
    );
    // An expected re-download is news, not an error.
    assert!(!message.contains("error:"), "{message}");
    assert_eq!(fs::read(&copy).unwrap(), fs::read(&source).unwrap());
}

/// A video downloaded whole whose record cannot be written (as on a disk that filled at that
/// moment) is not taken as done, nor downloaded again: the next fetch, once the record can be
/// written, resumes it at its end and receives no byte of it.
#[test]
fn a_download_whose_record_cannot_be_written_is_finished_without_sending_it_again() {
    let root = mirror();
    let server = start(root, Vec::new());
    let data = tempfile::tempdir().unwrap();
    // The videos' records cannot be made: a file stands where their folder goes.
    let records = data.path().join(".avaprep/downloads/videos");
    fs::create_dir_all(records.parent().unwrap()).unwrap();
    fs::write(&records, b"in the way").unwrap();
    let first = fetch(data.path(), root, &server, &[]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let videos = mirror_videos(root);
    for (url, source) in &videos {
        let copy = fetched(data.path(), url);
        assert!(
            !copy.exists(),
            "{} is under its name unrecorded",
            copy.display()
        );
        let part = copy.with_file_name(format!(
            "{}.part",
            copy.file_name().unwrap().to_string_lossy()
        ));
        assert_eq!(fs::read(&part).unwrap(), fs::read(source).unwrap(), "{url}");
    }
    let sent = server.stats().total_body_bytes;
    fs::remove_file(&records).unwrap();
    let again = fetch(data.path(), root, &server, &[]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_same_files(data.path(), root);
    // Each video is asked for from its end: the server's short 416 answers, no video's bytes.
    let sent_again = server.stats().total_body_bytes - sent;
    assert!(
        sent_again < 100 * videos.len() as u64,
        "{sent_again} bytes sent again"
    );
    assert!(
        stdout(&again).contains(&format!("{} resumed", videos.len())),
        "{}",
        stdout(&again)
    );
}

/// `command` run with `folder` replaced by an empty tmpfs of `bytes`, in a private mount
/// namespace: nothing on the host changes and no privileges are needed. `None` where this
/// system forbids user namespaces.
fn with_small_filesystem(command: &Command, folder: &Path, bytes: u64) -> Option<Command> {
    let allowed = Command::new("unshare").args(["-rm", "true"]).output();
    if !allowed.is_ok_and(|output| output.status.success()) {
        return None;
    }
    let mut wrapped = Command::new("unshare");
    wrapped
        .args([
            "-rm",
            "sh",
            "-c",
            r#"mount -t tmpfs -o "size=$1" tmpfs "$2" && shift 2 && exec "$@""#,
        ])
        .args(["sh", &bytes.to_string()])
        .arg(folder)
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    Some(wrapped)
}

#[test]
fn a_video_that_cannot_fit_is_refused_before_any_byte_is_written() {
    let root = mirror();
    let videos = mirror_videos(root);
    let smallest = videos
        .iter()
        .map(|(_, path)| fs::metadata(path).unwrap().len())
        .min()
        .unwrap();
    let server = start(root, vec![]);
    let data = tempfile::tempdir().unwrap();
    let video_dir = data.path().join("videos");
    fs::create_dir_all(&video_dir).unwrap();
    // Room for half the smallest video: every video must be refused.
    let room = (smallest / 2).max(4096);
    let mut command = avaprep(data.path());
    command
        .args(["--json", "fetch", "--dataset"])
        .arg(root.join("manifest.toml"))
        .args(["--base-url", &server.url(), "--split", "train,val,test"]);
    let Some(mut command) = with_small_filesystem(&command, &video_dir, room) else {
        eprintln!("skipped: this system does not allow the user namespace the test mounts in");
        return;
    };
    let output = command.output().unwrap();
    let errors = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{errors}");
    for (_, path) in &videos {
        let id = path.file_stem().unwrap().to_string_lossy();
        let line = errors
            .lines()
            .find(|line| line.contains(&*id))
            .unwrap_or_else(|| panic!("no error names {id}:\n{errors}"));
        let size = fs::metadata(path).unwrap().len();
        assert!(
            line.contains(&format!(
                "not enough free space: the download needs {size} more bytes"
            )),
            "{line}"
        );
    }
    // Refused at the first answer, not retried.
    let stats = server.stats();
    for (url, _) in &videos {
        assert_eq!(stats.path(url).map(|p| p.requests), Some(1), "{url}");
    }
    // The annotations, on the roomy disk, are in.
    assert!(data.path().join("annotations/ava_train_v2.2.csv").exists());
}

/// `fetch` of the whole mirror running, its largest video served at a sixth (`per_second` = 6)
/// or a thirtieth of its size a second.
struct SlowFetch {
    data: tempfile::TempDir,
    child: std::process::Child,
    url: String,
    part: std::path::PathBuf,
    size: u64,
    _server: avaprep_testbed::serve::ServerHandle,
}

/// How the fetch is started as to SIGHUP: as from a terminal, or under `nohup`.
#[derive(PartialEq)]
enum Hangup {
    Handled,
    Ignored,
}

impl SlowFetch {
    fn start(root: &Path, per_second: u64, stderr: Stdio) -> Self {
        Self::start_as(root, per_second, stderr, Hangup::Handled)
    }

    fn start_as(root: &Path, per_second: u64, stderr: Stdio, hangup: Hangup) -> Self {
        let (url, source) = largest_video(root);
        let size = fs::metadata(&source).unwrap().len();
        let server = start(root, vec![rule(&url, Fault::Slow(size / per_second), None)]);
        let data = tempfile::tempdir().unwrap();
        let mut command = avaprep(data.path());
        command
            .arg("fetch")
            .arg("--dataset")
            .arg(root.join("manifest.toml"))
            .args(["--base-url", &server.url(), "--split", "train,val,test"])
            .stdout(Stdio::null())
            .stderr(stderr);
        if hangup == Hangup::Ignored {
            use std::os::unix::process::CommandExt;
            // SAFETY: between fork and exec, only a signal's disposition is set (as `nohup` does).
            unsafe {
                command.pre_exec(|| {
                    libc::signal(libc::SIGHUP, libc::SIG_IGN);
                    Ok(())
                });
            }
        }
        let child = command.spawn().unwrap();
        let part = avaprep::fetch::download::part_path(&fetched(data.path(), &url));
        SlowFetch {
            data,
            child,
            url,
            part,
            size,
            _server: server,
        }
    }

    /// Waits until the slow video's partial file holds `bytes`.
    fn wait_for_part(&self, bytes: u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while fs::metadata(&self.part).map_or(0, |meta| meta.len()) < bytes {
            assert!(
                Instant::now() < deadline,
                "the slow download made no progress"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
