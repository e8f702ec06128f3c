//! What to validate: the three roots PySlowFast reads and the file names its config gives, from a
//! PySlowFast YAML config (ours, `slowfast/ava.yaml`, or a user's), with PySlowFast's defaults
//! for keys a config leaves out.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ValidateError;
use crate::fsutil::{self, FileKind};

/// PySlowFast's `AVA.*` names of the files inside the frame-list and annotation folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetNames {
    pub train_lists: Vec<String>,
    pub test_lists: Vec<String>,
    pub train_gt_box_lists: Vec<String>,
    pub train_predict_box_lists: Vec<String>,
    pub test_predict_box_lists: Vec<String>,
    pub exclusion_file: Option<String>,
    pub label_map_file: String,
    pub groundtruth_file: Option<String>,
}

impl Default for DatasetNames {
    /// PySlowFast's defaults (`slowfast/config/defaults.py`).
    fn default() -> Self {
        DatasetNames {
            train_lists: vec!["train.csv".into()],
            test_lists: vec!["val.csv".into()],
            train_gt_box_lists: vec!["ava_train_v2.2.csv".into()],
            train_predict_box_lists: Vec::new(),
            test_predict_box_lists: vec!["ava_val_predicted_boxes.csv".into()],
            exclusion_file: Some("ava_val_excluded_timestamps_v2.2.csv".into()),
            label_map_file: "ava_action_list_v2.2_for_activitynet_2019.pbtxt".into(),
            groundtruth_file: Some("ava_val_v2.2.csv".into()),
        }
    }
}

impl DatasetNames {
    /// Every name, for the confinement check: each must be a plain relative name.
    pub fn all(&self) -> impl Iterator<Item = &String> {
        self.train_lists
            .iter()
            .chain(&self.test_lists)
            .chain(&self.train_gt_box_lists)
            .chain(&self.train_predict_box_lists)
            .chain(&self.test_predict_box_lists)
            .chain(&self.exclusion_file)
            .chain(std::iter::once(&self.label_map_file))
            .chain(&self.groundtruth_file)
    }
}

/// The keys of a PySlowFast config that validation reads; everything else is ignored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PySlowFastYaml {
    pub frame_dir: Option<PathBuf>,
    pub frame_list_dir: Option<PathBuf>,
    pub annotation_dir: Option<PathBuf>,
    pub names: DatasetNames,
    pub num_frames: u32,
    pub sampling_rate: u32,
    /// AVA.DETECTION_SCORE_THRESH: a detector's box below it is no proposal.
    pub detection_score_thresh: f64,
    /// The files read: the one named, then its `_BASE_` chain; none for the defaults.
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(rename = "_BASE_")]
    base: Option<String>,
    #[serde(rename = "AVA")]
    ava: Option<AvaKeys>,
    #[serde(rename = "DATA")]
    data: Option<DataKeys>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
struct AvaKeys {
    frame_dir: Option<String>,
    frame_list_dir: Option<String>,
    annotation_dir: Option<String>,
    train_lists: Option<Vec<String>>,
    test_lists: Option<Vec<String>>,
    train_gt_box_lists: Option<Vec<String>>,
    train_predict_box_lists: Option<Vec<String>>,
    test_predict_box_lists: Option<Vec<String>>,
    exclusion_file: Option<String>,
    label_map_file: Option<String>,
    groundtruth_file: Option<String>,
    detection_score_thresh: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
struct DataKeys {
    num_frames: Option<u32>,
    sampling_rate: Option<u32>,
}

/// The most configs one `_BASE_` chain may hold (PySlowFast's own configs use two or three).
const MAX_BASE_DEPTH: usize = 16;

impl PySlowFastYaml {
    /// PySlowFast's defaults: what a config that names nothing means.
    pub fn defaults() -> Self {
        PySlowFastYaml {
            frame_dir: None,
            frame_list_dir: None,
            annotation_dir: None,
            names: DatasetNames::default(),
            num_frames: 8,
            sampling_rate: 8,
            detection_score_thresh: 0.9,
            files: Vec::new(),
        }
    }

