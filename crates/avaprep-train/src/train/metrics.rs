//! The run's metrics: JSON lines and TensorBoard events as they happen, a CSV and a PNG of the
//! curves rewritten after every epoch.
//!
//! The PNG, in the embedded font: a title with the run's state (the epoch, or the stop reason)
//! and the kept weights' mAP, then three titled panels against the epoch with numbered axes: the
//! training loss per step and per epoch, the learning rate, and the validation mAP with the kept
//! evaluation circled.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::{Deserialize, Serialize};

use super::TrainError;
use super::tensorboard::EventWriter;
use avaprep::fsutil::write_atomic;

pub use avaprep::trainer_protocol::run_files::{
    CURVES as PLOT, METRICS_CSV as CSV, METRICS_JSONL as JSONL,
};

/// One line of `metrics.jsonl`; `type` tells which.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// A training batch. `epoch` is the fractional position the LR was computed at.
    Batch {
        epoch: f64,
        step: u64,
        lr: f64,
        loss: f64,
        clips_per_s: f64,
    },
    /// A finished epoch: mean batch loss, throughput of the training steps.
    Epoch {
        epoch: usize,
        step: u64,
        loss: f64,
        clips_per_s: f64,
        seconds: f64,
    },
    /// A validation round: frame-mAP and AP per scored class id (`null`: no ground truth).
    Eval {
        epoch: usize,
        step: u64,
        map: Option<f64>,
        #[serde(deserialize_with = "class_keys")]
        ap: BTreeMap<u16, Option<f64>>,
        seconds: f64,
    },
}

/// The AP table's class ids, which JSON writes as text keys. Inside a tagged enum serde reads
/// such a key as text only: read as numbers directly, every evaluation failed to parse, and a
/// resumed run dropped all of them from its history.
fn class_keys<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<u16, Option<f64>>, D::Error> {
    BTreeMap::<String, Option<f64>>::deserialize(deserializer)?
        .into_iter()
        .map(|(id, ap)| match id.parse::<u16>() {
            Ok(id) => Ok((id, ap)),
            Err(_) => Err(serde::de::Error::custom(format!(
                "class id {id:?} is not a number"
            ))),
        })
        .collect()
}

impl Record {
    fn step(&self) -> u64 {
        match self {
            Record::Batch { step, .. } | Record::Epoch { step, .. } | Record::Eval { step, .. } => {
                *step
            }
        }
    }

    /// The record as TensorBoard scalars at its step: per batch the loss, learning rate and
    /// throughput; per epoch its mean loss and throughput; per evaluation the mAP and each
    /// class's AP (classes without ground truth have none).
    pub fn tensorboard_scalars(&self) -> (u64, Vec<(String, f64)>) {
        let values = match self {
            Record::Batch {
                lr,
                loss,
                clips_per_s,
                ..
            } => vec![
                ("train/loss".to_string(), *loss),
                ("train/lr".to_string(), *lr),
                ("train/clips_per_s".to_string(), *clips_per_s),
            ],
            Record::Epoch {
                loss, clips_per_s, ..
            } => vec![
                ("epoch/loss".to_string(), *loss),
                ("epoch/clips_per_s".to_string(), *clips_per_s),
            ],
            Record::Eval { map, ap, .. } => map
                .map(|map| ("val/mAP".to_string(), map))
                .into_iter()
                .chain(
                    ap.iter()
                        .filter_map(|(id, ap)| Some((format!("val/AP/{id}"), (*ap)?))),
                )
                .collect(),
        };
        (self.step(), values)
    }
}

#[derive(Debug)]
pub struct Metrics {
    dir: PathBuf,
    pub records: Vec<Record>,
    events: EventWriter,
}

impl Metrics {
    /// Starts the metrics of a run; when resuming at `step`, keeps the records up to it and
    /// drops what a killed run logged after its last checkpoint. `config` (TOML) heads the
    /// TensorBoard file as text.
    pub fn open(
        run_dir: &Path,
        resume_step: Option<u64>,
        config: &str,
    ) -> Result<Self, TrainError> {
        let path = run_dir.join(JSONL);
        let records: Vec<Record> = match (resume_step, std::fs::read_to_string(&path)) {
            (Some(step), Ok(text)) => text
                .lines()
                .filter_map(|line| serde_json::from_str::<Record>(line).ok())
                .filter(|r| r.step() <= step)
                .collect(),
            _ => Vec::new(),
        };
        let text: String = records.iter().map(json_line).collect();
        write_atomic(&path, text.as_bytes()).map_err(|e| TrainError::io(&path, e))?;
        let events = EventWriter::create(run_dir, resume_step.is_some())
            .map_err(|e| TrainError::io(run_dir, e))?;
        let mut metrics = Self {
            dir: run_dir.to_path_buf(),
            records: Vec::new(),
            events,
        };
        // A markdown code block: four spaces before each line.
        let config: String = config.lines().map(|line| format!("    {line}\n")).collect();
        metrics.write_event(|events| events.text(0, "config", &config))?;
        for record in &records {
            metrics.write_event(|events| {
                let (step, values) = record.tensorboard_scalars();
                events.scalars(step, &values)
            })?;
        }
        metrics.records = records;
        Ok(metrics)
    }

