//! Pipeline files: `pipelines/*.toml`.
//!
//! ```toml
//! dataset = "../manifests/ava-v2.2.toml"  # relative to this file
//! splits = ["train", "val"]
//! videos_per_split = 4                   # 0: every video of each split
//!
//! [extract]                               # one table per stage command, keys as its flags
//! fps = 5
//! ```
//! `avaprep run FILE --set extract.fps=10` overrides any key, as if the file said it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::overrides::apply_override;
use crate::split::SplitName;

#[derive(Debug, Clone, PartialEq)]
pub struct PipelineSpec {
    pub path: PathBuf,
    /// The dataset manifest, resolved against the pipeline file's folder; `None` for a pipeline
    /// whose `[import]` table makes the dataset (see [`Self::with_dataset`]).
    pub dataset: Option<PathBuf>,
    pub splits: Vec<SplitName>,
    pub videos_per_split: usize,
    /// A file of video ids (one per line) to restrict the run to, resolved like `dataset`.
    pub video_list: Option<PathBuf>,
    /// Each stage's table, checked by the stage that reads it.
    pub stage_tables: toml::Table,
    /// The `--set KEY=VALUE`s applied over the file, named where a value they set is refused.
    pub overrides: Vec<String>,
}

/// The top-level keys (everything else is a stage's table).
const TOP_LEVEL_KEYS: [&str; 4] = ["dataset", "splits", "videos_per_split", "video_list"];

/// Unknown top-level keys land in `stage_tables` and are refused there by name.
#[derive(Debug, Deserialize)]
struct TopLevel {
    dataset: Option<PathBuf>,
    #[serde(default = "default_splits")]
    splits: Vec<SplitName>,
    #[serde(default)]
    videos_per_split: usize,
    video_list: Option<PathBuf>,
    #[serde(flatten)]
    stage_tables: toml::Table,
}

fn default_splits() -> Vec<SplitName> {
    ["train", "val"]
        .map(|name| name.parse().expect("plain names"))
        .to_vec()
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{path}: cannot read pipeline file: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("--set {0}: expected KEY=VALUE, e.g. extract.fps=10")]
    BadOverride(String),
}

impl SpecError {
    /// An invalid value (the user's to fix), as opposed to a file that cannot be read.
    pub fn is_usage(&self) -> bool {
        !matches!(self, SpecError::Read { .. })
    }
}

/// The table of a pipeline that imports its dataset from annotation-tool exports.
pub const IMPORT_TABLE: &str = "import";

impl PipelineSpec {
    /// The folder the pipeline file is in, which the paths it names are relative to (`.` for a
    /// file named without one).
    pub fn folder(&self) -> &Path {
        folder_of(&self.path)
    }

    /// Whether the pipeline imports its dataset (an `[import]` table) rather than naming one.
    pub fn imports(&self) -> bool {
        self.stage_tables.contains_key(IMPORT_TABLE)
    }

    /// The pipeline on `manifest`: for one that imports, the dataset its import made.
    pub fn with_dataset(mut self, manifest: PathBuf) -> Self {
        self.dataset = Some(manifest);
        self
    }