    /// Reads `path` over its `_BASE_` files (relative to the file naming them) over the defaults,
    /// as PySlowFast's `merge_from_file` does.
    pub fn load(path: &Path) -> Result<Self, ValidateError> {
        let mut chain: Vec<(PathBuf, ConfigFile)> = Vec::new();
        let mut next = Some(path.to_path_buf());
        while let Some(path) = next.take() {
            let file = read_config(&path)?;
            if let Some(base) = &file.base {
                let dir = path.parent().unwrap_or(Path::new("."));
                let base_path = dir.join(base);
                let named_by = |message: String| ValidateError::Config {
                    path: path.clone(),
                    message: format!("_BASE_ `{}`: {message}", brief(base)),
                };
                let seen = |other: &Path| same_file(other, &base_path);
                if seen(&path) || chain.iter().any(|(earlier, _)| seen(earlier)) {
                    let mut cycle: Vec<String> = chain
                        .iter()
                        .map(|(earlier, _)| earlier.display().to_string())
                        .chain([path.display().to_string(), base_path.display().to_string()])
                        .collect();
                    let start = cycle
                        .iter()
                        .position(|earlier| same_file(Path::new(earlier), &base_path))
                        .unwrap_or(0);
                    cycle.drain(..start);
                    return Err(named_by(format!(
                        "the configs name each other in a cycle ({})",
                        cycle.join(" -> ")
                    )));
                }
                if chain.len() + 1 == MAX_BASE_DEPTH {
                    return Err(named_by(format!("more than {MAX_BASE_DEPTH} configs deep")));
                }
                if let Err(error) = fsutil::check_regular(&base_path, FileKind::Config) {
                    return Err(named_by(format!("{}: {error}", base_path.display())));
                }
                next = Some(base_path);
            }
            chain.push((path, file));
        }
        let mut config = Self::defaults();
        config.files = chain.iter().map(|(path, _)| path.clone()).collect();
        for (_, file) in chain.into_iter().rev() {
            config.merge(file);
        }
        Ok(config)
    }

    fn merge(&mut self, file: ConfigFile) {
        if let Some(ava) = file.ava {
            let names = &mut self.names;
            set(&mut self.frame_dir, ava.frame_dir.map(PathBuf::from));
            set(
                &mut self.frame_list_dir,
                ava.frame_list_dir.map(PathBuf::from),
            );
            set(
                &mut self.annotation_dir,
                ava.annotation_dir.map(PathBuf::from),
            );
            replace(&mut names.train_lists, ava.train_lists);
            replace(&mut names.test_lists, ava.test_lists);
            replace(&mut names.train_gt_box_lists, ava.train_gt_box_lists);
            replace(
                &mut names.train_predict_box_lists,
                ava.train_predict_box_lists,
            );
            replace(
                &mut names.test_predict_box_lists,
                ava.test_predict_box_lists,
            );
            set(&mut names.exclusion_file, ava.exclusion_file);
            replace(&mut names.label_map_file, ava.label_map_file);
            set(&mut names.groundtruth_file, ava.groundtruth_file);
            replace(&mut self.detection_score_thresh, ava.detection_score_thresh);
        }
        if let Some(data) = file.data {
            replace(&mut self.num_frames, data.num_frames);
            replace(&mut self.sampling_rate, data.sampling_rate);
        }
    }
}

fn set<T>(slot: &mut Option<T>, value: Option<T>) {
    if value.is_some() {
        *slot = value;
    }
}

fn replace<T>(slot: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *slot = value;
    }
}

fn read_config(path: &Path) -> Result<ConfigFile, ValidateError> {
    let invalid = |message: String| ValidateError::Config {
        path: path.to_path_buf(),
        message,
    };
    let text = fsutil::read_regular_text(path, FileKind::Config)
        .map_err(|error| invalid(error.to_string()))?;
    let value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&text).map_err(|error| invalid(brief(&error.to_string())))?;
    let kind = match &value {
        serde_yaml_ng::Value::Null => return Ok(ConfigFile::default()),
        serde_yaml_ng::Value::Mapping(_) => return deserialize(value).map_err(invalid),
        serde_yaml_ng::Value::Bool(_) => "a boolean",
        serde_yaml_ng::Value::Number(_) => "a number",
        serde_yaml_ng::Value::String(_) => "a string",
        serde_yaml_ng::Value::Sequence(_) => "a list",
        serde_yaml_ng::Value::Tagged(_) => "a tagged value",
    };
    Err(invalid(format!(
        "not a PySlowFast config: the file is {kind}, not a YAML mapping of keys such as AVA: and DATA:"
    )))
}

