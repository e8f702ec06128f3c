//! `eval`: the trained weights' detections for each chosen split (`avaprep predict`, run in the
//! trainer executable), in the official submission format, scored here with the official
//! protocol where the split has ground truth. What it made is recorded in `work/eval.json`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::train::{TrainParams, run_trainer};
use super::{StageId, StageSource};
use crate::annotations::KeyframeRange;
use crate::eval::{EvalOptions, EvalReport, evaluate_files_with};
use crate::layout::DataLayout;
use crate::pipeline::spec::SpecError;
use crate::pipeline::{Closing, ItemError, ItemRecord, Stage, StageContext};
use crate::records::{Evaluation, SplitResult, TrainedRun, VideoPlan, own_seconds_file};
use crate::split::SplitName;
use crate::trainer_protocol::{TrainerCall, TrainerCommand, run_files};

/// The `[eval]` table of a pipeline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvalParams {
    /// The splits to write detections for; those with ground truth are scored. A split
    /// without public labels (test) gets its submission file only.
    pub splits: Vec<SplitName>,
}

impl Default for EvalParams {
    fn default() -> Self {
        EvalParams {
            splits: vec!["val".parse().expect("a plain name")],
        }
    }
}

/// Said wherever a score is, for a dataset without a person detector's boxes.
pub const GROUND_TRUTH_PROPOSALS: &str = "the boxes scored are the ground truth's (the import had no detector's boxes: `--detections`, or `detections` in [import]): the mAP measures the actions, not the finding of people";

/// A split's report of an evaluation, read back.
pub fn split_report(
    evaluation: &Evaluation,
    layout: &DataLayout,
    split: &str,
) -> Option<EvalReport> {
    let result = evaluation
        .splits
        .iter()
        .find(|result| result.split == split)?;
    let bytes = std::fs::read(layout.root().join(result.report.as_ref()?)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

pub struct EvalStage {
    pub params: EvalParams,
    /// The preset the weights were trained from: with the run's `config.toml` over it, predict
    /// builds the same model and clips.
    pub preset: String,
    pub trainer: PathBuf,
}

impl EvalStage {
    /// `[eval]` and the `[train]` the weights come from; the splits to score are ones the
    /// pipeline fetches.
    pub fn from_source(source: &StageSource) -> Result<Self, SpecError> {
        let mut params: EvalParams = source.typed_params(StageId::Eval)?;
        for split in &params.splits {
            source.check_known_split(StageId::Eval, "splits", split)?;
        }
        // A split the run does not fetch (val, in a train-only run) has nothing to score.
        params.splits.retain(|split| source.fetches(split));
        Ok(EvalStage {
            params,
            // `[train]` itself is resolved and checked by the train stage this one follows.
            preset: source.typed_params::<TrainParams>(StageId::Train)?.preset,
            trainer: super::train::trainer_path(),
        })
    }
}

impl Stage for EvalStage {
    type Id = StageId;

    fn id(&self) -> StageId {
        StageId::Eval
    }

    fn depends_on(&self) -> &'static [StageId] {
        &[StageId::Train]
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "version": 1, "splits": self.params.splits })
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let trained = TrainedRun::load(&layout).map_err(ItemError::input)?;
        let plan = VideoPlan::load(&layout.video_plan()).map_err(ItemError::input)?;
        let folder = layout.root().join(&trained.run_dir).join("eval");
        let mut splits = Vec::new();
        for split in &self.params.splits {
            splits.push(self.split(context, &layout, &plan, &trained, &folder, split)?);
        }
        let evaluation = Evaluation {
            weights: trained.weights.clone(),
            splits,
        };
        let path = Evaluation::path(&layout);
        let bytes = serde_json::to_vec_pretty(&evaluation).expect("a record serialises");
        crate::fsutil::write_atomic(&path, &bytes).map_err(ItemError::output)?;
        let mut made = vec![layout.relative(&path)];
        for result in &evaluation.splits {
            made.push(result.detections.clone());
            made.extend(result.own_seconds.clone());
            made.extend(result.report.clone());
        }
        let made: Vec<&str> = made.iter().map(String::as_str).collect();
        ItemRecord::of_files(context.data_dir, &made, &[]).map_err(ItemError::input)
    }

    /// Where each split's detections are, and each scored split's mAP with its per-class table.
    fn closing(&self, data_dir: &Path) -> Option<Closing> {
        let layout = DataLayout::new(data_dir);
        let evaluation = Evaluation::load(&layout)?;
        let trained = TrainedRun::load(&layout).ok();
        let plan = VideoPlan::load(&layout.video_plan()).ok();
        let mut lines = Vec::new();
        for split in &evaluation.splits {
            let label = format!("{} dets", split.split);
            let path = layout.root().join(&split.detections);
            lines.push(format!("{label:<11} {}", path.display()));
            if let Some(own) = &split.own_seconds {
                let path = layout.root().join(own);
                lines.push(format!(
                    "{:<11} {} (the same on your videos' own seconds)",
                    "",
                    path.display()
                ));
            }
        }
        // Said of a score: a run that scores no split (a dataset without val) has none.
        let scored = !evaluation.splits.is_empty();
        if scored
            && plan
                .as_ref()
                .is_some_and(|plan| plan.ground_truth_proposals)
        {
            lines.push(GROUND_TRUTH_PROPOSALS.to_string());
        }
        for split in &evaluation.splits {
            let Some(report) = split_report(&evaluation, &layout, &split.split) else {
                continue;
            };
            // Training evaluated one split: its figure belongs beside that split's line only.
            let during_training = trained
                .as_ref()
                .filter(|trained| trained.val_split == split.split)
                .and_then(|trained| trained.best)
                .map_or(String::new(), |(map, epoch)| {
                    format!(" (epoch {epoch}; {map:.4} when evaluated during training)")
                });
            let mean_ap = report
                .mean_ap
                .map_or("-".to_string(), |map| format!("{map:.4}"));
            lines.push(format!(
                "{} mAP {mean_ap} with the best weights{during_training}",
                split.split
            ));
            lines.push(crate::report::ap_table(&report));
        }
        Some(Closing {
            record_type: "evaluation",
            record: serde_json::to_value(&evaluation).ok()?,
            lines,
        })
    }
}

