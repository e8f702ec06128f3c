//! The pipeline runner with test stages that write real files: skip when up to date, redo on a
//! changed parameter, resume after the process is killed, and never trust a damaged state file.
//!
//! The stages form the product's shape: two per-video stages (`download` -> `extract`) followed by a
//! whole-dataset stage (`lists`). Each item appends a line to `work.log` when it runs, so a test can
//! see exactly which items ran in which run.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use avaprep::fsutil::write_atomic;
use avaprep::pipeline::state::{Loaded, StageStatus};
use avaprep::pipeline::status::StageCondition;
use avaprep::pipeline::{
    AnyStage, FailureKind, Granularity, ItemError, ItemRecord, PlannedItem, RunReport, Runner,
    Shard, Stage, StageContext, StageName, StageOutcome, StateStore,
};
use avaprep::progress::Silent;

const VIDEOS: usize = 12;
const CHILD_DIR: &str = "AVAPREP_TEST_RUNNER_CHILD_DIR";

/// The test pipeline's stages, named as the product's are: by a typed id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Step {
    Download,
    Extract,
    Lists,
}

impl StageName for Step {
    fn name(self) -> &'static str {
        match self {
            Step::Download => "download",
            Step::Extract => "extract",
            Step::Lists => "lists",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [Step::Download, Step::Extract, Step::Lists]
            .into_iter()
            .find(|step| step.name() == name)
    }
}

struct TestStage {
    id: Step,
    depends_on: &'static [Step],
    granularity: Granularity,
    /// A parameter: changing it must make this stage and everything after it stale.
    value: u32,
    item_delay: Duration,
    /// Items that fail (for the failure tests).
    failing: Vec<String>,
    /// Items that can never complete, like a video the server does not have.
    missing: Vec<String>,
}

impl TestStage {
    fn output(&self, data_dir: &Path, item: &str) -> PathBuf {
        data_dir.join(self.id.name()).join(item)
    }
}

fn log(data_dir: &Path, line: &str) {
    append_line(&data_dir.join("work.log"), line);
}

fn append_line(path: &Path, line: &str) {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    // One write per line: with O_APPEND it lands whole even while other workers append.
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
}

impl Stage for TestStage {
    type Id = Step;

    fn id(&self) -> Step {
        self.id
    }

    fn depends_on(&self) -> &'static [Step] {
        self.depends_on
    }

    fn granularity(&self) -> Granularity {
        self.granularity
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "value": self.value })
    }

    fn plan(&self, _context: &StageContext) -> Result<Vec<PlannedItem>, ItemError> {
        Ok(match self.granularity {
            Granularity::Whole => vec![PlannedItem::whole()],
            Granularity::PerVideo => (0..VIDEOS)
                .map(|index| PlannedItem::new(format!("video{index:02}"), serde_json::Value::Null))
                .collect(),
        })
    }

    fn concurrency(&self) -> usize {
        2
    }

    fn run_item(&self, context: &StageContext, item: &str) -> Result<ItemRecord, ItemError> {
        log(context.data_dir, &format!("{} {item}", self.id.name()));
        let not_started = format!("{} {}", self.id.name(), context.not_started);
        append_line(&context.data_dir.join("not_started.log"), &not_started);
        std::thread::sleep(self.item_delay);
        if self.failing.iter().any(|failing| failing == item) {
            return Err(ItemError::input(format!("{item}: test failure")));
        }
        if self.missing.iter().any(|missing| missing == item) {
            return Err(ItemError::missing(format!("{item}: 404 Not Found")));
        }
        let content = match self.depends_on.first() {
            // A whole stage reads what the per-video stage before it produced.
            Some(upstream) if self.granularity == Granularity::Whole => {
                let count = fs::read_dir(context.data_dir.join(upstream.name()))
                    .unwrap()
                    .count();
                format!("{count} inputs, value {}", self.value)
            }
            _ => format!("{item} value {}", self.value),
        };
        write_atomic(&self.output(context.data_dir, item), content.as_bytes()).unwrap();
        Ok(ItemRecord {
            files: 1,
            bytes: content.len() as u64,
            ..ItemRecord::default()
        })
    }
}