    fn write_event(
        &mut self,
        write: impl FnOnce(&mut EventWriter) -> std::io::Result<()>,
    ) -> Result<(), TrainError> {
        write(&mut self.events).map_err(|e| TrainError::io(self.events.path(), e))
    }

    pub fn push(&mut self, record: Record) -> Result<(), TrainError> {
        let path = self.dir.join(JSONL);
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| TrainError::io(&path, e))?;
        file.write_all(json_line(&record).as_bytes())
            .map_err(|e| TrainError::io(&path, e))?;
        let (step, values) = record.tensorboard_scalars();
        self.write_event(|events| events.scalars(step, &values))?;
        self.records.push(record);
        Ok(())
    }

    /// Rewrites `metrics.csv` and `curves.png`; `classes` are the scored class ids.
    pub fn write_summaries(&self, classes: &[u16], notes: &CurveNotes) -> Result<(), TrainError> {
        let csv = self.dir.join(CSV);
        write_atomic(&csv, csv_text(&self.records, classes).as_bytes())
            .map_err(|e| TrainError::io(&csv, e))?;
        let png = self.dir.join(PLOT);
        let bytes = plot_png(&self.records, notes).map_err(|e| TrainError::Plot(e.to_string()))?;
        write_atomic(&png, &bytes).map_err(|e| TrainError::io(&png, e))
    }
}

fn json_line(record: &Record) -> String {
    serde_json::to_string(record).expect("records serialise") + "\n"
}

/// One row per record; columns a record lacks are empty.
pub fn csv_text(records: &[Record], classes: &[u16]) -> String {
    let mut out = String::from("type,epoch,step,lr,loss,clips_per_s,seconds,val_map");
    for id in classes {
        out.push_str(&format!(",ap_{id}"));
    }
    out.push('\n');
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
    for record in records {
        let row = match record {
            Record::Batch {
                epoch,
                step,
                lr,
                loss,
                clips_per_s,
            } => {
                format!("batch,{epoch:.4},{step},{lr:.8},{loss:.6},{clips_per_s:.3},,")
            }
            Record::Epoch {
                epoch,
                step,
                loss,
                clips_per_s,
                seconds,
            } => {
                format!("epoch,{epoch},{step},,{loss:.6},{clips_per_s:.3},{seconds:.3},")
            }
            Record::Eval {
                epoch,
                step,
                map,
                seconds,
                ..
            } => {
                format!("eval,{epoch},{step},,,,{seconds:.3},{}", opt(*map))
            }
        };
        out.push_str(&row);
        for id in classes {
            out.push(',');
            if let Record::Eval { ap, .. } = record {
                out.push_str(&opt(ap.get(id).copied().flatten()));
            }
        }
        out.push('\n');
    }
    out
}

type Series = Vec<(f64, f64)>;

/// What the curves picture says besides the records: how the run stands and which evaluation
/// early stopping kept.
#[derive(Debug, Clone, PartialEq)]
pub struct CurveNotes {
    /// "epoch 3 of 15" while training, the stop reason at the end.
    pub status: String,
    /// (val mAP, epoch) of the kept weights.
    pub best: Option<(f64, usize)>,
}

const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (1000, 1100);
const LOSS: RGBColor = RGBColor(31, 119, 180);
const EPOCH_LOSS: RGBColor = RGBColor(255, 127, 14);
const LR: RGBColor = RGBColor(44, 160, 44);
const MAP: RGBColor = RGBColor(214, 39, 40);

/// plotters draws text with the fonts registered under a family name: the embedded one.
fn register_font() -> Result<(), String> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FONT, FontStyle::Normal, avaprep::font::SANS)
                .map_err(|_| "the embedded font does not load".to_string())
        })
        .clone()
}

