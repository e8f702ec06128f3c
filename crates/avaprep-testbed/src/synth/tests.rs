//! Tests on real generated data: decode with libav, check formats, renders and learnability.

use std::path::PathBuf;
use std::sync::OnceLock;

use super::*;

fn quiet_libav() {
    ffmpeg_next::init().unwrap();
    ffmpeg_next::log::set_level(ffmpeg_next::log::Level::Error);
}

const QUICK_VIDEOS: usize = 6;

/// One quick dataset shared by the tests that only read it.
fn quick() -> &'static (SynthConfig, SynthReport) {
    static QUICK: OnceLock<(SynthConfig, SynthReport)> = OnceLock::new();
    QUICK.get_or_init(|| {
        quiet_libav();
        let config = SynthConfig {
            out: crate::scratch::process_folder("synth-quick").unwrap(),
            videos: QUICK_VIDEOS,
            seed: 7,
            profile: Profile::Quick,
            exports: false,
        };
        let report = generate(&config).expect("generate quick");
        eprintln!(
            "synth quick, {} videos: {:.2} s",
            config.videos, report.elapsed_s
        );
        (config, report)
    })
}

#[test]
fn quick_generates() {
    let (config, report) = quick();
    eprintln!("{}", serde_json::to_string_pretty(report).unwrap());
    assert!(config.out.join(REPORT_FILE).exists());
}

#[test]
fn ava_times_two_videos() {
    quiet_libav();
    let folder = tempfile::tempdir().unwrap();
    let config = SynthConfig {
        out: folder.path().to_path_buf(),
        videos: 2,
        seed: 3,
        profile: Profile::AvaTimes,
        exports: false,
    };
    let report = generate(&config).expect("generate ava-times");
    eprintln!("synth ava-times, 2 videos: {:.2} s", report.elapsed_s);
    let t = report.times;
    assert_eq!((t.segment_start, t.segment_end), (900, 1801));
    assert_eq!((t.first_keyframe, t.last_keyframe), (902, 1798));
    assert_eq!(
        zip_file(&config, annotations::INCLUDED).lines().count(),
        897
    );
    let mut gt = gt_by_keyframe(&zip_file(&config, annotations::GT_TRAIN));
    gt.extend(gt_by_keyframe(&zip_file(&config, annotations::GT_VAL)));
    let seconds: Vec<u32> = gt.keys().map(|k| k.1).collect();
    assert_eq!(seconds.iter().min(), Some(&902));
    assert_eq!(seconds.iter().max(), Some(&1798));
    let plan = plan::DatasetPlan::new(config.profile, config.videos, config.seed);
    for (v, spec) in report.videos.iter().zip(&plan.videos) {
        eprintln!(
            "{} {} {}x{} {} frames",
            v.file_name, v.frame_rate, v.width, v.height, v.frames
        );
        assert!(v.duration_s >= 1801.0);
        for target in [902.0, 1798.0, 1800.9] {
            check_seek(&video_path(&config, v), spec, target);
        }
    }
    let _ = std::fs::remove_dir_all(&config.out);
}

