//! Tests on real encoded videos from the synthetic dataset: every frame carries its source
//! index, so each written JPEG is traced back to the source frame it shows.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use ffmpeg_next as ff;

use super::*;
use avaprep_testbed::synth::{self, Profile, SynthConfig, SynthReport, VideoReport};

struct Data {
    root: PathBuf,
    report: SynthReport,
    /// Per video: (seconds from the first timestamp, burned-in index) of every frame, in order.
    truth: Vec<Vec<(f64, u32)>>,
}

fn data() -> &'static Data {
    static DATA: OnceLock<Data> = OnceLock::new();
    DATA.get_or_init(|| {
        ff::init().unwrap();
        ff::log::set_level(ff::log::Level::Error);
        let root = avaprep_testbed::scratch::process_folder("extract").unwrap();
        let started = Instant::now();
        let report = synth::generate(&SynthConfig {
            out: root.clone(),
            videos: 6,
            seed: 11,
            profile: Profile::Quick,
            exports: false,
        })
        .expect("synth");
        eprintln!("synth: {:.1} s", started.elapsed().as_secs_f64());
        let truth = report
            .videos
            .iter()
            .map(|v| decode_all(&root.join(&v.path)))
            .collect();
        Data {
            root,
            report,
            truth,
        }
    })
}

/// Every frame's time and code, by a plain full decode (no seeking, no skipping).
fn decode_all(path: &Path) -> Vec<(f64, u32)> {
    let mut input = ff::format::input(path).unwrap();
    let stream = input.streams().best(ff::media::Type::Video).unwrap();
    let (index, tb) = (stream.index(), f64::from(stream.time_base()));
    let start = stream.start_time();
    let ctx = ff::codec::context::Context::from_parameters(stream.parameters()).unwrap();
    let mut dec = ctx.decoder().video().unwrap();
    let mut out = Vec::new();
    let mut frame = ff::frame::Video::empty();
    let mut take = |dec: &mut ff::decoder::Video, out: &mut Vec<(f64, u32)>| {
        while dec.receive_frame(&mut frame).is_ok() {
            let ts = frame.timestamp().unwrap();
            let code = synth::read_frame_code(
                frame.data(0),
                frame.width(),
                frame.height(),
                frame.stride(0),
            )
            .expect("frame code");
            out.push(((ts - start) as f64 * tb, code));
        }
    };
    for (s, packet) in input.packets() {
        if s.index() == index {
            dec.send_packet(&packet).unwrap();
            take(&mut dec, &mut out);
        }
    }
    dec.send_eof().unwrap();
    take(&mut dec, &mut out);
    out
}

/// The code of the frame nearest to `t` (ties to the later frame), computed independently of
/// the extractor, in floating point with a tolerance for the tie.
fn expected_code(truth: &[(f64, u32)], t: f64) -> u32 {
    let mut best = truth[0];
    for &(time, code) in truth {
        if (time - t).abs() <= (best.0 - t).abs() + 1e-9 {
            best = (time, code);
        }
    }
    best.1
}

fn video(i: usize) -> (&'static VideoReport, PathBuf, &'static [(f64, u32)]) {
    let d = data();
    let v = &d.report.videos[i];
    (v, d.root.join(&v.path), &d.truth[i])
}

/// The annotated segment in the files' seconds.
fn segment() -> [f64; 2] {
    let report = &data().report;
    let (t, start) = (report.times, report.video_start);
    [
        f64::from(t.segment_start - start),
        f64::from(t.segment_end - start),
    ]
}

