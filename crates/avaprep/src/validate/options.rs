//! What a person asks `avaprep validate` to check: the data directory avaprep made, or a
//! dataset a PySlowFast config (and folders given over it) describes, with values over what
//! `avaprep lists` recorded. (The pipeline's stage checks the data directory as it was made.)

use std::path::{Path, PathBuf};

use super::{Depth, PySlowFastYaml, ValidateError, ValidateRequest};
use crate::annotations::KeyframeRange;
use crate::bad_setting::BadSetting;
use crate::layout::DataLayout;
use crate::manifest::DatasetManifest;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValidateOptions {
    /// A PySlowFast config naming the folders and files, for a dataset avaprep did not make.
    pub config: Option<PathBuf>,
    /// PySlowFast's AVA.FRAME_DIR, FRAME_LIST_DIR and ANNOTATION_DIR, over the config's.
    pub frame_dir: Option<PathBuf>,
    pub frame_list_dir: Option<PathBuf>,
    pub annotation_dir: Option<PathBuf>,
    /// Decode a sample of the frames instead of every one.
    pub quick: bool,
    pub height: Option<u32>,
    pub list_fps: Option<f64>,
    pub segment_start: Option<f64>,
    pub segment_end: Option<f64>,
    pub keyframes: Option<KeyframeRange>,
    /// A dataset manifest whose sha256 the annotation files must have.
    pub manifest: Option<PathBuf>,
}

impl Depth {
    /// `--quick` and `[validate] quick`.
    pub fn quick_if(quick: bool) -> Depth {
        match quick {
            true => Depth::Quick,
            false => Depth::Full,
        }
    }
}

impl ValidateOptions {
    /// The checks the pipeline's validate stage makes of the data directory's own dataset (or
    /// stricter ones: a height, a manifest), not of other folders or another timing: what they
    /// find is the data directory's validation, as the stage's is.
    pub fn checks_the_data_dir_as_made(&self) -> bool {
        !self.foreign()
            && self.list_fps.is_none()
            && self.segment_start.is_none()
            && self.segment_end.is_none()
            && self.keyframes.is_none()
    }

    /// A dataset avaprep did not make: a config or a folder names it.
    fn foreign(&self) -> bool {
        self.config.is_some()
            || self.frame_dir.is_some()
            || self.frame_list_dir.is_some()
            || self.annotation_dir.is_some()
    }
}

impl ValidateRequest {
    /// The checks of `options` on the dataset they name (else the one in `data_dir`).
    pub fn from_options(data_dir: &Path, options: &ValidateOptions) -> Result<Self, ValidateError> {
        let depth = Depth::quick_if(options.quick);
        let mut request = match options.foreign() {
            true => Self::for_foreign(data_dir, options, depth)?,
            false => Self::for_data_dir(data_dir, depth)?,
        };
        request.apply_timing(options)?;
        request.height = options.height;
        if let Some(path) = &options.manifest {
            let annotations = match options.foreign() {
                true => request.annotation_dir.clone(),
                false => data_dir.join("annotations"),
            };
            request.expect_manifest(path, &annotations)?;
        }
        Ok(request)
    }

    /// A config named, or roots given over the config avaprep wrote for them (else over
    /// PySlowFast's defaults).
    fn for_foreign(
        data_dir: &Path,
        options: &ValidateOptions,
        depth: Depth,
    ) -> Result<Self, ValidateError> {
        let named = options
            .config
            .clone()
            .or_else(|| avaprep_config(data_dir, options));
        let mut config = match named {
            Some(path) => PySlowFastYaml::load(&path)?,
            None => PySlowFastYaml::defaults(),
        };
        for (given, slot) in [
            (&options.frame_dir, &mut config.frame_dir),
            (&options.frame_list_dir, &mut config.frame_list_dir),
            (&options.annotation_dir, &mut config.annotation_dir),
        ] {
            if given.is_some() {
                *slot = given.clone();
            }
        }
        ValidateRequest::for_config(&config, depth)?.with_records_beside(&config)
    }

    fn apply_timing(&mut self, options: &ValidateOptions) -> Result<(), ValidateError> {
        let bad =
            |key, value: f64, problem| ValidateError::Setting(BadSetting::new(key, value, problem));
        if let Some(list_fps) = options.list_fps {
            if !(list_fps.is_finite() && list_fps > 0.0) {
                return Err(bad("list_fps", list_fps, "must be a rate above 0"));
            }
            self.timing.list_fps = list_fps;
        }
        if let Some(start) = options.segment_start {
            if !start.is_finite() {
                return Err(bad("segment_start", start, "must be a number of seconds"));
            }
            self.timing.segment_start = start;
        }
        if let Some(end) = options.segment_end {
            if !(end.is_finite() && end > self.timing.segment_start) {
                return Err(bad(
                    "segment_end",
                    end,
                    "must be a number of seconds after the segment start",
                ));
            }
            self.timing.segment_end = end;
        }
        if let Some(keyframes) = options.keyframes {
            self.timing.keyframes = [keyframes.first(), keyframes.last()];
        }
        Ok(())
    }

    /// The annotation files under `annotations` must have the sha256 the manifest lists.
    fn expect_manifest(&mut self, path: &Path, annotations: &Path) -> Result<(), ValidateError> {
        let manifest = DatasetManifest::load(path).map_err(|error| ValidateError::Config {
            path: path.to_path_buf(),
            message: error.to_string(),
        })?;
        let pinned: Vec<_> = manifest
            .annotations
            .iter()
            .flat_map(|archive| &archive.contents)
            .filter(|file| file.sha256.is_some())
            .collect();
        // Only the chosen splits' files are copied in (a train-and-val dataset has no test
        // files): a file the folder lacks is for `files-present`, where a config names it.
        for file in &pinned {
            let held = annotations.join(&file.name);
            if let (true, Some(sha256)) = (held.exists(), &file.sha256) {
                self.known_sha256.insert(held, sha256.clone());
            }
        }
        if !pinned.is_empty() && self.known_sha256.is_empty() {
            return Err(ValidateError::Config {
                path: path.to_path_buf(),
                message: format!(
                    "{} holds none of the annotation files it names: another release's manifest, or another folder",
                    annotations.display()
                ),
            });
        }
        Ok(())
    }
}

/// The PySlowFast config avaprep wrote for the folders given without one: the data
/// directory's, else the one beside the lists given (in the data directory they were made in,
/// or a copy of it). Its file names and clock are those lists', where PySlowFast's defaults would
/// check a dataset on its own clock against AVA's.
fn avaprep_config(data_dir: &Path, options: &ValidateOptions) -> Option<PathBuf> {
    let config = |data_dir: &Path| DataLayout::new(data_dir).slowfast().join("ava.yaml");
    let beside_lists = options
        .frame_list_dir
        .as_deref()
        .and_then(Path::parent)
        .map(config);
    [Some(config(data_dir)), beside_lists]
        .into_iter()
        .flatten()
        .find(|path| path.is_file())
}