/// Seeks to AVA time `target` (adding the start time, as a libav caller must) and checks that
/// the first frame at or after it carries the code of the planned frame with that pts.
fn check_seek(path: &std::path::Path, spec: &plan::VideoSpec, target: f64) {
    let start = spec.start_ticks as f64 / plan::TICKS as f64;
    let mut input = ff::format::input(path).unwrap();
    let stream = input.streams().best(ff::media::Type::Video).unwrap();
    let (index, tb) = (stream.index(), stream.time_base());
    let ctx = ff::codec::context::Context::from_parameters(stream.parameters()).unwrap();
    let mut dec = ctx.decoder().video().unwrap();
    let ts = ((start + target) * 1e6) as i64;
    input.seek(ts, ..ts).unwrap();
    let mut frame = ff::frame::Video::empty();
    for (s, packet) in input.packets() {
        if s.index() != index {
            continue;
        }
        dec.send_packet(&packet).unwrap();
        while dec.receive_frame(&mut frame).is_ok() {
            let t = frame.timestamp().unwrap() as f64 * f64::from(tb) - start;
            if t + 1e-3 < target {
                continue;
            }
            let code = read_frame_code(
                frame.data(0),
                frame.width(),
                frame.height(),
                frame.stride(0),
            );
            let i = code.expect("frame code") as usize;
            assert!(
                (spec.frame_time(i) - t).abs() < 1e-3,
                "{}: code {i} at {t}",
                spec.id
            );
            return;
        }
    }
    panic!("{}: no frame at or after {target}", spec.id);
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    quiet_libav();
    let run = |seed: u64| {
        let folder = tempfile::tempdir().unwrap();
        let config = SynthConfig {
            out: folder.path().to_path_buf(),
            videos: 4,
            seed,
            profile: Profile::Quick,
            exports: false,
        };
        let report = generate(&config).unwrap();
        eprintln!(
            "synth quick, 4 videos (seed {seed}): {:.2} s",
            report.elapsed_s
        );
        report.files
    };
    let (a, b, c) = (run(11), run(11), run(12));
    let hashes = |f: &[MirrorFile]| -> Vec<(String, String)> {
        f.iter()
            .map(|m| (m.path.clone(), m.sha256.clone()))
            .collect()
    };
    assert_eq!(
        hashes(&a),
        hashes(&b),
        "same seed must give identical files"
    );
    // Empty files (no test videos at N = 4) are the same whatever the seed.
    let same: Vec<&str> = a
        .iter()
        .filter(|x| x.size > 0 && c.iter().any(|y| y.sha256 == x.sha256))
        .map(|x| x.path.as_str())
        .collect();
    assert!(
        same.is_empty(),
        "another seed must change every file: {same:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Decoding helpers (libav through ffmpeg-next)

use ffmpeg_next as ff;

#[derive(Clone)]
struct Plane {
    data: Vec<u8>,
    w: usize,
    h: usize,
}

impl Plane {
    fn copy(frame: &ff::frame::Video, index: usize, w: usize, h: usize) -> Self {
        let stride = frame.stride(index);
        let src = frame.data(index);
        let mut data = Vec::with_capacity(w * h);
        for y in 0..h {
            data.extend_from_slice(&src[y * stride..y * stride + w]);
        }
        Plane { data, w, h }
    }
    fn at(&self, x: usize, y: usize) -> u8 {
        self.data[y * self.w + x]
    }
}

#[derive(Clone)]
struct Picture {
    /// AVA time of the frame (pts minus the first frame's pts).
    t: f64,
    y: Plane,
    u: Plane,
    v: Plane,
}

struct Decoded {
    format: String,
    codec: String,
    width: u32,
    height: u32,
    /// Container pts of every frame, seconds, in output order.
    pts: Vec<f64>,
    codes: Vec<Option<u32>>,
    b_frames: usize,
    /// For each requested AVA time, the decoded frame nearest to it.
    pictures: Vec<Option<Picture>>,
}

fn decode(path: &std::path::Path, targets: &[f64]) -> Decoded {
    let mut input = ff::format::input(path).unwrap();
    let format = input.format().name().to_string();
    let stream = input.streams().best(ff::media::Type::Video).unwrap();
    let (index, tb) = (stream.index(), stream.time_base());
    let ctx = ff::codec::context::Context::from_parameters(stream.parameters()).unwrap();
    let mut dec = ctx.decoder().video().unwrap();
    let codec = dec
        .codec()
        .map(|c| c.name().to_string())
        .unwrap_or_default();
    let mut out = Decoded {
        format,
        codec,
        width: dec.width(),
        height: dec.height(),
        pts: Vec::new(),
        codes: Vec::new(),
        b_frames: 0,
        pictures: vec![None; targets.len()],
    };
    let mut frame = ff::frame::Video::empty();
    let mut receive = |dec: &mut ff::decoder::Video, out: &mut Decoded| {
        while dec.receive_frame(&mut frame).is_ok() {
            take_frame(&frame, tb, targets, out);
        }
    };
    for (s, packet) in input.packets() {
        if s.index() == index {
            dec.send_packet(&packet).unwrap();
            receive(&mut dec, &mut out);
        }
    }
    dec.send_eof().unwrap();
    receive(&mut dec, &mut out);
    out
}

fn take_frame(frame: &ff::frame::Video, tb: ff::Rational, targets: &[f64], out: &mut Decoded) {
    let pts = frame.timestamp().expect("frame without timestamp") as f64 * f64::from(tb);
    let (w, h) = (frame.width() as usize, frame.height() as usize);
    out.codes.push(read_frame_code(
        frame.data(0),
        frame.width(),
        frame.height(),
        frame.stride(0),
    ));
    if frame.kind() == ff::picture::Type::B {
        out.b_frames += 1;
    }
    out.pts.push(pts);
    let t = pts - out.pts[0];
    for (k, &target) in targets.iter().enumerate() {
        let better = match &out.pictures[k] {
            Some(p) => (t - target).abs() < (p.t - target).abs(),
            None => (t - target).abs() < 0.1,
        };
        if better {
            out.pictures[k] = Some(Picture {
                t,
                y: Plane::copy(frame, 0, w, h),
                u: Plane::copy(frame, 1, w.div_ceil(2), h.div_ceil(2)),
                v: Plane::copy(frame, 2, w.div_ceil(2), h.div_ceil(2)),
            });
        }
    }
}

fn video_path(config: &SynthConfig, v: &VideoReport) -> PathBuf {
    config.out.join(&v.path)
}

// ---------------------------------------------------------------------------------------------
// Videos

#[test]
fn videos_decode_as_requested() {
    let (config, report) = quick();
    let plan = plan::DatasetPlan::new(config.profile, config.videos, config.seed);
    for (v, spec) in report.videos.iter().zip(&plan.videos) {
        let d = decode(&video_path(config, v), &[]);
        eprintln!(
            "{}: {} {} {}x{} {} frames, {} B, first pts {:.3}, last {:.3}",
            v.file_name,
            d.format,
            d.codec,
            d.width,
            d.height,
            d.pts.len(),
            d.b_frames,
            d.pts[0],
            d.pts.last().unwrap()
        );
        assert!(
            d.format.contains(&v.container),
            "{} is {}",
            v.file_name,
            d.format
        );
        assert_eq!(d.codec, v.codec);
        assert_eq!((d.width, d.height), (v.width, v.height));
        assert_eq!(d.pts.len(), v.frames, "{}", v.file_name);
        assert_eq!(d.b_frames > 0, v.b_frames, "{} B-frames", v.file_name);
        assert!(
            (d.pts[0] - v.start_time_s).abs() < 1e-3,
            "{} start",
            v.file_name
        );
        let span = d.pts.last().unwrap() - d.pts[0];
        assert!(
            span < v.duration_s && span > v.duration_s - 0.06,
            "{} span {span}",
            v.file_name
        );
        check_codes_and_pts(&d, spec);
        check_rate(&d, &v.frame_rate, &v.file_name);
    }
}

/// Frame codes come out in order, one per frame, and each frame's pts is the planned time
/// of the source frame its code names (1 ms: Matroska stores milliseconds).
fn check_codes_and_pts(d: &Decoded, spec: &plan::VideoSpec) {
    for (i, (code, pts)) in d.codes.iter().zip(&d.pts).enumerate() {
        assert_eq!(*code, Some(i as u32), "{} frame {i}", spec.id);
        let planned = spec.frame_time(i) + spec.start_ticks as f64 / plan::TICKS as f64;
        assert!(
            (pts - planned).abs() <= 1e-3,
            "{} frame {i}: pts {pts} vs {planned}",
            spec.id
        );
    }
}

fn check_rate(d: &Decoded, rate: &str, name: &str) {
    let deltas: Vec<f64> = d.pts.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = deltas.iter().sum::<f64>() / deltas.len() as f64;
    let sd = (deltas.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / deltas.len() as f64).sqrt();
    if rate == "vfr" {
        assert!(sd > 0.005, "{name}: VFR intervals too regular (sd {sd})");
    } else {
        let (n, den) = rate.split_once('/').unwrap();
        let period = den.parse::<f64>().unwrap() / n.parse::<f64>().unwrap();
        assert!(
            (mean - period).abs() < 1e-4,
            "{name}: mean interval {mean} vs {period}"
        );
        assert!(sd < 1e-3, "{name}: CFR jitter {sd}");
    }
}

// ---------------------------------------------------------------------------------------------
// Annotation files

fn zip_files(config: &SynthConfig) -> Vec<(String, String)> {
    let f = std::fs::File::open(config.out.join(mirror::ZIP_PATH)).unwrap();
    let mut zip = zip::ZipArchive::new(f).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut entry = zip.by_index(i).unwrap();
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            (entry.name().unwrap().to_string(), text)
        })
        .collect()
}