fn stages(extract_value: u32, delay: Duration) -> Vec<TestStage> {
    vec![
        TestStage {
            id: Step::Download,
            depends_on: &[],
            granularity: Granularity::PerVideo,
            value: 1,
            item_delay: delay,
            failing: Vec::new(),
            missing: Vec::new(),
        },
        TestStage {
            id: Step::Extract,
            depends_on: &[Step::Download],
            granularity: Granularity::PerVideo,
            value: extract_value,
            item_delay: delay,
            failing: Vec::new(),
            missing: Vec::new(),
        },
        TestStage {
            id: Step::Lists,
            depends_on: &[Step::Extract],
            granularity: Granularity::Whole,
            value: 1,
            item_delay: Duration::ZERO,
            failing: Vec::new(),
            missing: Vec::new(),
        },
    ]
}

fn runner<'a>(
    data_dir: &'a Path,
    stages: &'a [TestStage],
    shard: Option<Shard>,
    cancel: &'a AtomicBool,
) -> Runner<'a, Step> {
    Runner {
        stages: stages
            .iter()
            .map(|stage| stage as &dyn AnyStage<Step>)
            .collect(),
        store: StateStore::new(data_dir, shard),
        shard,
        context: StageContext {
            data_dir,
            reporter: &Silent,
            cancel,
            fingerprint: "",
            not_started: 0,
        },
        scrutiny: Default::default(),
        before_per_video: None,
    }
}

fn run(data_dir: &Path, stages: &[TestStage], shard: Option<Shard>) -> RunReport<Step> {
    let cancel = AtomicBool::new(false);
    runner(data_dir, stages, shard, &cancel).run().unwrap()
}

/// `avaprep status`: each stage's condition and items done.
fn status(data_dir: &Path, stages: &[TestStage]) -> Vec<(String, StageCondition, usize)> {
    let cancel = AtomicBool::new(false);
    let lines = runner(data_dir, stages, None, &cancel).status().unwrap();
    lines
        .into_iter()
        .map(|line| {
            (
                line.stage.name().to_string(),
                line.condition,
                line.items_done,
            )
        })
        .collect()
}

/// The one stage of a single-step run, blocked: by which stages, why.
fn blocked_reasons(report: &RunReport<Step>) -> Vec<(String, String)> {
    let stage = &report.stages[0];
    assert_eq!(stage.outcome, StageOutcome::Blocked);
    stage
        .blocked_by
        .iter()
        .map(|blocker| (blocker.stage.name().to_string(), blocker.reason.clone()))
        .collect()
}

fn outcomes(report: &RunReport<Step>) -> Vec<(String, StageOutcome)> {
    report
        .stages
        .iter()
        .map(|stage| (stage.stage.name().to_string(), stage.outcome))
        .collect()
}

