//! The run's metrics: JSON lines and TensorBoard events as they happen, a CSV and a PNG of the
//! curves rewritten after every epoch.
//!
//! The PNG has no text (plotters would need a system font): three panels stacked, top to
//! bottom, the training loss per batch (blue), the LR (green) and the validation mAP (red),
//! each against the epoch and scaled to its own range; grid lines at quarters. The numbers are
//! in the CSV.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use super::TrainError;
use super::tensorboard::EventWriter;
use crate::fsutil::write_atomic;

pub const JSONL: &str = "metrics.jsonl";
pub const CSV: &str = "metrics.csv";
pub const PLOT: &str = "curves.png";

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
        ap: BTreeMap<u16, Option<f64>>,
        seconds: f64,
    },
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
    pub fn write_summaries(&self, classes: &[u16]) -> Result<(), TrainError> {
        let csv = self.dir.join(CSV);
        write_atomic(&csv, csv_text(&self.records, classes).as_bytes())
            .map_err(|e| TrainError::io(&csv, e))?;
        let png = self.dir.join(PLOT);
        let bytes = plot_png(&self.records).map_err(|e| TrainError::Plot(e.to_string()))?;
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

fn curves(records: &[Record]) -> [Series; 3] {
    let (mut loss, mut lr, mut map) = (Vec::new(), Vec::new(), Vec::new());
    for record in records {
        match record {
            Record::Batch {
                epoch,
                lr: l,
                loss: v,
                ..
            } => {
                loss.push((*epoch, *v));
                lr.push((*epoch, *l));
            }
            Record::Eval {
                epoch,
                map: Some(m),
                ..
            } => map.push((*epoch as f64, *m)),
            _ => {}
        }
    }
    [loss, lr, map]
}

fn plot_png(records: &[Record]) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let (w, h) = (800u32, 900u32);
    let mut pixels = vec![255u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (w, h)).into_drawing_area();
        let x_max = records
            .iter()
            .map(|r| match r {
                Record::Batch { epoch, .. } => *epoch,
                Record::Eval { epoch, .. } | Record::Epoch { epoch, .. } => *epoch as f64,
            })
            .fold(1.0f64, f64::max);
        let colours = [BLUE, GREEN, RED];
        for ((area, series), colour) in root
            .split_evenly((3, 1))
            .iter()
            .zip(curves(records))
            .zip(colours)
        {
            draw_panel(area, &series, x_max, colour)?;
        }
        root.present()?;
    }
    let image = image::RgbImage::from_raw(w, h, pixels).ok_or("plot buffer size")?;
    let mut bytes = std::io::Cursor::new(Vec::new());
    image.write_to(&mut bytes, image::ImageFormat::Png)?;
    Ok(bytes.into_inner())
}

fn draw_panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    series: &Series,
    x_max: f64,
    colour: RGBColor,
) -> Result<(), Box<dyn std::error::Error>> {
    let finite = series.iter().map(|p| p.1).filter(|v| v.is_finite());
    let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    let (lo, hi) = if lo < hi {
        (lo, hi)
    } else {
        (lo.min(0.0), lo.max(0.0) + 1.0)
    };
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .build_cartesian_2d(0.0..x_max, lo..hi)?;
    let grey = RGBColor(200, 200, 200);
    for q in 0..=4 {
        let y = lo + (hi - lo) * f64::from(q) / 4.0;
        chart.draw_series(LineSeries::new([(0.0, y), (x_max, y)], grey))?;
    }
    chart.draw_series(LineSeries::new([(0.0, lo), (0.0, hi)], BLACK))?;
    let points = series.iter().copied().filter(|p| p.1.is_finite());
    chart.draw_series(LineSeries::new(points, colour.stroke_width(2)))?;
    Ok(())
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

    #[test]
    fn png_renders_without_fonts_and_resume_drops_later_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut metrics = Metrics::open(dir.path(), None, "").unwrap();
        for r in records() {
            metrics.push(r).unwrap();
        }
        metrics.write_summaries(&[1, 3]).unwrap();
        let png = image::open(dir.path().join(PLOT)).unwrap().into_rgb8();
        assert_eq!(png.dimensions(), (800, 900));
        assert!(
            png.pixels().any(|p| p.0 == [255, 0, 0]),
            "the mAP curve is drawn"
        );
        let resumed = Metrics::open(dir.path(), Some(1), "").unwrap();
        assert_eq!(resumed.records.len(), 1);
    }
}