fn zip_file(config: &SynthConfig, name: &str) -> String {
    zip_files(config)
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name} missing from zip"))
        .1
}

fn tar_files(config: &SynthConfig) -> Vec<(String, String)> {
    let f = std::fs::File::open(config.out.join(mirror::SLOWFAST_TAR)).unwrap();
    let mut tar = tar::Archive::new(f);
    tar.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut text = String::new();
            std::io::Read::read_to_string(&mut e, &mut text).unwrap();
            (name, text)
        })
        .collect()
}

fn is_video_id(s: &str) -> bool {
    s.len() == 11
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn is_decimal(s: &str, places: usize) -> bool {
    matches!(s.split_once('.'), Some((i, f)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit())
        && f.len() == places && f.bytes().all(|b| b.is_ascii_digit()))
}

fn is_second(s: &str, first: u32, last: u32) -> bool {
    s.len() == 4
        && s.bytes().all(|b| b.is_ascii_digit())
        && (first..=last).contains(&s.parse::<u32>().unwrap())
}

/// Checks one box CSV row; `label` validates column 7 and `score_places` column 8 (None: the
/// ground truth's person id).
fn check_box_row(
    row: &str,
    report: &SynthReport,
    label: &dyn Fn(&str) -> bool,
    score_places: Option<usize>,
) {
    let f: Vec<&str> = row.split(',').collect();
    assert_eq!(f.len(), 8, "{row}");
    let v = report.videos.iter().find(|v| v.id == f[0]).expect(row);
    assert!(is_video_id(f[0]), "{row}");
    let (first, last) = (v.first_keyframe.unwrap(), v.last_keyframe.unwrap());
    assert!(is_second(f[1], first, last), "{row}");
    let b: Vec<f64> = f[2..6].iter().map(|x| x.parse().unwrap()).collect();
    assert!(f[2..6].iter().all(|x| is_decimal(x, 3)), "{row}");
    assert!(b.iter().all(|x| (0.0..=1.0).contains(x)), "{row}");
    assert!(b[0] < b[2] && b[1] < b[3], "{row}");
    assert!(label(f[6]), "label in {row}");
    match score_places {
        Some(p) => assert!(is_decimal(f[7], p), "{row}"),
        None => assert!(f[7].parse::<u32>().is_ok(), "{row}"),
    }
}

#[test]
fn annotation_files_are_strict_ava() {
    let (config, report) = quick();
    let files = zip_files(config);
    let mut names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ava_action_list_v2.2.pbtxt",
            "ava_action_list_v2.2_for_activitynet_2019.pbtxt",
            "ava_included_timestamps_v2.2.txt",
            "ava_test_excluded_timestamps_v2.2.csv",
            "ava_test_v2.2.txt",
            "ava_train_excluded_timestamps_v2.2.csv",
            "ava_train_v2.2.csv",
            "ava_val_excluded_timestamps_v2.2.csv",
            "ava_val_v2.2.csv",
        ]
    );
    let ids: Vec<u32> = report.labels.iter().map(|l| l.id).collect();
    let is_action = |s: &str| s.parse::<u32>().is_ok_and(|i| ids.contains(&i));
    let mut multi = 0;
    for (split, file) in [
        ("train", annotations::GT_TRAIN),
        ("val", annotations::GT_VAL),
    ] {
        let text = zip_file(config, file);
        let rows: Vec<&str> = text.lines().collect();
        assert!(!rows.is_empty(), "{file} empty");
        let mut boxes = std::collections::HashMap::new();
        for row in &rows {
            check_box_row(row, report, &is_action, None);
            let v = report
                .videos
                .iter()
                .find(|v| row.starts_with(&v.id))
                .unwrap();
            assert_eq!(v.split, split, "{row} in {file}");
            let key = row.rsplitn(3, ',').nth(2).unwrap().to_string();
            *boxes.entry(key).or_insert(0) += 1;
        }
        multi += boxes.values().filter(|&&n| n > 1).count();
        eprintln!("{file}: {} rows, {} boxes", rows.len(), boxes.len());
    }
    assert!(multi > 0, "no multi-label box");
    check_label_maps(config);
    check_lists(config, report);
    check_detections(config, report);
}