/// The largest font size up to 24 at which `text` fits `room` pixels: an early stop's reason
/// runs past the picture's edge at 24.
fn fitting_size<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    text: &str,
    room: u32,
) -> Result<f64, DrawingAreaErrorKind<DB::ErrorType>> {
    let mut size = 24.0;
    while size > 12.0
        && area
            .estimate_text_size(text, &(FONT, size).into_text_style(area))?
            .0
            > room
    {
        size -= 1.0;
    }
    Ok(size)
}

fn plot_png(records: &[Record], notes: &CurveNotes) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    register_font()?;
    let (w, h) = SIZE;
    let mut pixels = vec![255u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (w, h)).into_drawing_area();
        let (title, body) = root.split_vertically(60);
        let status = format!("SlowFast training: {}", notes.status);
        let size = fitting_size(&title, &status, w - 40)?;
        title.draw(&Text::new(status, (20, 12), (FONT, size).into_font()))?;
        if let Some((map, epoch)) = notes.best {
            title.draw(&Text::new(
                format!("kept weights: epoch {epoch}, val mAP {map:.3}"),
                (20, 40),
                (FONT, 16).into_font().color(&MAP),
            ))?;
        }
        let x_max = records
            .iter()
            .map(|r| match r {
                Record::Batch { epoch, .. } => *epoch,
                Record::Eval { epoch, .. } | Record::Epoch { epoch, .. } => *epoch as f64,
            })
            .fold(1.0f64, f64::max);
        let series = Curves::of(records);
        let panels = body.split_evenly((3, 1));
        let loss = [
            (&series.step_loss, LOSS, "per step"),
            (&series.epoch_loss, EPOCH_LOSS, "epoch mean"),
        ];
        let upper = || SeriesLabelPosition::UpperRight;
        draw_panel(
            &panels[0],
            "Training loss",
            "loss",
            x_max,
            &loss,
            None,
            upper(),
        )?;
        let lr = [(&series.lr, LR, "per step")];
        draw_panel(
            &panels[1],
            "Learning rate",
            "learning rate",
            x_max,
            &lr,
            None,
            upper(),
        )?;
        let map = [(&series.map, MAP, "val mAP")];
        let lower = SeriesLabelPosition::LowerRight;
        draw_panel(
            &panels[2],
            "Validation frame-mAP@0.5",
            "mAP",
            x_max,
            &map,
            notes.best,
            lower,
        )?;
        root.present()?;
    }
    let image = image::RgbImage::from_raw(w, h, pixels).ok_or("plot buffer size")?;
    let mut bytes = std::io::Cursor::new(Vec::new());
    image.write_to(&mut bytes, image::ImageFormat::Png)?;
    Ok(bytes.into_inner())
}

/// The series the picture shows, each against the (fractional) epoch.
struct Curves {
    step_loss: Series,
    epoch_loss: Series,
    lr: Series,
    map: Series,
}

impl Curves {
    fn of(records: &[Record]) -> Self {
        let mut curves = Curves {
            step_loss: Vec::new(),
            epoch_loss: Vec::new(),
            lr: Vec::new(),
            map: Vec::new(),
        };
        for record in records {
            match record {
                Record::Batch {
                    epoch, lr, loss, ..
                } => {
                    curves.step_loss.push((*epoch, *loss));
                    curves.lr.push((*epoch, *lr));
                }
                Record::Epoch { epoch, loss, .. } => curves.epoch_loss.push((*epoch as f64, *loss)),
                Record::Eval {
                    epoch,
                    map: Some(m),
                    ..
                } => curves.map.push((*epoch as f64, *m)),
                Record::Eval { .. } => {}
            }
        }
        curves
    }
}

/// The range of the finite values, widened when they are all equal (or absent); values that all
/// lie in [0, 1] (an mAP) keep an axis within it, not one reaching 1.4 when every mAP is 1.
fn value_range(lines: &[(&Series, RGBColor, &str)], also: Option<f64>) -> (f64, f64) {
    let (lo, hi) = widened_range(lines, also);
    let fractions = lines
        .iter()
        .flat_map(|(s, _, _)| s.iter().map(|p| p.1))
        .chain(also)
        .filter(|v| v.is_finite())
        .all(|v| (0.0..=1.0).contains(&v));
    match fractions {
        true => (lo.max(0.0), hi.min(1.0)),
        false => (lo, hi),
    }
}

fn widened_range(lines: &[(&Series, RGBColor, &str)], also: Option<f64>) -> (f64, f64) {
    let values = lines
        .iter()
        .flat_map(|(s, _, _)| s.iter().map(|p| p.1))
        .chain(also);
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    match lo < hi {
        true => (lo - (hi - lo) * 0.05, hi + (hi - lo) * 0.05),
        false if lo.is_finite() => (lo - 0.5 * lo.abs().max(0.1), lo + 0.5 * lo.abs().max(0.1)),
        false => (0.0, 1.0),
    }
}