impl EvalStage {
    fn split(
        &self,
        context: &StageContext,
        layout: &DataLayout,
        plan: &VideoPlan,
        trained: &TrainedRun,
        folder: &Path,
        split: &SplitName,
    ) -> Result<SplitResult, ItemError> {
        let files = plan.files.splits.get(split.as_str()).ok_or_else(|| {
            ItemError::usage(format!(
                "[eval] splits names `{split}`, which the run's plan does not have (it has: {}); add it to the pipeline's `splits`",
                plan.files.splits.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        // A split name is a plain file name.
        let detections = folder.join(format!("{split}_detections.csv"));
        let call = TrainerCall {
            data_dir: context.data_dir.to_path_buf(),
            command: TrainerCommand::Predict {
                weights: layout.root().join(&trained.weights),
                split: split.clone(),
                out: detections.clone(),
            },
            preset: self.preset.clone(),
            config: layout
                .root()
                .join(&trained.run_dir)
                .join(run_files::CONFIG_TOML),
        };
        run_trainer::<serde_json::Value>(&self.trainer, &call, context, &|_| {})?;
        let mut result = SplitResult {
            split: split.to_string(),
            detections: layout.relative(&detections),
            own_seconds: plan
                .own_clock
                .then(|| layout.relative(&own_seconds_file(&detections))),
            report: None,
            mean_ap: None,
        };
        let Some(ground_truth) = &files.ground_truth else {
            return Ok(result);
        };
        // The ground truth as `lists` filtered it: the videos with frames, as PySlowFast scores.
        let annotations = layout.slowfast().join("annotations");
        let [first, last] = plan.keyframes;
        let keyframes = KeyframeRange::new(first, last)
            .ok_or_else(|| ItemError::input(format!("the plan's keyframes {first}-{last}")))?;
        let exclusions = files
            .excluded_timestamps
            .as_ref()
            .map(|name| annotations.join(name));
        let report = evaluate_files_with(
            &annotations.join(ground_truth),
            &detections,
            &annotations.join(&plan.files.scored_label_map),
            exclusions.as_deref(),
            keyframes,
            &EvalOptions::OFFICIAL,
        )
        .map_err(|error| ItemError::input(format!("scoring {}: {error}", detections.display())))?;
        let report_path = folder.join(format!("{split}_eval.json"));
        let bytes = serde_json::to_vec_pretty(&report).expect("a report serialises");
        crate::fsutil::write_atomic(&report_path, &bytes).map_err(ItemError::output)?;
        result.report = Some(layout.relative(&report_path));
        result.mean_ap = report.mean_ap;
        Ok(result)
    }
}