fn check_label_maps(config: &SynthConfig) {
    let full = zip_file(config, annotations::LABELS);
    let scored = zip_file(config, annotations::LABELS_SCORED);
    assert_eq!(
        full.matches("label {\n  name: \"").count(),
        plan::ACTIONS.len()
    );
    assert_eq!(
        full.matches("\n  label_type: ").count(),
        plan::ACTIONS.len()
    );
    let scored_n = plan::ACTIONS.iter().filter(|a| a.4).count();
    assert!(scored_n < plan::ACTIONS.len());
    assert_eq!(scored.matches("item {\n  name: \"").count(), scored_n);
    assert!(full.contains("  name: \"stand still\"\n  label_id: 12\n"));
    assert!(!scored.contains("id: 12\n"));
}

fn check_lists(config: &SynthConfig, report: &SynthReport) {
    let t = report.times;
    let included = zip_file(config, annotations::INCLUDED);
    let expected: String = (t.first_keyframe..=t.last_keyframe)
        .map(|s| format!("{s:04}\n"))
        .collect();
    assert_eq!(included, expected);
    let of = |split: &str| -> Vec<&VideoReport> {
        report.videos.iter().filter(|v| v.split == split).collect()
    };
    assert!(!of("train").is_empty() && !of("val").is_empty());
    let test_ids = zip_file(config, annotations::TEST_IDS);
    assert_eq!(test_ids.lines().count(), of("test").len());
    let trainval = std::fs::read_to_string(config.out.join(mirror::TRAINVAL_NAMES)).unwrap();
    assert_eq!(
        trainval.lines().count(),
        of("train").len() + of("val").len()
    );
    for name in trainval.lines() {
        assert!(
            config.out.join("ava-dataset/trainval").join(name).exists(),
            "{name}"
        );
    }
    let test = std::fs::read_to_string(config.out.join(mirror::TEST_NAMES)).unwrap();
    for name in test.lines() {
        assert!(
            config.out.join("ava-dataset/test").join(name).exists(),
            "{name}"
        );
    }
    let mut excluded = 0;
    for file in [
        annotations::EXCL_TRAIN,
        annotations::EXCL_VAL,
        annotations::EXCL_TEST,
    ] {
        for row in zip_file(config, file).lines() {
            let f: Vec<&str> = row.split(',').collect();
            assert_eq!(f.len(), 2, "{row}");
            assert!(is_video_id(f[0]) && is_second(f[1], t.first_keyframe, t.last_keyframe));
            excluded += 1;
        }
    }
    assert!(excluded > 0);
    let short = report
        .videos
        .iter()
        .filter(|v| v.last_keyframe.is_some_and(|l| l < t.last_keyframe));
    assert_eq!(short.count(), 1, "one video annotated over a shorter range");
}