fn log_lines(data_dir: &Path) -> Vec<String> {
    fs::read_to_string(data_dir.join("work.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn all(outcome: StageOutcome) -> Vec<(String, StageOutcome)> {
    ["download", "extract", "lists"]
        .iter()
        .map(|name| (name.to_string(), outcome))
        .collect()
}

#[test]
fn skips_when_up_to_date_and_redoes_downstream_of_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let first = run(data, &stages(1, Duration::ZERO), None);
    assert_eq!(outcomes(&first), all(StageOutcome::Completed));
    assert_eq!(log_lines(data).len(), 2 * VIDEOS + 1);

    let second = run(data, &stages(1, Duration::ZERO), None);
    assert_eq!(outcomes(&second), all(StageOutcome::UpToDate));
    assert_eq!(
        log_lines(data).len(),
        2 * VIDEOS + 1,
        "an up-to-date run must do nothing"
    );

    let changed = run(data, &stages(2, Duration::ZERO), None);
    assert_eq!(
        outcomes(&changed),
        vec![
            ("download".to_string(), StageOutcome::UpToDate),
            ("extract".to_string(), StageOutcome::Completed),
            ("lists".to_string(), StageOutcome::Completed),
        ]
    );
    let new_lines = &log_lines(data)[2 * VIDEOS + 1..];
    assert_eq!(new_lines.len(), VIDEOS + 1);
    assert!(new_lines.iter().all(|line| !line.starts_with("download")));
    let content = fs::read_to_string(data.join("extract/video03")).unwrap();
    assert_eq!(content, "video03 value 2");
}

/// What each item was told of the items of its stage that no worker had begun.
fn not_started(data_dir: &Path, stage: &str) -> Vec<usize> {
    let log = fs::read_to_string(data_dir.join("not_started.log")).unwrap_or_default();
    let mut counts: Vec<usize> = log
        .lines()
        .filter_map(|line| line.strip_prefix(&format!("{stage} ")))
        .map(|count| count.parse().unwrap())
        .collect();
    counts.sort_unstable();
    counts
}

#[test]
fn each_item_is_told_how_many_of_its_stage_have_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let mut failing = stages(1, Duration::from_millis(5));
    failing[1].failing = vec!["video05".to_string()];
    run(data, &failing, None);
    let every: Vec<usize> = (0..VIDEOS).collect();
    assert_eq!(not_started(data, "download"), every);
    assert_eq!(not_started(data, "extract"), every);
    assert_eq!(not_started(data, "lists"), vec![0]);

    // The next run retries the one failed video: nothing else is left, so it is the last.
    fs::remove_file(data.join("not_started.log")).unwrap();
    run(data, &stages(1, Duration::ZERO), None);
    assert_eq!(not_started(data, "download"), Vec::<usize>::new());
    assert_eq!(not_started(data, "extract"), vec![0]);
}

#[test]
fn a_single_step_shares_state_with_the_full_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    run(data, &stages(1, Duration::ZERO), None);
    // `avaprep extract` alone: its dependency counts with the fingerprint it recorded.
    let extract_only = |value| {
        let mut all = stages(value, Duration::ZERO);
        vec![all.remove(1)]
    };
    let same = run(data, &extract_only(1), None);
    assert_eq!(same.stages[0].outcome, StageOutcome::UpToDate);
    let changed = run(data, &extract_only(3), None);
    assert_eq!(changed.stages[0].outcome, StageOutcome::Completed);
    assert_eq!(changed.stages[0].completed, VIDEOS);
    // The full pipeline then sees extract done with the new value and redoes only what follows.
    let full = run(data, &stages(3, Duration::ZERO), None);
    assert_eq!(
        outcomes(&full),
        vec![
            ("download".to_string(), StageOutcome::UpToDate),
            ("extract".to_string(), StageOutcome::UpToDate),
            ("lists".to_string(), StageOutcome::Completed),
        ]
    );
}

#[test]
fn a_failed_video_stops_only_itself_and_whole_stages_run_on_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let mut failing = stages(1, Duration::ZERO);
    failing[0].failing = vec!["video05".to_string()];
    let report = run(data, &failing, None);
    assert_eq!(
        outcomes(&report),
        vec![
            ("download".to_string(), StageOutcome::Failed),
            ("extract".to_string(), StageOutcome::Failed),
            ("lists".to_string(), StageOutcome::Completed),
        ]
    );
    assert_eq!(report.stages[0].failures.len(), 1);
    assert!(
        report.stages[0].failures[0]
            .message
            .contains("video05: test failure")
    );
    // The other videos went on through extraction.
    assert_eq!(report.stages[1].completed, VIDEOS - 1);
    assert!(
        report.stages[1].failures[0]
            .message
            .contains("earlier stage")
    );
    assert_eq!(report.stages[0].failures[0].kind, FailureKind::Input);
    assert_eq!(report.stages[1].failures[0].kind, FailureKind::Blocked);

    // Once the cause is gone, only the failed video is redone, and the lists that lacked it.
    let before = log_lines(data).len();
    let fixed = run(data, &stages(1, Duration::ZERO), None);
    assert_eq!(outcomes(&fixed), all(StageOutcome::Completed));
    let redone = &log_lines(data)[before..];
    assert_eq!(redone, ["download video05", "extract video05", "lists all"]);
}