    /// Reads a pipeline file whose stage tables must be among `tables` (the caller's stages).
    pub fn load(path: &Path, overrides: &[String], tables: &[&str]) -> Result<Self, SpecError> {
        let text = crate::fsutil::read_regular_text(path, crate::fsutil::FileKind::Config)
            .map_err(|source| SpecError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Self::parse(path, &text, overrides, tables)
    }

    pub fn parse(
        path: &Path,
        text: &str,
        overrides: &[String],
        tables: &[&str],
    ) -> Result<Self, SpecError> {
        let invalid = |message: String| SpecError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let mut document: toml::Table = text
            .parse()
            .map_err(|error: toml::de::Error| invalid(error.to_string().trim_end().to_string()))?;
        for assignment in overrides {
            apply_override(&mut document, assignment)
                .map_err(|error| SpecError::BadOverride(error.0))?;
        }
        let top: TopLevel = document.try_into().map_err(|error: toml::de::Error| {
            let message = error.to_string().trim_end().to_string();
            let top_level = |key: &str| !key.contains('.') && names_key(&message, key);
            invalid(with_sets(overrides, top_level, &message))
        })?;
        for (name, value) in &top.stage_tables {
            if !tables.contains(&name.as_str()) {
                let message = format!(
                    "unknown key or table `{name}`{} (stage tables are: {}; top-level keys: {})",
                    closest_name(name, tables)
                        .map_or(String::new(), |known| format!(": did you mean `{known}`?")),
                    tables.join(", "),
                    TOP_LEVEL_KEYS.join(", ")
                );
                let in_table = |key: &str| key.split('.').next() == Some(name.as_str());
                return Err(invalid(with_sets(overrides, in_table, &message)));
            }
            if !value.is_table() {
                return Err(invalid(format!(
                    "`{name}` must be a table of stage parameters"
                )));
            }
        }
        let imports = top.stage_tables.contains_key(IMPORT_TABLE);
        match (&top.dataset, imports) {
            (Some(_), true) => {
                return Err(invalid(format!(
                    "`dataset` and [{IMPORT_TABLE}] both say where the dataset comes from: keep one"
                )));
            }
            (None, false) => {
                return Err(invalid(format!(
                    "no `dataset`: name a dataset manifest, or import one with an [{IMPORT_TABLE}] table"
                )));
            }
            _ => {}
        }
        let folder = folder_of(path);
        Ok(PipelineSpec {
            path: path.to_path_buf(),
            dataset: top.dataset.map(|dataset| folder.join(dataset)),
            splits: top.splits,
            videos_per_split: top.videos_per_split,
            video_list: top.video_list.map(|list| folder.join(list)),
            stage_tables: top.stage_tables,
            overrides: overrides.to_vec(),
        })
    }

    /// A value of `table` refused: said of the file, and of the `--set`s of that table whose
    /// key the message names (the file itself may be as it should).
    pub fn invalid(&self, table: &str, message: String) -> SpecError {
        let of_table = |key: &str| key.split('.').next() == Some(table) && names_key(&message, key);
        SpecError::Invalid {
            path: self.path.clone(),
            message: with_sets(&self.overrides, of_table, &message),
        }
    }

    /// A stage's table, deserialised into its parameter type (which should deny unknown fields).
    pub fn stage_params<T: serde::de::DeserializeOwned + Default>(
        &self,
        table: &str,
    ) -> Result<T, SpecError> {
        match self.stage_tables.get(table) {
            None => Ok(T::default()),
            Some(value) => value.clone().try_into().map_err(|error: toml::de::Error| {
                self.invalid(
                    table,
                    format!("[{table}]: {}", error.to_string().trim_end()),
                )
            }),
        }
    }
}

/// The stage table or top-level key `name` is most likely a slip for: two edits away at most.
fn closest_name<'a>(name: &str, tables: &[&'a str]) -> Option<&'a str> {
    tables
        .iter()
        .copied()
        .chain(TOP_LEVEL_KEYS)
        .map(|known| (strsim::osa_distance(name, known), known))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, known)| known)
}

/// `message`, with the `--set`s among `overrides` whose key `sets_it` says the message is about.
fn with_sets(overrides: &[String], sets_it: impl Fn(&str) -> bool, message: &str) -> String {
    let sets: Vec<&str> = overrides
        .iter()
        .map(String::as_str)
        .filter(|assignment| {
            let key = assignment
                .split_once('=')
                .map_or(*assignment, |(key, _)| key);
            sets_it(key.trim())
        })
        .collect();
    match sets.is_empty() {
        true => message.to_string(),
        false => format!("{message} (set by --set {})", sets.join(", --set ")),
    }
}

/// Whether `message` names the last part of `key` (`fps` of `extract.fps`) as a word of its own,
/// outside what it says was expected (`unknown field `fsp`, expected `fps` or `height``).
fn names_key(message: &str, key: &str) -> bool {
    let name = key.rsplit('.').next().unwrap_or(key);
    let said = message
        .lines()
        .map(|line| line.split("expected").next().unwrap_or(line));
    !name.is_empty()
        && said
            .flat_map(|part| part.split(|c: char| !(c.is_alphanumeric() || c == '_')))
            .any(|word| word == name)
}

fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct ExtractParams {
        fps: Option<f64>,
        height: Option<u32>,
    }

    const TABLES: &[&str] = &["fetch", "extract"];

    const TEXT: &str = "dataset = \"../manifests/ava-v2.2.toml\"\n[extract]\nfps = 5\n";

    #[test]
    fn reads_and_overrides() {
        let path = Path::new("pipelines/x.toml");
        let overrides = [
            "extract.fps=10".to_string(),
            "videos_per_split=3".to_string(),
        ];
        let spec = PipelineSpec::parse(path, TEXT, &overrides, TABLES).unwrap();
        assert_eq!(
            spec.dataset.as_deref(),
            Some(Path::new("pipelines/../manifests/ava-v2.2.toml"))
        );
        assert_eq!(spec.videos_per_split, 3);
        assert_eq!(spec.splits, vec!["train", "val"]);
        let params: ExtractParams = spec.stage_params("extract").unwrap();
        assert_eq!(params.fps, Some(10.0));
    }

    #[test]
    fn the_dataset_is_named_or_imported_never_both_nor_neither() {
        let path = Path::new("x.toml");
        let tables = &["import"];
        let imported =
            PipelineSpec::parse(path, "[import]\nvideos = \"v\"\n", &[], tables).unwrap();
        assert!(imported.imports() && imported.dataset.is_none());
        let both = PipelineSpec::parse(path, "dataset = \"d\"\n[import]\n", &[], tables);
        assert!(both.unwrap_err().to_string().contains("keep one"));
        let neither = PipelineSpec::parse(path, "splits = [\"train\"]\n", &[], tables);
        assert!(neither.unwrap_err().to_string().contains("no `dataset`"));
    }

    #[test]
    fn rejects_unknown_tables_and_keys() {
        let path = Path::new("x.toml");
        let error = PipelineSpec::parse(path, "dataset = \"d\"\n[extrct]\nfps = 5\n", &[], TABLES)
            .unwrap_err();
        assert!(
            error.to_string().contains("unknown key or table `extrct`"),
            "{error}"
        );
        assert!(
            !error.to_string().contains("--set"),
            "the file's own mistake: {error}"
        );
        let spec = PipelineSpec::parse(path, TEXT, &["extract.fsp=3".into()], TABLES).unwrap();
        let error = spec.stage_params::<ExtractParams>("extract").unwrap_err();
        assert!(error.to_string().contains("fsp"), "{error}");
        assert!(PipelineSpec::parse(path, TEXT, &["nonsense".into()], TABLES).is_err());
    }

    /// A value a `--set` put there is said to be the `--set`'s: the file may be as it should.
    #[test]
    fn a_refused_value_names_the_set_that_put_it_there() {
        let path = Path::new("x.toml");
        let sets = |sets: &[&str]| sets.iter().map(|set| set.to_string()).collect::<Vec<_>>();
        let spec = PipelineSpec::parse(
            path,
            TEXT,
            &sets(&["fetch.jobs=2", "extract.fsp=3"]),
            TABLES,
        )
        .unwrap();
        let error = spec.stage_params::<ExtractParams>("extract").unwrap_err();
        assert!(
            error.to_string().ends_with("(set by --set extract.fsp=3)"),
            "{error}"
        );
        // The file's own slip is not blamed on a --set of the same table.
        let typo = "dataset = \"d\"\n[extract]\nfsp = 5\n";
        let spec = PipelineSpec::parse(path, typo, &sets(&["extract.height=240"]), TABLES).unwrap();
        let error = spec.stage_params::<ExtractParams>("extract").unwrap_err();
        assert!(!error.to_string().contains("--set"), "{error}");
        let error = PipelineSpec::parse(path, TEXT, &sets(&["extrct.fps=3"]), TABLES).unwrap_err();
        assert!(
            error.to_string().contains("(set by --set extrct.fps=3)"),
            "{error}"
        );
        let error = PipelineSpec::parse(path, TEXT, &sets(&["splits=3"]), TABLES).unwrap_err();
        assert!(
            error.to_string().contains("(set by --set splits=3)"),
            "{error}"
        );
        let error =
            PipelineSpec::parse(path, "dataset = \"d\"\n[split]\n", &[], TABLES).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("top-level keys: dataset, splits"),
            "{error}"
        );
    }
}