fn draw_panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    title: &str,
    y_name: &str,
    x_max: f64,
    lines: &[(&Series, RGBColor, &str)],
    best: Option<(f64, usize)>,
    legend: SeriesLabelPosition,
) -> Result<(), Box<dyn std::error::Error>> {
    let (lo, hi) = value_range(lines, best.map(|b| b.0));
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 20))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x_max, lo..hi)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc(y_name)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(240, 240, 240))
        .x_max_light_lines(2)
        .y_max_light_lines(2)
        .y_label_formatter(&|v| format_value(*v))
        .draw()?;
    for &(series, colour, name) in lines {
        let points = series.iter().copied().filter(|p| p.1.is_finite());
        let width = if series.len() > 200 { 1 } else { 2 };
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(width)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 24, y)], colour.stroke_width(3)));
        if series.len() <= 60 {
            chart.draw_series(points.map(|p| Circle::new(p, 3, colour.filled())))?;
        }
    }
    if let Some((map, epoch)) = best {
        let style = TextStyle::from((FONT, 16).into_font())
            .color(&MAP)
            .pos(Pos::new(HPos::Right, VPos::Bottom));
        let marker = EmptyElement::at((epoch as f64, map))
            + Circle::new((0, 0), 8, MAP.stroke_width(3))
            + Text::new(format!("best {map:.3} (epoch {epoch})"), (-10, -10), style);
        chart.draw_series([marker])?;
    }
    chart
        .configure_series_labels()
        .position(legend)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Axis numbers short enough to read: a learning rate of 0.0001 as 1e-4.