#[test]
fn a_missing_video_is_dropped_downstream_and_fails_only_the_run_that_found_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let mut with_missing = stages(1, Duration::ZERO);
    with_missing[0].missing = vec!["video07".to_string()];
    let report = run(data, &with_missing, None);
    assert_eq!(outcomes(&report), all(StageOutcome::Completed));
    assert!(
        !report.succeeded(),
        "finding a missing video must fail the run"
    );
    assert_eq!(report.stages[0].newly_missing[0].item, "video07");
    assert_eq!(report.stages[1].missing, 1);
    assert!(!data.join("extract/video07").exists());
    let lists = fs::read_to_string(data.join("lists/all")).unwrap();
    assert_eq!(lists, format!("{} inputs, value 1", VIDEOS - 1));
    assert!(!log_lines(data).contains(&"extract video07".to_string()));

    let again = run(data, &with_missing, None);
    assert_eq!(outcomes(&again), all(StageOutcome::UpToDate));
    assert!(again.succeeded());
    // A change downstream still drops the missing video without asking the server again.
    let before = log_lines(data).len();
    let mut changed = stages(2, Duration::ZERO);
    changed[0].missing = vec!["video07".to_string()];
    let rerun = run(data, &changed, None);
    assert!(rerun.succeeded(), "{:?}", outcomes(&rerun));
    assert_eq!(rerun.stages[1].missing, 1);
    assert_eq!(log_lines(data).len() - before, VIDEOS - 1 + 1);
}

#[test]
fn damaged_state_is_rebuilt_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    run(data, &stages(1, Duration::ZERO), None);
    let state = data.join(".avaprep/state/extract.json");
    let bytes = fs::read(&state).unwrap();
    fs::write(&state, &bytes[..bytes.len() - 40]).unwrap();

    let status = crate::support::avaprep(data)
        .arg("--version")
        .output()
        .unwrap();
    assert!(status.status.success());
    let report = run(data, &stages(1, Duration::ZERO), None);
    assert_eq!(report.stages[1].outcome, StageOutcome::Completed);
    assert_eq!(report.stages[1].completed, VIDEOS, "every item is redone");
    assert!(report.stages[1].notes[0].contains("extract.json"));
    assert!(report.stages[1].notes[0].contains("not a valid state file"));
    assert!(data.join(".avaprep/state/extract.json.corrupt").exists());
    // Downstream of a rebuilt stage is trusted again only because its fingerprint matched.
    assert_eq!(report.stages[0].outcome, StageOutcome::UpToDate);
}

#[test]
fn shards_split_the_videos_and_an_unsharded_run_merges_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let mut done_per_shard = Vec::new();
    for index in 1..=3 {
        let shard = Shard { index, count: 3 };
        let report = run(data, &stages(1, Duration::ZERO), Some(shard));
        assert_eq!(report.stages[2].outcome, StageOutcome::Deferred);
        assert!(report.succeeded());
        done_per_shard.push(report.stages[0].completed);
    }
    assert_eq!(done_per_shard.iter().sum::<usize>(), VIDEOS);
    let before = log_lines(data).len();
    let merged = run(data, &stages(1, Duration::ZERO), None);
    assert_eq!(merged.stages[0].already_done, VIDEOS);
    assert_eq!(merged.stages[1].already_done, VIDEOS);
    assert_eq!(log_lines(data)[before..], ["lists all"]);
}

/// A run stopped before its whole-dataset stage: a shard's is still deferred to the run without
/// `--shard` (it was said "not started: the run stopped before it"), a plain run's not started.
#[test]
fn a_stopped_shard_still_defers_the_stage_that_combines_the_shards() {
    let stopped = AtomicBool::new(true);
    for (shard, lists) in [
        (Some(Shard { index: 1, count: 2 }), StageOutcome::Deferred),
        (None, StageOutcome::NotStarted),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let report = runner(dir.path(), &stages(1, Duration::ZERO), shard, &stopped)
            .run()
            .unwrap();
        assert_eq!(
            report.stages[0].outcome,
            StageOutcome::Interrupted,
            "{shard:?}"
        );
        assert_eq!(report.stages[2].outcome, lists, "{shard:?}");
    }
}