fn out_dir(tag: &str) -> PathBuf {
    let dir = data().root.join("out").join(tag);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Jpeg {
    width: u32,
    height: u32,
    code: Option<u32>,
}

fn read_jpeg(path: &Path) -> Jpeg {
    let img = image::open(path).unwrap().to_luma8();
    let (width, height) = img.dimensions();
    let code = synth::read_frame_code(img.as_raw(), width, height, width as usize);
    Jpeg {
        width,
        height,
        code,
    }
}

fn jpeg_names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Extracts `ranges` and checks every frame against the truth; returns the stats.
fn check(i: usize, ranges: &[TimeRange], spec: &ExtractSpec, tag: &str) -> Extraction {
    let (v, path, truth) = video(i);
    let seg = segment();
    let frames = frame_numbers(ranges, seg[0], spec.format.fps());
    let dir = out_dir(tag);
    let started = Instant::now();
    let done = std::cell::Cell::new(0);
    let result = extract_video(&path, &v.id, &frames, seg, spec, &dir, &|d, planned| {
        assert_eq!(planned, frames.len() as u64);
        done.set(d);
        true
    })
    .unwrap_or_else(|e| panic!("{tag}: {e}"));
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(done.get(), frames.len() as u64);
    let s = &result.stats;
    eprintln!(
        "{tag}: {} {} {}x{}: {} frames in {elapsed:.2} s; decoded {} skipped {} of {} in segment; {} B/frame",
        v.file_name,
        v.frame_rate,
        v.width,
        v.height,
        s.frames_written,
        s.source_frames_decoded,
        s.source_frames_skipped,
        s.segment_source_frames,
        s.jpeg_bytes / s.frames_written.max(1)
    );
    let expected_names: BTreeSet<String> = frames
        .iter()
        .map(|k| format!("{}_{k:06}.jpg", v.id))
        .collect();
    assert_eq!(
        jpeg_names(&dir),
        expected_names,
        "{tag}: only the selected frames"
    );
    assert_eq!(result.index.len(), frames.len());
    let (w, h) = output_size(
        v.width,
        v.height,
        spec.format.height(),
        spec.format.upscale(),
    );
    for (row, &k) in result.index.iter().zip(&frames) {
        let target = seg[0] + f64::from(k - 1) / spec.format.fps();
        let want = expected_code(truth, target);
        let jpeg = read_jpeg(&dir.join(format!("{}_{k:06}.jpg", v.id)));
        assert_eq!(jpeg.code, Some(want), "{tag}: frame {k} at {target:.4} s");
        assert_eq!((jpeg.width, jpeg.height), (w, h), "{tag}: size");
        assert_eq!((row.frame, row.width, row.height), (k, w, h));
        assert!((row.target_seconds - target).abs() < 1e-6);
        let source = truth.iter().find(|f| f.1 == want).unwrap().0;
        assert!(
            (row.source_seconds - source).abs() < 1e-6,
            "{tag}: index source time"
        );
        let gap = row
            .source_gap_seconds
            .expect("a source frame before every target");
        assert!(
            gap > 0.0 && (row.source_seconds - target).abs() <= gap / 2.0 + 1e-6,
            "{tag}: frame {k}: the gap {gap} does not bound the chosen frame's distance"
        );
    }
    // The segment's frames, counted independently.
    let in_segment = truth
        .iter()
        .filter(|f| f.0 >= seg[0] - 1e-9 && f.0 < seg[1] - 1e-9)
        .count();
    assert_eq!(
        s.segment_source_frames, in_segment as u64,
        "{tag}: segment frames"
    );
    result
}

fn r(start: f64, end: f64) -> TimeRange {
    TimeRange { start, end }
}

/// Ranges with edges between source frames, a gap longer than a GOP, and the segment's end.
fn typical_ranges() -> Vec<TimeRange> {
    vec![r(5.0, 7.13), r(12.31, 14.9), r(31.05, 35.0)]
}

#[test]
fn every_kind_of_video_at_5_fps() {
    for i in 0..data().report.videos.len() {
        let spec = ExtractSpec::default();
        check(i, &typical_ranges(), &spec, &format!("kind{i}"));
    }
}

/// Ctrl-C stops the video in progress at its next frame, with one thread or with the encoding
/// thread beside the decoder (which ends with it). Before, the first Ctrl-C let every video in
/// progress run to its end.
#[test]
fn a_stopped_extraction_ends_at_the_next_frame() {
    let (v, path, _) = video(0);
    let seg = segment();
    let frames = frame_numbers(&typical_ranges(), seg[0], 5.0);
    for threads in [1, 2] {
        let spec = ExtractSpec {
            threads,
            ..ExtractSpec::default()
        };
        let dir = out_dir(&format!("stopped{threads}"));
        let done = std::cell::Cell::new(0);
        let error = extract_video(&path, &v.id, &frames, seg, &spec, &dir, &|d, _| {
            done.set(d);
            d < 3
        })
        .unwrap_err();
        assert!(matches!(error, ExtractError::Interrupted), "{error}");
        assert_eq!(done.get(), 3, "{threads} threads");
    }
}

#[test]
fn ten_fps_ties_and_frame_threads() {
    // At 10 fps a 25 fps source has a tie on every other target (0.1 s between 0.08 and 0.12).
    let spec = ExtractSpec::new(format(10.0, 480, false), 2);
    for i in [2, 0, 3] {
        check(
            i,
            &[r(5.0, 9.0), r(20.0, 21.0)],
            &spec,
            &format!("tenfps{i}"),
        );
    }
}

#[test]
fn sizes() {
    let (v, ..) = video(4);
    assert_eq!((v.width, v.height), (1280, 720));
    let native = ExtractSpec::new(format(5.0, 0, false), 1);
    check(4, &[r(10.0, 11.0)], &native, "native720");
    check(4, &[r(10.0, 11.0)], &ExtractSpec::default(), "to480");
    let up = ExtractSpec::new(format(5.0, 480, true), 1);
    check(2, &[r(10.0, 11.0)], &up, "upscale282");
    let low = ExtractSpec::new(format(5.0, 240, false), 1);
    check(2, &[r(10.0, 11.0)], &low, "to240");
}

#[test]
fn whole_segment() {
    let spec = ExtractSpec {
        threads: 2,
        ..ExtractSpec::default()
    };
    let result = check(0, &segment_range(segment()), &spec, "segment");
    assert_eq!(result.stats.frames_written, 150);
    assert_eq!(result.stats.segment_source_frames, 900);
}

/// The skip optimisation must not change a single byte, with one thread or frame threads.
#[test]
fn skipping_changes_nothing() {
    for threads in [1, 3] {
        for i in [0, 3, 4, 2] {
            let (v, path, _) = video(i);
            let seg = segment();
            let frames = frame_numbers(&typical_ranges(), seg[0], 5.0);
            let mut outputs = Vec::new();
            for skip in [true, false] {
                let spec = ExtractSpec {
                    threads,
                    skip_unneeded: skip,
                    ..ExtractSpec::default()
                };
                let dir = out_dir(&format!("skip{i}-{threads}-{skip}"));
                let started = Instant::now();
                let result =
                    extract_video(&path, &v.id, &frames, seg, &spec, &dir, &|_, _| true).unwrap();
                eprintln!(
                    "{} threads={threads} skip={skip}: decoded {} of {} read, {:.2} s",
                    v.file_name,
                    result.stats.source_frames_decoded,
                    result.stats.source_frames_decoded + result.stats.source_frames_skipped,
                    started.elapsed().as_secs_f64()
                );
                let bytes: Vec<Vec<u8>> = frames
                    .iter()
                    .map(|k| std::fs::read(dir.join(format!("{}_{k:06}.jpg", v.id))).unwrap())
                    .collect();
                outputs.push((bytes, result));
            }
            assert!(
                outputs[0].0 == outputs[1].0,
                "{}: JPEG bytes differ",
                v.file_name
            );
            assert_eq!(outputs[0].1.index, outputs[1].1.index);
            if v.b_frames {
                assert!(
                    outputs[0].1.stats.source_frames_decoded
                        < outputs[1].1.stats.source_frames_decoded,
                    "{}: skipping should save decoding",
                    v.file_name
                );
            }
        }
    }
}

#[test]
fn index_csv() {
    let rows = vec![
        IndexRow {
            frame: 1,
            target_seconds: 900.0,
            source_seconds: 900.0167,
            source_file_seconds: 900.0167,
            source_gap_seconds: Some(0.0333),
            width: 854,
            height: 480,
        },
        IndexRow {
            frame: 2,
            target_seconds: 900.2,
            source_seconds: 900.2,
            source_file_seconds: 0.2,
            source_gap_seconds: None,
            width: 854,
            height: 480,
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.csv");
    write_index(&path, &rows).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "frame,target_seconds,source_seconds,width,height,source_gap_seconds,source_file_seconds\n\
         1,900.000000,900.016700,854,480,0.033300,900.016700\n\
         2,900.200000,900.200000,854,480,,0.200000\n"
    );
}

/// The error of a failed extraction, the same whether frames are encoded by the reading thread
/// or by one of their own (decoder threads above 1).
fn extract_err(path: &Path, frames: &[u32]) -> ExtractError {
    let dir = out_dir("err");
    let [one_thread, encoding_thread] = [1, 3].map(|threads| {
        let spec = ExtractSpec {
            threads,
            ..ExtractSpec::default()
        };
        extract_video(path, "x", frames, segment(), &spec, &dir, &|_, _| true).unwrap_err()
    });
    assert_eq!(one_thread.to_string(), encoding_thread.to_string());
    one_thread
}

fn ffmpeg_cli(args: &[&str]) {
    let status = std::process::Command::new("ffmpeg")
        .args(["-y", "-loglevel", "error"])
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "ffmpeg {args:?}");
}

#[test]
fn errors_are_clear() {
    let (v, path, _) = video(0);
    assert_eq!(v.container, "mp4");
    let tmp = data().root.join("broken");
    std::fs::create_dir_all(&tmp).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let frames: Vec<u32> = (1..=10).collect();
    // The moov atom is at the end: any cut loses it.
    for percent in [30, 80] {
        let cut = tmp.join(format!("cut{percent}.mp4"));
        std::fs::write(&cut, &bytes[..bytes.len() * percent / 100]).unwrap();
        let err = extract_err(&cut, &frames);
        eprintln!("{err}");
        assert!(matches!(err, ExtractError::Open { .. }), "{err}");
    }
    let text = tmp.join("notes.mp4");
    std::fs::write(&text, "not a video\n".repeat(100)).unwrap();
    let err = extract_err(&text, &frames);
    eprintln!("{err}");
    assert!(matches!(err, ExtractError::Open { .. }), "{err}");
    let audio = tmp.join("audio.m4a");
    ffmpeg_cli(&["-f", "lavfi", "-i", "sine=d=2", audio.to_str().unwrap()]);
    let err = extract_err(&audio, &frames);
    eprintln!("{err}");
    assert!(matches!(err, ExtractError::NoVideoStream { .. }), "{err}");
    // `--fps 1000` once wrote a JPEG per target from a 25-30 fps source, repeating each frame.
    let dir = out_dir("too-fast");
    let spec = ExtractSpec::new(format(1000.0, 480, false), 1);
    let err = extract_video(&path, "x", &frames, segment(), &spec, &dir, &|_, _| true).unwrap_err();
    eprintln!("{err}");
    assert!(matches!(err, ExtractError::RateAboveSource { .. }), "{err}");
    assert!(err.to_string().contains("or fewer"), "{err}");
    // Past the end: the video lasts 36 s; frames 151.. of a segment from 5 s start at 35 s.
    let frames: Vec<u32> = (141..=170).collect();
    let err = extract_err(&path, &frames);
    eprintln!("{err}");
    match &err {
        ExtractError::ShortVideo {
            missing,
            video_end_seconds,
            ..
        } => {
            assert_eq!((missing[0].first, missing[0].last), (156, 170));
            assert!((video_end_seconds - 36.0).abs() < 0.05);
        }
        other => panic!("{other}"),
    }
    assert!(
        err.to_string()
            .contains("frames 156-170 (36.0-38.8 s): the video ends at 36.0 s (a truncated file")
    );
    // moov first, then cut at 80%: it opens and ends early.
    let fast = tmp.join("faststart.mp4");
    ffmpeg_cli(&[
        "-i",
        path.to_str().unwrap(),
        "-c",
        "copy",
        "-movflags",
        "+faststart",
        fast.to_str().unwrap(),
    ]);
    let fast_bytes = std::fs::read(&fast).unwrap();
    let cut = tmp.join("faststart-cut80.mp4");
    std::fs::write(&cut, &fast_bytes[..fast_bytes.len() * 80 / 100]).unwrap();
    let frames: Vec<u32> = (140..=150).collect();
    let err = extract_err(&cut, &frames);
    eprintln!("{err}");
    assert!(matches!(err, ExtractError::ShortVideo { .. }), "{err}");
}

/// A format at the best JPEG quality.
fn format(fps: f64, height: u32, upscale: bool) -> FrameFormat {
    FrameFormat::new(fps, height, DEFAULT_QUALITY, upscale).unwrap()
}

/// A format no video could be extracted to cannot be made; the error names the setting.
#[test]
fn a_frame_format_is_checked_when_made() {
    let cases = [
        (FrameFormat::new(0.0, 480, 2, false), "fps 0:"),
        (FrameFormat::new(f64::NAN, 480, 2, false), "fps NaN:"),
        (FrameFormat::new(1001.0, 480, 2, false), "fps 1001:"),
        (FrameFormat::new(5.0, 481, 2, false), "height 481:"),
        (FrameFormat::new(5.0, 480, 1, false), "quality 1:"),
        (FrameFormat::new(5.0, 480, 32, false), "quality 32:"),
    ];
    for (made, said) in cases {
        let error = made.unwrap_err().to_string();
        assert!(error.starts_with(said), "{said}: {error}");
    }
    let native = FrameFormat::new(MAX_FPS, 0, 31, true).unwrap();
    assert_eq!(
        (native.fps(), native.height(), native.quality()),
        (MAX_FPS, 0, 31)
    );
}

#[test]
fn invalid_requests() {
    let (_, path, _) = video(0);
    let dir = out_dir("invalid");
    let err = extract_video(
        &path,
        "x",
        &[3, 2],
        segment(),
        &ExtractSpec::default(),
        &dir,
        &|_, _| true,
    )
    .unwrap_err();
    assert!(matches!(err, ExtractError::InvalidSpec(_)));
}

/// A video whose display matrix turns it (a phone video) once gave frames lying on their side:
/// they come out as the ffmpeg CLI shows them, upright, with `--height` the upright height.
#[test]
fn rotated_videos_come_out_upright_as_the_ffmpeg_cli_shows_them() {
    let dir = out_dir("rotation");
    let plain = dir.join("plain.mp4");
    ffmpeg_cli(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc=size=320x180:rate=25:duration=8",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        plain.to_str().unwrap(),
    ]);
    let luma = |path: &Path| image::open(path).unwrap().to_luma8();
    let mean_difference = |a: &image::GrayImage, b: &image::GrayImage| -> f64 {
        assert_eq!(a.dimensions(), b.dimensions());
        let sum: u64 = a
            .pixels()
            .zip(b.pixels())
            .map(|(p, q)| u64::from(p.0[0].abs_diff(q.0[0])))
            .sum();
        sum as f64 / f64::from(a.width() * a.height())
    };
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for rotate in ["0", "90", "180", "270"] {
        let rotated = dir.join(format!("rotate{rotate}.mp4"));
        let metadata = format!("rotate={rotate}");
        ffmpeg_cli(&[
            "-i",
            plain.to_str().unwrap(),
            "-c",
            "copy",
            "-metadata:s:v:0",
            &metadata,
            rotated.to_str().unwrap(),
        ]);
        let out = dir.join(format!("ours{rotate}"));
        std::fs::create_dir_all(&out).unwrap();
        let spec = ExtractSpec::new(format(5.0, 120, false), 1);
        extract_video(&rotated, "x", &[1], [5.0, 7.0], &spec, &out, &|_, _| true).unwrap();
        ours.push(luma(&out.join("x_000001.jpg")));
        let cli = dir.join(format!("cli{rotate}.png"));
        ffmpeg_cli(&[
            "-ss",
            "5",
            "-i",
            rotated.to_str().unwrap(),
            "-frames:v",
            "1",
            "-vf",
            "scale=-2:120",
            cli.to_str().unwrap(),
        ]);
        theirs.push(luma(&cli));
    }
    for (i, rotate) in ["0", "90", "180", "270"].iter().enumerate() {
        let (width, height) = ours[i].dimensions();
        assert_eq!(height, 120, "rotate={rotate}");
        assert_eq!(
            width < height,
            i % 2 == 1,
            "rotate={rotate}: {width}x{height}"
        );
        assert_eq!(
            ours[i].dimensions(),
            theirs[i].dimensions(),
            "rotate={rotate}"
        );
        let same = mean_difference(&ours[i], &theirs[i]);
        // The same size turned the other way: what a wrong direction would give.
        let other = mean_difference(&ours[i], &theirs[(i + 2) % 4]);
        eprintln!(
            "rotate={rotate}: {same:.2} from the CLI's frame, {other:.2} from the opposite turn"
        );
        assert!(
            same < 6.0,
            "rotate={rotate}: {same:.2} levels from the CLI's frame"
        );
        assert!(
            other > 3.0 * same + 10.0,
            "rotate={rotate}: the opposite turn is as close ({other:.2})"
        );
    }
}