fn check_detections(config: &SynthConfig, report: &SynthReport) {
    let files = tar_files(config);
    let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    let val_path = format!("{}{}", mirror::TAR_BOX_DIR, mirror::DET_VAL);
    let train_path = format!("{}{}", mirror::TAR_BOX_DIR, mirror::DET_TRAIN);
    assert!(names.contains(&val_path.as_str()) && names.contains(&train_path.as_str()));
    assert!(names.iter().all(|n| n.starts_with(mirror::TAR_TOP)));
    let ids: Vec<u32> = report.labels.iter().map(|l| l.id).collect();
    let text = |p: &str| files.iter().find(|f| f.0 == p).unwrap().1.clone();
    let val = text(&val_path);
    for row in val.lines() {
        check_box_row(row, report, &|s| s.is_empty(), Some(6));
    }
    let train = text(&train_path);
    let mut negatives = 0;
    for row in train.lines() {
        let train_label = |s: &str| s == "-1" || s.parse::<u32>().is_ok_and(|i| ids.contains(&i));
        check_box_row(row, report, &train_label, Some(6));
        negatives += row.contains(",-1,") as usize;
    }
    eprintln!(
        "detections: val {} rows, train {} rows ({negatives} negatives)",
        val.lines().count(),
        train.lines().count()
    );
    assert!(negatives > 0 && val.lines().count() > 0);
}

// ---------------------------------------------------------------------------------------------
// Renders: boxes sit on actors, and only motion tells the actions apart

/// Chroma distance from grey above which a pixel is an actor (actors have >= 70, the grey
/// background 0 plus coding noise).
const ACTOR_CHROMA: i32 = 40;

fn is_actor(p: &Picture, x: usize, y: usize) -> bool {
    (p.u.at(x, y) as i32 - 128).abs() + (p.v.at(x, y) as i32 - 128).abs() > ACTOR_CHROMA
}

/// A normalised box in chroma-plane pixels `[x0, x1) x [y0, y1)`.
fn chroma_rect(p: &Picture, b: [f64; 4]) -> [usize; 4] {
    let (w, h) = (p.u.w as f64, p.u.h as f64);
    [
        (b[0] * w).round() as usize,
        (b[1] * h).round() as usize,
        ((b[2] * w).round() as usize).min(p.u.w),
        ((b[3] * h).round() as usize).min(p.u.h),
    ]
}

/// Ground-truth boxes of one split file, grouped by (video id, second), duplicates merged.
fn gt_by_keyframe(text: &str) -> std::collections::BTreeMap<(String, u32), Vec<[f64; 4]>> {
    let mut out: std::collections::BTreeMap<(String, u32), Vec<[f64; 4]>> = Default::default();
    for row in text.lines() {
        let f: Vec<&str> = row.split(',').collect();
        let b = [f[2], f[3], f[4], f[5]].map(|x| x.parse::<f64>().unwrap());
        let boxes = out
            .entry((f[0].to_string(), f[1].parse().unwrap()))
            .or_default();
        if !boxes.contains(&b) {
            boxes.push(b);
        }
    }
    out
}

#[test]
fn boxes_are_on_actors() {
    let (config, report) = quick();
    let mut gt = gt_by_keyframe(&zip_file(config, annotations::GT_TRAIN));
    gt.extend(gt_by_keyframe(&zip_file(config, annotations::GT_VAL)));
    let (mut boxes, mut weak, mut min_fill) = (0, 0, 1.0f64);
    let (mut actor_px, mut outside_px) = (0usize, 0usize);
    for v in report.videos.iter().filter(|v| v.split != "test") {
        let seconds: Vec<u32> = (v.first_keyframe.unwrap()..=v.last_keyframe.unwrap()).collect();
        // The tables are on the dataset's clock; the files count from their own start.
        let targets: Vec<f64> = seconds
            .iter()
            .map(|&s| f64::from(s - report.video_start))
            .collect();
        let d = decode(&video_path(config, v), &targets);
        for (s, pic) in seconds.iter().zip(&d.pictures) {
            let pic = pic.as_ref().expect("frame at keyframe");
            let keyframe_boxes = gt.get(&(v.id.clone(), *s)).cloned().unwrap_or_default();
            let rects: Vec<[usize; 4]> = keyframe_boxes
                .iter()
                .map(|b| chroma_rect(pic, *b))
                .collect();
            for r in &rects {
                let fill = actor_fraction(pic, *r);
                boxes += 1;
                weak += (fill <= 0.5) as usize;
                min_fill = min_fill.min(fill);
            }
            let (a, o) = actor_pixels_outside(pic, &rects);
            actor_px += a;
            outside_px += o;
        }
    }
    let outside = outside_px as f64 / actor_px as f64;
    eprintln!(
        "render check: {boxes} boxes, {weak} at most half actor pixels (min fill {min_fill:.2}); \
         {:.2}% of actor pixels outside every box",
        100.0 * outside
    );
    assert!(boxes > 50);
    assert_eq!(weak, 0, "every box must be mostly actor pixels");
    assert!(outside < 0.03, "actor pixels outside boxes: {outside}");
}