/// Before the combining run, `status` and single steps find the shards' work as that run will
/// merge it (`status` once showed the per-video stages pending, and `extract` alone redid every
/// video): their made and missing videos count, a whole stage run on them then is what the
/// combining run keeps, and a download that `fetch --verify` forgot is not taken back from the
/// shard that recorded it.
#[test]
fn after_shards_status_and_single_steps_count_their_work() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let with_missing = || {
        let mut stages = stages(1, Duration::ZERO);
        stages[0].missing = vec!["video07".to_string()];
        stages
    };
    for index in 1..=2 {
        run(data, &with_missing(), Some(Shard { index, count: 3 }));
    }
    // A shard not run yet: its videos are not made yet (not "interrupted", not done).
    let partial = status(data, &with_missing());
    assert_eq!(partial[0].1, StageCondition::Stale, "{partial:?}");
    assert!(partial[0].2 < VIDEOS, "{partial:?}");
    run(data, &with_missing(), Some(Shard { index: 3, count: 3 }));
    let made = vec![
        ("download".to_string(), StageCondition::Done, VIDEOS),
        ("extract".to_string(), StageCondition::Done, VIDEOS),
    ];
    let mut expected = made.clone();
    expected.push(("lists".to_string(), StageCondition::Pending, 0));
    assert_eq!(status(data, &with_missing()), expected);
    // Damaged shard files are left where they are by a command that only looks.
    let state_dir = data.join(".avaprep/state");
    fs::write(state_dir.join("extract.shard-9-of-9.json"), "{").unwrap();
    assert_eq!(status(data, &with_missing()), expected);
    assert!(state_dir.join("extract.shard-9-of-9.json").exists());
    fs::remove_file(state_dir.join("extract.shard-9-of-9.json")).unwrap();

    let before = log_lines(data).len();
    let lists_alone = run(data, &[with_missing().remove(2)], None);
    assert_eq!(lists_alone.stages[0].outcome, StageOutcome::Completed);
    assert_eq!(log_lines(data)[before..], ["lists all"]);
    let lists = fs::read_to_string(data.join("lists/all")).unwrap();
    assert_eq!(lists, format!("{} inputs, value 1", VIDEOS - 1));
    let extract_alone = run(data, &[with_missing().remove(1)], None);
    assert_eq!(extract_alone.stages[0].completed, 0);
    assert_eq!(extract_alone.stages[0].missing, 1);
    assert!(extract_alone.succeeded(), "{:?}", outcomes(&extract_alone));
    assert_eq!(log_lines(data)[before..], ["lists all"]);
    let combined = run(data, &with_missing(), None);
    assert_eq!(outcomes(&combined)[2].1, StageOutcome::UpToDate);
    assert_eq!(log_lines(data)[before..], ["lists all"]);
    let mut expected = made;
    expected.push(("lists".to_string(), StageCondition::Done, 1));
    assert_eq!(status(data, &with_missing()), expected);

    // A run since the shards dropped a video's record (its redo failed): a single step reads
    // the stage as that run left it, not with the shard's old record back (which kept lists).
    let store = StateStore::new(data, None);
    let Loaded::Valid(mut extract) = store.load("extract").unwrap() else {
        panic!("extract has a state");
    };
    extract.items.remove("video03");
    extract.status = StageStatus::Failed;
    store.save(&extract).unwrap();
    let lists_again = run(data, &[with_missing().remove(2)], None);
    assert_eq!(lists_again.stages[0].outcome, StageOutcome::Completed);

    for index in 1..=3 {
        run(data, &with_missing(), Some(Shard { index, count: 3 }));
    }
    let forgotten = ["video03".to_string()];
    let shard_times = || -> Vec<std::time::SystemTime> {
        (1..=3)
            .map(|index| {
                let name = format!("download.shard-{index}-of-3.json");
                fs::metadata(state_dir.join(name))
                    .unwrap()
                    .modified()
                    .unwrap()
            })
            .collect()
    };
    let before_forget = shard_times();
    StateStore::new(data, None)
        .forget_items("download", &forgotten)
        .unwrap();
    // A shard file keeps its time: one newer than the stage's own file is read as later work.
    assert_eq!(shard_times(), before_forget);
    let before = log_lines(data).len();
    run(data, &with_missing(), None);
    let downloads: Vec<String> = log_lines(data)
        .split_off(before)
        .into_iter()
        .filter(|line| line.starts_with("download"))
        .collect();
    assert_eq!(downloads, ["download video03"]);
}