fn format_value(v: f64) -> String {
    match v.abs() {
        0.0 => "0".into(),
        a if a < 0.01 => format!("{v:.1e}"),
        a if a < 10.0 => format!("{v:.3}"),
        _ => format!("{v:.1}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<Record> {
        vec![
            Record::Batch {
                epoch: 0.0,
                step: 1,
                lr: 0.1,
                loss: 0.7,
                clips_per_s: 10.0,
            },
            Record::Batch {
                epoch: 0.5,
                step: 2,
                lr: 0.1,
                loss: 0.5,
                clips_per_s: 10.0,
            },
            Record::Epoch {
                epoch: 1,
                step: 2,
                loss: 0.6,
                clips_per_s: 10.0,
                seconds: 1.0,
            },
            Record::Eval {
                epoch: 1,
                step: 2,
                map: Some(0.25),
                ap: BTreeMap::from([(1, Some(0.5)), (3, None)]),
                seconds: 0.5,
            },
            Record::Eval {
                epoch: 2,
                step: 4,
                map: Some(0.5),
                ap: BTreeMap::new(),
                seconds: 0.5,
            },
        ]
    }

    #[test]
    fn a_fraction_s_axis_stays_within_0_and_1() {
        let range = |values: &[f64]| {
            let series: Series = values
                .iter()
                .enumerate()
                .map(|(i, v)| (i as f64, *v))
                .collect();
            value_range(&[(&series, MAP, "val mAP")], None)
        };
        let (lo, hi) = range(&[1.0, 1.0, 1.0]);
        assert!(lo > 0.0 && lo < 1.0 && hi == 1.0, "{lo}..{hi}");
        assert_eq!(range(&[0.0, 0.0]).0, 0.0);
        let (lo, hi) = range(&[0.2, 0.6]);
        assert!(lo < 0.2 && hi > 0.6 && hi < 1.0, "{lo}..{hi}");
        // A loss above 1 keeps its own axis.
        let (lo, hi) = range(&[0.5, 2.0]);
        assert!(lo < 0.5 && hi > 2.0, "{lo}..{hi}");
    }

    #[test]
    fn csv_has_one_row_per_record_and_ap_columns() {
        let text = csv_text(&records(), &[1, 3]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "type,epoch,step,lr,loss,clips_per_s,seconds,val_map,ap_1,ap_3"
        );
        assert_eq!(lines.len(), 6);
        assert_eq!(lines[4], "eval,1,2,,,,0.500,0.250000,0.500000,");
    }

    /// The curves of [`records`] drawn under `status`, in the run folder returned with them.
    fn drawn_curves(status: &str, best: (f64, usize)) -> (tempfile::TempDir, image::RgbImage) {
        let dir = tempfile::tempdir().unwrap();
        let mut metrics = Metrics::open(dir.path(), None, "").unwrap();
        for r in records() {
            metrics.push(r).unwrap();
        }
        let notes = CurveNotes {
            status: status.into(),
            best: Some(best),
        };
        metrics.write_summaries(&[1, 3], &notes).unwrap();
        let png = image::open(dir.path().join(PLOT)).unwrap().into_rgb8();
        (dir, png)
    }

    #[test]
    fn png_has_text_and_every_curve_and_resume_drops_later_records() {
        let (dir, png) = drawn_curves("completed the 2-epoch schedule", (0.5, 2));
        assert_eq!(png.dimensions(), SIZE);
        for colour in [LOSS, EPOCH_LOSS, LR, MAP] {
            let rgb = [colour.0, colour.1, colour.2];
            assert!(png.pixels().any(|p| p.0 == rgb), "{rgb:?} is drawn");
        }
        // The title band holds the status line: dark anti-aliased glyph pixels, not a blank.
        let title_ink = (0..SIZE.0)
            .flat_map(|x| (0..40).map(move |y| (x, y)))
            .filter(|&(x, y)| png.get_pixel(x, y).0[0] < 100)
            .count();
        assert!(title_ink > 500, "{title_ink} dark pixels in the title");
        let resumed = Metrics::open(dir.path(), Some(1), "").unwrap();
        assert_eq!(resumed.records.len(), 1);
    }

    /// The longest status, an early stop's reason, is drawn whole: it ran past the right edge.
    #[test]
    fn a_long_status_fits_the_title() {
        let (_dir, png) = drawn_curves(
            "early stop after epoch 14: val mAP has not improved for 3 evaluations (best 0.7545 at epoch 11)",
            (0.7545, 11),
        );
        let inked = |x: u32| (0..40).any(|y| png.get_pixel(x, y).0[0] < 100);
        let rightmost = (0..SIZE.0).rev().find(|&x| inked(x)).unwrap();
        assert!(
            (SIZE.0 / 2..SIZE.0 - 15).contains(&rightmost),
            "the title's ink ends at x = {rightmost} of {}",
            SIZE.0
        );
    }

    /// A resumed run keeps every record up to its checkpoint, evaluations included (they once
    /// failed to parse and were all dropped).
    #[test]
    fn resuming_keeps_every_record_up_to_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let mut metrics = Metrics::open(dir.path(), None, "").unwrap();
        for r in records() {
            metrics.push(r).unwrap();
        }
        let resumed = Metrics::open(dir.path(), Some(3), "").unwrap();
        assert_eq!(resumed.records, records()[..4]);
        let text = std::fs::read_to_string(dir.path().join(JSONL)).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
    }

    /// Not a check: draws the curves of a longer synthetic run where a person can look at them
    /// (`AVAPREP_CURVES_SAMPLE=path cargo test ... curves_sample -- --ignored`).
    #[test]
    #[ignore]
    fn curves_sample() {
        let mut records = Vec::new();
        for step in 1..=630u64 {
            let epoch = step as f64 / 42.0;
            records.push(Record::Batch {
                epoch,
                step,
                lr: 0.8 * (1.0 + (std::f64::consts::PI * epoch / 15.0).cos()) / 2.0,
                loss: 0.7 * (-epoch / 4.0).exp() + 0.3 + 0.05 * ((step * 7919) % 13) as f64 / 13.0,
                clips_per_s: 19.0,
            });
            if step % 42 == 0 {
                let e = (step / 42) as usize;
                records.push(Record::Epoch {
                    epoch: e,
                    step,
                    loss: 0.7 * (-(e as f64) / 4.0).exp() + 0.32,
                    clips_per_s: 19.0,
                    seconds: 9.0,
                });
                if e.is_multiple_of(2) || e == 15 {
                    records.push(Record::Eval {
                        epoch: e,
                        step,
                        map: Some(
                            0.6554
                                - 0.4 * (-(e as f64) / 5.0).exp()
                                - if e == 15 { 0.01 } else { 0.0 },
                        ),
                        ap: BTreeMap::new(),
                        seconds: 1.8,
                    });
                }
            }
        }
        let notes = CurveNotes {
            status: "completed the 15-epoch schedule".into(),
            best: Some((0.6554, 14)),
        };
        let path = std::env::var("AVAPREP_CURVES_SAMPLE").unwrap_or("curves-sample.png".into());
        std::fs::write(&path, plot_png(&records, &notes).unwrap()).unwrap();
    }
}