fn actor_fraction(p: &Picture, r: [usize; 4]) -> f64 {
    let mut n = 0;
    for y in r[1]..r[3] {
        for x in r[0]..r[2] {
            n += is_actor(p, x, y) as usize;
        }
    }
    n as f64 / ((r[2] - r[0]) * (r[3] - r[1])).max(1) as f64
}

/// Actor pixels in the frame, and those farther than 2 chroma pixels from every box (the
/// frame is up to half a frame period away from the keyframe time, so actors may have moved).
fn actor_pixels_outside(p: &Picture, rects: &[[usize; 4]]) -> (usize, usize) {
    let (mut all, mut outside) = (0, 0);
    for y in 0..p.u.h {
        for x in 0..p.u.w {
            if !is_actor(p, x, y) {
                continue;
            }
            all += 1;
            let near =
                |r: &[usize; 4]| x + 2 >= r[0] && x < r[2] + 2 && y + 2 >= r[1] && y < r[3] + 2;
            outside += !rects.iter().any(near) as usize;
        }
    }
    (all, outside)
}

/// One labelled box with its motion features (from a ±0.4 s clip) and appearance features
/// (from the keyframe alone).
struct Sample {
    class: usize,
    motion: Vec<f64>,
    colour: Vec<f64>,
    size: Vec<f64>,
    aspect: Vec<f64>,
    spin: bool,
    /// Mean luma change on the actor between the clip's ends (still actors only).
    texture_change: Option<f64>,
}

/// Actor of colour `c` in the box grown by `grow` (chroma px): pixel count and centroid.
fn track(p: &Picture, r: [usize; 4], grow: [usize; 2], c: [f64; 2]) -> (f64, f64, f64) {
    let (x0, y0) = (r[0].saturating_sub(grow[0]), r[1].saturating_sub(grow[1]));
    let (x1, y1) = ((r[2] + grow[0]).min(p.u.w), (r[3] + grow[1]).min(p.u.h));
    let (mut n, mut sx, mut sy) = (0.0, 0.0, 0.0);
    for y in y0..y1 {
        for x in x0..x1 {
            let d = (p.u.at(x, y) as f64 - c[0]).abs() + (p.v.at(x, y) as f64 - c[1]).abs();
            if d < 30.0 {
                n += 1.0;
                sx += x as f64;
                sy += y as f64;
            }
        }
    }
    (n, sx / n.max(1.0), sy / n.max(1.0))
}

/// The actor's own colour: per-channel median of actor pixels in its box (an occluder is
/// smaller than half the box in all but rare cases).
fn box_colour(p: &Picture, r: [usize; 4]) -> Option<[f64; 2]> {
    let (mut us, mut vs) = (Vec::new(), Vec::new());
    for y in r[1]..r[3] {
        for x in r[0]..r[2] {
            if is_actor(p, x, y) {
                us.push(p.u.at(x, y));
                vs.push(p.v.at(x, y));
            }
        }
    }
    if us.is_empty() {
        return None;
    }
    us.sort_unstable();
    vs.sort_unstable();
    Some([us[us.len() / 2] as f64, vs[vs.len() / 2] as f64])
}

fn sample(pics: [&Picture; 3], b: &annotations::GtBox) -> Option<Sample> {
    let [before, at, after] = pics;
    let r = chroma_rect(at, [b.x1, b.y1, b.x2, b.y2]);
    let c = box_colour(at, r)?;
    let grow = [at.u.w / 8, at.u.h / 8];
    let (n0, x0, y0) = track(before, r, grow, c);
    let (n1, x1, y1) = track(after, r, grow, c);
    if n0 < 4.0 || n1 < 4.0 {
        return None;
    }
    let dt = after.t - before.t;
    let (w, h) = (at.u.w as f64, at.u.h as f64);
    let class = plan::MOTIONS.iter().position(|m| *m == b.motion).unwrap();
    let (bw, bh) = ((b.x2 - b.x1) * w * 2.0, (b.y2 - b.y1) * h * 2.0);
    Some(Sample {
        class,
        motion: vec![(x1 - x0) / w / dt, (y1 - y0) / h / dt, (n1 / n0).ln() / dt],
        colour: vec![c[0], c[1]],
        size: vec![(bw * bh).ln()],
        aspect: vec![(bw / bh).ln()],
        spin: b.spin,
        texture_change: (b.motion == plan::Action::StandStill)
            .then(|| texture_change(before, after, r, c))
            .flatten(),
    })
}