/// A video that failed in a run without `--shard` and that its shard then made: `status` shows
/// the stage done, not failed (it once kept the earlier failure until the combining run).
#[test]
fn a_failure_a_shard_made_good_is_over() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let mut failing = stages(1, Duration::ZERO);
    failing[1].failing = vec!["video05".to_string()];
    run(data, &failing, None);
    assert_eq!(status(data, &failing)[1].1, StageCondition::Failed);
    let shard = (1..=3)
        .map(|index| Shard { index, count: 3 })
        .find(|shard| shard.contains("video05"))
        .unwrap();
    run(data, &stages(1, Duration::ZERO), Some(shard));
    let conditions = status(data, &stages(1, Duration::ZERO));
    assert_eq!(
        conditions[1],
        ("extract".to_string(), StageCondition::Done, VIDEOS),
        "{conditions:?}"
    );
}

/// A shard finds the videos of its part already made (by a run without --shard, or by shards of
/// another count) done: on AVA it once re-hashed every download and extracted its videos again.
/// A single step after a round of shards that has not all run waits for the rest, naming them:
/// it once listed the videos of the shards that had run, and the validation passed.
#[test]
fn shards_reuse_what_was_made_and_single_steps_wait_for_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    run(data, &stages(1, Duration::ZERO), None);
    let made = log_lines(data).len();
    let late = run(
        data,
        &stages(1, Duration::ZERO),
        Some(Shard { index: 2, count: 3 }),
    );
    assert!(late.succeeded(), "{:?}", outcomes(&late));
    assert_eq!(
        log_lines(data).len(),
        made,
        "{:?}",
        &log_lines(data)[made..]
    );

    let other = tempfile::tempdir().unwrap();
    let data = other.path();
    for index in 1..=2 {
        run(
            data,
            &stages(1, Duration::ZERO),
            Some(Shard { index, count: 3 }),
        );
    }
    let reasons = blocked_reasons(&run(data, &stages(1, Duration::ZERO)[2..], None));
    let unfinished =
        "is not finished: it was prepared in 3 shards, and --shard 3/3 has not run yet";
    assert!(
        reasons.contains(&("extract".to_string(), unfinished.to_string())),
        "{reasons:?}"
    );
    assert!(!data.join("lists/all").exists());

    // A shard of another count makes only the videos of its part the others did not.
    let before = log_lines(data).len();
    let made_by_the_two: Vec<String> = log_lines(data)
        .iter()
        .filter_map(|line| line.strip_prefix("extract "))
        .map(String::from)
        .collect();
    let quarter = Shard { index: 3, count: 4 };
    run(data, &stages(1, Duration::ZERO), Some(quarter));
    let mut extracted: Vec<String> = log_lines(data)[before..]
        .iter()
        .filter_map(|line| line.strip_prefix("extract "))
        .map(String::from)
        .collect();
    let expected: Vec<String> = (0..VIDEOS)
        .map(|index| format!("video{index:02}"))
        .filter(|video| quarter.contains(video) && !made_by_the_two.contains(video))
        .collect();
    extracted.sort();
    assert_eq!(extracted, expected);
}

