//! The per-class AP table printed after an evaluation: by the eval stage at the end of a run,
//! `avaprep eval` and `avaprep-train predict`.

use std::fmt::Write;

use crate::eval::EvalReport;

/// A per-class AP table for people, classes in label-map order, ending with
/// the mAP line.
pub fn ap_table(report: &EvalReport) -> String {
    let width = report
        .classes
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0)
        .max("class".len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>3}  {:<width$}  {:>6}  {:>8}  {:>10}  {:>8}",
        "id", "class", "AP", "GT", "detections", "TP"
    );
    for c in &report.classes {
        let _ = writeln!(
            out,
            "{:>3}  {:<width$}  {:>6}  {:>8}  {:>10}  {:>8}",
            // ActionId's Display ignores width; the number does not.
            c.id.0,
            c.name,
            percent(c.ap),
            c.ground_truth,
            c.detections,
            c.true_positives
        );
    }
    let _ = writeln!(
        out,
        "frame-mAP@{}: {} over {} with ground truth",
        report.iou_threshold,
        percent(report.mean_ap),
        crate::progress::counted(report.classes_with_ground_truth as u64, "class", "classes")
    );
    out
}

/// AP as a percentage with two decimals, the way AVA results are quoted;
/// `-` for no value.
fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{:.2}", v * 100.0))
}

#[cfg(test)]
mod tests {
    use crate::annotations::ActionId;
    use crate::eval::{ClassReport, DroppedRows, EvalReport, FrameCounts};

    use super::ap_table;

    fn class(id: u16, name: &str, ap: Option<f64>, ground_truth: usize) -> ClassReport {
        ClassReport {
            id: ActionId(id),
            name: name.into(),
            ap,
            ground_truth,
            detections: 2,
            true_positives: 1,
        }
    }

    #[test]
    fn the_table_lists_every_class_and_the_mean() {
        let report = EvalReport {
            mean_ap: Some(0.5),
            classes_with_ground_truth: 1,
            iou_threshold: 0.5,
            max_detections_per_frame: None,
            classes: vec![
                class(1, "stand", Some(0.5), 2),
                class(2, "sit", None, 0),
                class(3, "talk to (e.g., self, a person)", None, 0),
            ],
            frames: FrameCounts::default(),
            dropped: DroppedRows::default(),
        };
        let table = ap_table(&report);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(
            lines[1].contains("stand") && lines[1].contains("50.00"),
            "{table}"
        );
        assert!(
            lines[3].contains("talk to") && lines[3].contains(" - "),
            "{table}"
        );
        // Columns line up whatever the names' lengths.
        let end_of = |line: &str, text: &str| line.find(text).map(|start| start + text.len());
        assert_eq!(end_of(lines[0], "AP"), end_of(lines[1], "50.00"), "{table}");
        assert_eq!(
            lines[4],
            "frame-mAP@0.5: 50.00 over 1 class with ground truth"
        );
    }
}