/// Mean |luma difference| over pixels of colour `c` in both frames: spinning stripes change
/// under a still actor, static ones do not.
fn texture_change(a: &Picture, b: &Picture, r: [usize; 4], c: [f64; 2]) -> Option<f64> {
    let own = |p: &Picture, x: usize, y: usize| {
        (p.u.at(x, y) as f64 - c[0]).abs() + (p.v.at(x, y) as f64 - c[1]).abs() < 30.0
    };
    let (mut sum, mut n) = (0.0, 0.0);
    for y in r[1]..r[3] {
        for x in r[0]..r[2] {
            if own(a, x, y) && own(b, x, y) {
                // Chroma pixel (x, y) covers luma (2x.., 2y..): compare one luma sample.
                let (lx, ly) = ((2 * x).min(a.y.w - 1), (2 * y).min(a.y.h - 1));
                sum += (a.y.at(lx, ly) as f64 - b.y.at(lx, ly) as f64).abs();
                n += 1.0;
            }
        }
    }
    (n >= 10.0).then(|| sum / n)
}

/// Nearest class mean on standardised features, trained on even samples, scored on odd ones.
fn nearest_mean_accuracy(samples: &[(usize, Vec<f64>)], classes: usize) -> f64 {
    let dims = samples[0].1.len();
    let mean_sd: Vec<(f64, f64)> = (0..dims)
        .map(|d| {
            let xs: Vec<f64> = samples.iter().map(|s| s.1[d]).collect();
            let m = xs.iter().sum::<f64>() / xs.len() as f64;
            let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64;
            (m, var.sqrt().max(1e-9))
        })
        .collect();
    let z = |x: &[f64]| -> Vec<f64> {
        x.iter()
            .zip(&mean_sd)
            .map(|(v, (m, s))| (v - m) / s)
            .collect()
    };
    let mut sums = vec![(vec![0.0; dims], 0.0); classes];
    for (class, x) in samples.iter().step_by(2) {
        for (acc, v) in sums[*class].0.iter_mut().zip(z(x)) {
            *acc += v;
        }
        sums[*class].1 += 1.0;
    }
    let centres: Vec<Option<Vec<f64>>> = sums
        .into_iter()
        .map(|(s, n)| (n > 0.0).then(|| s.iter().map(|v| v / n).collect()))
        .collect();
    let test: Vec<&(usize, Vec<f64>)> = samples.iter().skip(1).step_by(2).collect();
    let correct = test
        .iter()
        .filter(|(class, x)| {
            let zx = z(x);
            let dist = |c: &Vec<f64>| c.iter().zip(&zx).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
            let best = (0..classes)
                .filter_map(|k| centres[k].as_ref().map(|c| (k, dist(c))))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            best.0 == *class
        })
        .count();
    correct as f64 / test.len() as f64
}

#[test]
fn motion_is_learnable_appearance_is_not() {
    let (config, report) = quick();
    let plan = plan::DatasetPlan::new(config.profile, config.videos, config.seed);
    let t = report.times;
    // In the files' seconds: the scene's clock.
    let seconds: Vec<u32> = (t.first_keyframe..=t.last_keyframe)
        .map(|s| s - report.video_start)
        .collect();
    let mut samples = Vec::new();
    for (v, spec) in report.videos.iter().zip(&plan.videos) {
        let targets: Vec<f64> = seconds
            .iter()
            .flat_map(|&s| [s as f64 - 0.4, s as f64, s as f64 + 0.4])
            .collect();
        let d = decode(&video_path(config, v), &targets);
        for (k, &s) in seconds.iter().enumerate() {
            let pics = [0, 1, 2].map(|j| d.pictures[3 * k + j].as_ref().unwrap());
            samples.extend(
                annotations::gt_boxes(spec, s)
                    .iter()
                    .filter_map(|b| sample(pics, b)),
            );
        }
    }
    let classes = plan::MOTIONS.len();
    let acc = |f: &dyn Fn(&Sample) -> Vec<f64>| {
        let xs: Vec<(usize, Vec<f64>)> = samples.iter().map(|s| (s.class, f(s))).collect();
        nearest_mean_accuracy(&xs, classes)
    };
    let motion = acc(&|s| s.motion.clone());
    let rule = samples
        .iter()
        .filter(|s| motion_rule(&s.motion) == s.class)
        .count() as f64
        / samples.len() as f64;
    let colour = acc(&|s| s.colour.clone());
    let size = acc(&|s| s.size.clone());
    let aspect = acc(&|s| s.aspect.clone());
    let appearance = acc(&|s| [&s.colour[..], &s.size, &s.aspect].concat());
    let mut counts = vec![0; classes];
    samples.iter().for_each(|s| counts[s.class] += 1);
    let majority = *counts.iter().max().unwrap() as f64 / samples.len() as f64;
    eprintln!(
        "learnability over {} boxes (classes {counts:?}, chance {:.2}, majority {majority:.2}): \
         motion {motion:.2} (fixed rule {rule:.2}); single frame: colour {colour:.2}, size {size:.2}, aspect {aspect:.2}, \
         all {appearance:.2}",
        samples.len(),
        1.0 / classes as f64
    );
    assert!(samples.len() > 150);
    check_spin(&samples);
    assert!(
        motion > 0.75 && rule > 0.85,
        "motion accuracy {motion}, rule {rule}"
    );
    for (name, a) in [
        ("colour", colour),
        ("size", size),
        ("aspect", aspect),
        ("all", appearance),
    ] {
        assert!(a < majority + 0.15, "{name} accuracy {a} is above chance");
    }
}