/// Ctrl-C before the run begins: the streaming per-video stages stop (interrupted, resumed next
/// time), and the stage after them, which never began, says so rather than "interrupted".
#[test]
fn stages_a_stopped_run_never_began_are_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let cancel = AtomicBool::new(true);
    let stages = stages(1, Duration::ZERO);
    let report = runner(data, &stages, None, &cancel).run().unwrap();
    assert_eq!(
        outcomes(&report),
        vec![
            ("download".to_string(), StageOutcome::Interrupted),
            ("extract".to_string(), StageOutcome::Interrupted),
            ("lists".to_string(), StageOutcome::NotStarted),
        ]
    );
    assert!(!report.succeeded());
    assert!(log_lines(data).is_empty());
    // `status` then says the stage that stopped was interrupted (it once said "stale").
    let conditions = status(data, &stages);
    assert_eq!(
        conditions[0],
        ("download".to_string(), StageCondition::Interrupted, 0)
    );
    // A single step after it waits for it to finish: it once made the lists of the videos the
    // stopped run had reached (here none), the others dropped as if they had failed.
    let reasons = blocked_reasons(&run(data, &stages[2..], None));
    let unfinished =
        format!("did not finish its last run ({VIDEOS} of {VIDEOS} videos not made yet)");
    assert!(
        reasons.contains(&("extract".to_string(), unfinished)),
        "{reasons:?}"
    );
    assert!(log_lines(data).is_empty());
}

/// `status` beside a run: the stage being run is "running", naming the command that holds the
/// data directory; once that command stops it is "interrupted". A command that takes the data
/// directory later, with the stage not resumed yet, does not make it "running" either.
#[test]
fn status_beside_a_run_says_running_and_names_the_command() {
    use avaprep::pipeline::lock::{DataDirLock, LockMode};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let stages = stages(1, Duration::from_millis(100));
    let download = |stages: &[TestStage]| {
        let cancel = AtomicBool::new(false);
        let lines = runner(data, stages, None, &cancel).status().unwrap();
        (
            lines[0].condition,
            lines[0].detail.clone().unwrap_or_default(),
        )
    };
    let cancel = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let running = scope.spawn(|| {
            let _lock =
                DataDirLock::acquire(data, LockMode::Exclusive, "avaprep run slow.toml").unwrap();
            runner(data, &stages, None, &cancel).run().unwrap()
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while recorded_items(&data.join(".avaprep/state/download.json")).len() < 2 {
            assert!(Instant::now() < deadline, "the run made no progress");
            std::thread::sleep(Duration::from_millis(20));
        }
        let (condition, detail) = download(&stages);
        assert_eq!(condition, StageCondition::Running, "{detail}");
        assert!(
            detail.contains("`avaprep run slow.toml`")
                && detail.contains(&format!("pid {}", std::process::id()))
                && detail.contains(&format!("of {VIDEOS} items made so far")),
            "{detail}"
        );
        cancel.store(true, std::sync::atomic::Ordering::SeqCst);
        running.join().unwrap();
    });
    let (condition, detail) = download(&stages);
    assert_eq!(condition, StageCondition::Interrupted, "{detail}");
    assert!(detail.contains("the next run resumes it"), "{detail}");
    // File times tick coarsely: the next command comes well after the state was written.
    std::thread::sleep(Duration::from_millis(50));
    let _later = DataDirLock::acquire(data, LockMode::Exclusive, "avaprep lists").unwrap();
    assert_eq!(download(&stages).0, StageCondition::Interrupted);
}

/// Not a test on its own: the process that `resumes_after_the_process_is_killed` starts and kills.
#[test]
#[ignore = "run by resumes_after_the_process_is_killed"]
fn child_runner() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    run(
        Path::new(&dir),
        &stages(1, Duration::from_millis(150)),
        None,
    );
}