fn deserialize(value: serde_yaml_ng::Value) -> Result<ConfigFile, String> {
    serde_yaml_ng::from_value(value).map_err(|error| brief(&error.to_string()))
}

/// At most one line of a message that may quote the user's file, and not a long one.
fn brief(text: &str) -> String {
    const MOST: usize = 160;
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(MOST) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None if text.lines().nth(1).is_some() => format!("{line} ..."),
        None => line.to_string(),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_merges_over_its_base_and_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("base.yaml"),
            "AVA:\n  FRAME_DIR: /data/frames\n  TRAIN_LISTS: [a.csv]\nDATA:\n  NUM_FRAMES: 32\nMODEL:\n  ARCH: slowfast\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("run.yaml"),
            "_BASE_: base.yaml\nAVA:\n  TRAIN_LISTS: [b.csv, c.csv]\n  TEST_PREDICT_BOX_LISTS: []\nDATA:\n  SAMPLING_RATE: 2\n",
        )
        .unwrap();
        let config = PySlowFastYaml::load(&dir.path().join("run.yaml")).unwrap();
        assert_eq!(config.frame_dir, Some(PathBuf::from("/data/frames")));
        assert_eq!(config.names.train_lists, ["b.csv", "c.csv"]);
        assert!(config.names.test_predict_box_lists.is_empty());
        assert_eq!(config.names.test_lists, ["val.csv"], "a PySlowFast default");
        assert_eq!((config.num_frames, config.sampling_rate), (32, 2));
    }

    #[test]
    fn a_base_loop_and_bad_yaml_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loop.yaml");
        std::fs::write(&path, "_BASE_: loop.yaml\n").unwrap();
        let error = PySlowFastYaml::load(&path).unwrap_err().to_string();
        assert!(error.contains("cycle"), "{error}");
        std::fs::write(&path, "AVA: [unclosed\n").unwrap();
        let error = PySlowFastYaml::load(&path).unwrap_err().to_string();
        assert!(error.contains("loop.yaml"), "{error}");
    }

    #[test]
    fn a_base_cycle_is_named_as_one_with_its_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.yaml"), "_BASE_: b.yaml\n").unwrap();
        std::fs::write(dir.path().join("b.yaml"), "_BASE_: c.yaml\n").unwrap();
        std::fs::write(dir.path().join("c.yaml"), "_BASE_: b.yaml\n").unwrap();
        let error = PySlowFastYaml::load(&dir.path().join("a.yaml"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("c.yaml: _BASE_ `b.yaml`"), "{error}");
        assert!(error.contains("cycle"), "{error}");
        assert!(!error.contains("nested"), "{error}");
        let at = |name: &str| error.find(name).unwrap();
        assert!(at("b.yaml ->") < at("c.yaml ->"), "{error}");
    }

    #[test]
    fn a_missing_base_is_named_with_the_config_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.yaml");
        std::fs::write(&path, "_BASE_: missing/base.yaml\n").unwrap();
        let error = PySlowFastYaml::load(&path).unwrap_err().to_string();
        assert!(error.starts_with(&path.display().to_string()), "{error}");
        assert!(error.contains("_BASE_ `missing/base.yaml`"), "{error}");
        assert!(error.contains("No such file"), "{error}");
    }

    /// A file that is not a mapping (a base naming `/etc/passwd`, a 20 MB line) is refused in a
    /// sentence, never echoed.
    #[test]
    fn a_config_that_is_not_a_mapping_is_not_echoed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("text.yaml");
        let long = "x".repeat(1 << 20);
        std::fs::write(&path, &long).unwrap();
        let error = PySlowFastYaml::load(&path).unwrap_err().to_string();
        assert!(error.contains("is a string, not a YAML mapping"), "{error}");
        assert!(error.len() < 400, "{} bytes", error.len());

        let secret = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n";
        std::fs::write(dir.path().join("passwd"), secret).unwrap();
        std::fs::write(&path, "_BASE_: passwd\n").unwrap();
        let error = PySlowFastYaml::load(&path).unwrap_err().to_string();
        assert!(!error.contains("root:x"), "{error}");
        assert!(error.contains("passwd"), "{error}");

        std::fs::write(&path, format!("AVA:\n  FRAME_DIR: [{long}]\n")).unwrap();
        let error = PySlowFastYaml::load(&path).unwrap_err().to_string();
        assert!(error.len() < 400 && !error.contains('\n'), "{error}");
    }
}