/// A fixed, untrained reading of the clip: translation above 5% of the frame per second wins,
/// else the change of area, else still. Indices follow `plan::MOTIONS`.
fn motion_rule(m: &[f64]) -> usize {
    let (dx, dy, g) = (m[0], m[1], m[2]);
    if dx.abs().max(dy.abs()) > 0.05 {
        if dx.abs() > dy.abs() {
            if dx < 0.0 { 0 } else { 1 }
        } else if dy < 0.0 {
            2
        } else {
            3
        }
    } else if g > 0.1 {
        4
    } else if g < -0.1 {
        5
    } else {
        6
    }
}

/// Spin (the multi-label action) is visible over a clip: among still actors, the texture
/// change separates spinning from non-spinning ones at a midpoint threshold.
fn check_spin(samples: &[Sample]) {
    let still: Vec<(bool, f64)> = samples
        .iter()
        .filter_map(|s| s.texture_change.map(|c| (s.spin, c)))
        .collect();
    let mean = |spin: bool| {
        let xs: Vec<f64> = still.iter().filter(|s| s.0 == spin).map(|s| s.1).collect();
        xs.iter().sum::<f64>() / xs.len().max(1) as f64
    };
    let (with, without) = (mean(true), mean(false));
    let threshold = 0.5 * (with + without);
    let correct = still
        .iter()
        .filter(|(spin, c)| (*c > threshold) == *spin)
        .count();
    let acc = correct as f64 / still.len() as f64;
    eprintln!(
        "spin among {} still actors: texture change {with:.1} (spin) vs {without:.1}, accuracy {acc:.2}",
        still.len()
    );
    assert!(
        still.iter().any(|s| s.0) && acc > 0.85,
        "spin accuracy {acc}"
    );
}

#[test]
fn plans_cover_kinds_and_splits_for_any_count() {
    for n in 1..=14 {
        let plan = plan::DatasetPlan::new(Profile::Quick, n, 5);
        let count = |s: plan::Split| plan.videos.iter().filter(|v| v.split == s).count();
        assert!(count(plan::Split::Train) >= 1, "n={n}");
        if n >= 2 {
            assert!(count(plan::Split::Val) >= 1, "n={n}");
        }
        let ids: std::collections::HashSet<&str> =
            plan.videos.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids.len(), n);
        assert!(ids.iter().all(|id| is_video_id(id)));
        if n >= 3 {
            assert!(
                ids.iter().any(|id| id.starts_with('-'))
                    && ids.iter().any(|id| id.starts_with('_'))
            );
        }
        let big = plan.videos.iter().filter(|v| v.width >= 1280).count();
        assert!(big <= 1, "n={n}: only one 720p video");
        annotations::AnnotationTexts::build(&plan);
    }
    let four = plan::DatasetPlan::new(Profile::Quick, 4, 5);
    let v = &four.videos;
    assert!(
        v.iter()
            .any(|v| v.container == plan::Container::Mp4 && v.b_frames)
    );
    assert!(v.iter().any(|v| v.container == plan::Container::Mkv));
    assert!(
        v.iter()
            .any(|v| v.container == plan::Container::Webm && v.codec == plan::Codec::Vp9)
    );
    assert!(
        v.iter()
            .any(|v| v.rate == plan::Rate::Variable && v.start_ticks > 0)
    );
}

/// The demo's dataset (12 videos, seed 1) and the trainer tests' (12 videos, seed 11): every
/// scored class has at least 20 boxes in train and in val, and val has at least 3 videos, so a
/// val mAP is a measurement.
#[test]
fn the_demo_and_trainer_datasets_have_enough_boxes_of_every_scored_class() {
    use std::collections::BTreeMap;
    let scored: Vec<u32> = plan::ACTIONS.iter().filter(|a| a.4).map(|a| a.1).collect();
    for seed in [1, 11] {
        let plan = plan::DatasetPlan::new(Profile::Quick, 12, seed);
        for split in [plan::Split::Train, plan::Split::Val] {
            let videos: Vec<_> = plan.videos.iter().filter(|v| v.split == split).collect();
            if split == plan::Split::Val {
                assert!(videos.len() >= plan::MIN_VAL_VIDEOS, "seed {seed}");
            }
            let mut boxes: BTreeMap<u32, usize> = BTreeMap::new();
            for video in &videos {
                let (first, last) = video.keyframes.unwrap();
                for t in first..=last {
                    for gt in annotations::gt_boxes(video, t) {
                        for id in gt.action_ids() {
                            *boxes.entry(id).or_default() += 1;
                        }
                    }
                }
            }
            for id in &scored {
                let count = boxes.get(id).copied().unwrap_or(0);
                assert!(
                    count >= 20,
                    "seed {seed}, {}: class {id} has {count} boxes ({boxes:?})",
                    split.name()
                );
            }
        }
    }
}