#[test]
fn resumes_after_the_process_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "runner::child_runner",
            "--nocapture",
        ])
        .env(CHILD_DIR, data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let state_path = data.join(".avaprep/state/extract.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    let recorded_before_kill = loop {
        let done = recorded_items(&state_path);
        if done.len() >= 3 {
            break done;
        }
        assert!(Instant::now() < deadline, "the child made no progress");
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    let recorded = recorded_items(&state_path);
    assert!(recorded.len() < VIDEOS, "killed too late to test resuming");
    assert!(recorded.len() >= recorded_before_kill.len());
    for item in recorded.keys() {
        assert!(
            data.join("extract").join(item).exists(),
            "{item} recorded but missing"
        );
    }
    assert_no_temporaries(&data.join("extract"));

    let lines_before = log_lines(data).len();
    let resumed = run(data, &stages(1, Duration::ZERO), None);
    assert_eq!(outcomes(&resumed), all(StageOutcome::Completed));
    assert_eq!(resumed.stages[1].already_done, recorded.len());
    let rerun = &log_lines(data)[lines_before..];
    for item in recorded.keys() {
        assert!(
            !rerun.contains(&format!("extract {item}")),
            "{item} was complete before the kill and must not run again"
        );
    }
    for index in 0..VIDEOS {
        let content = fs::read_to_string(data.join(format!("extract/video{index:02}"))).unwrap();
        assert_eq!(content, format!("video{index:02} value 1"));
    }
}

fn recorded_items(state_path: &Path) -> BTreeMap<String, serde_json::Value> {
    let Ok(bytes) = fs::read(state_path) else {
        return BTreeMap::new();
    };
    let envelope: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    serde_json::from_value(envelope["state"]["items"].clone()).unwrap()
}

/// A killed writer may leave a temporary file, but never one under a final name.
fn assert_no_temporaries(folder: &Path) {
    for entry in fs::read_dir(folder).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.contains(".tmp-") {
            continue;
        }
        assert!(name.starts_with("video"), "unexpected file {name}");
    }
}

/// State files an earlier version wrote (format 1: a fingerprint over the dependencies' records,
/// no item keys) that were up to date by that version's rule are adopted: nothing is redone
/// after an upgrade. One whose parameters changed since is redone as before.
#[test]
fn state_files_of_the_earlier_format_are_adopted_not_redone() {
    use avaprep::pipeline::fingerprint::legacy_fingerprint;
    use avaprep::pipeline::prints::{combined_digest, items_digest};
    use avaprep::pipeline::state::Loaded;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let original = stages(1, Duration::ZERO);
    run(data, &original, None);
    // Each state as the earlier version wrote it, in dependency order.
    let store = StateStore::new(data, None);
    let mut written: BTreeMap<Step, (String, String, String)> = BTreeMap::new();
    for stage in &original {
        let Loaded::Valid(mut state) = store.load(stage.id.name()).unwrap() else {
            panic!("{} has a state", stage.id.name());
        };
        let dependencies: Vec<String> = stage
            .depends_on
            .iter()
            .map(|dependency| {
                let (fingerprint, whole_digest, items) = &written[dependency];
                let made = match stage.granularity {
                    Granularity::Whole => items.clone(),
                    Granularity::PerVideo => whole_digest.clone(),
                };
                format!("{fingerprint}:{made}")
            })
            .collect();
        let dependencies: Vec<&str> = dependencies.iter().map(String::as_str).collect();
        state.format = 1;
        state.fingerprint = legacy_fingerprint(stage, &dependencies);
        state.planned.clear();
        state.depends_on.clear();
        state.missing_keys.clear();
        for record in state.items.values_mut() {
            record.key.clear();
            record.upstream.clear();
        }
        let whole_digest = state
            .items
            .get(avaprep::pipeline::WHOLE)
            .map(|record| combined_digest(&record.outputs))
            .unwrap_or_default();
        written.insert(
            stage.id,
            (
                state.fingerprint.clone(),
                whole_digest,
                items_digest(&state.items),
            ),
        );
        store.save(&state).unwrap();
    }
    let before = log_lines(data).len();
    let upgraded = run(data, &original, None);
    assert_eq!(outcomes(&upgraded), all(StageOutcome::UpToDate));
    assert_eq!(log_lines(data).len(), before, "nothing redone");
    let again = run(data, &original, None);
    assert_eq!(outcomes(&again), all(StageOutcome::UpToDate));
    let changed = run(data, &stages(2, Duration::ZERO), None);
    assert_eq!(changed.stages[1].completed, VIDEOS);
}
