//! Checkpoints in the run directory, atomic as a set.
//!
//! Tensors go to files named by their step (`model-s<step>.safetensors`,
//! `optimizer-s<step>.safetensors`, `best-s<step>.safetensors`), each written under a temporary
//! name, synced and renamed. `checkpoint.json` names the files of the current checkpoint and
//! holds the rest of the state; it is written last, atomically, so it is the commit point: a
//! crash at any moment leaves the previous checkpoint whole. Files no longer named are removed
//! after the commit.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use safetensors::{Dtype, View};
use serde::{Deserialize, Serialize};
use tch::{Tensor, nn};

use super::early_stop::EarlyStopping;
use super::model::SlowFastConfig;
use super::optim::{LossScaler, Sgd};
use super::{StopReason, TrainError};
use avaprep::fsutil::{sync_parent, write_atomic};
use avaprep::trainer_protocol::{CheckpointFiles, InitReport, SkippedTensor};

pub use avaprep::trainer_protocol::run_files::CHECKPOINT as STATE_FILE;

/// The header key under which a weights file records its network (`SlowFastConfig` as JSON), so
/// that `scripts/export_checkpoint.py` can rebuild it in PySlowFast's or pytorchvideo's terms.
pub const MODEL_METADATA_KEY: &str = "avaprep.model";

/// The header key under which a weights file records the action of each output, in order (the
/// label map it was trained on, as `[[id, name], ...]`): weights are not used on a dataset whose
/// outputs, of the same count, mean other actions.
pub const ACTIONS_METADATA_KEY: &str = "avaprep.actions";

/// The action (id, name) of each output of a network, in order.
pub type OutputActions = Vec<(u16, String)>;

/// The outputs' actions of a network trained on `labels` (the full label map, in its order).
pub fn output_actions(labels: &avaprep::annotations::LabelMap) -> OutputActions {
    labels
        .labels()
        .iter()
        .map(|label| (label.id.0, label.name.clone()))
        .collect()
}

/// Where training stands. Together with the config this is everything a resumed run needs: the
/// data order, augmentation and dropout are functions of (seed, epoch, step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Epochs completed.
    pub epoch: usize,
    /// Batches of epoch `epoch` already trained on: non-zero only after a cancel mid-epoch.
    pub batch: usize,
    /// Sum of the batch losses so far in that epoch, for its mean.
    pub epoch_loss_sum: f64,
    /// Optimizer updates done.
    pub step: u64,
    pub early_stopping: EarlyStopping,
    pub scaler: Option<LossScaler>,
    /// Why the run ended, once it has.
    pub stopped: Option<StopReason>,
    /// The tensor files of this checkpoint, as the data tool reads them.
    #[serde(flatten)]
    pub files: CheckpointFiles,
    /// The epoch `epoch` ended but its evaluation did not finish (it failed): a resumed run
    /// evaluates first.
    #[serde(default)]
    pub pending_evaluation: bool,
}

impl TrainState {
    pub fn new(early_stopping: EarlyStopping, scaler: Option<LossScaler>) -> Self {
        Self {
            epoch: 0,
            batch: 0,
            epoch_loss_sum: 0.0,
            step: 0,
            early_stopping,
            scaler,
            stopped: None,
            files: CheckpointFiles::default(),
            pending_evaluation: false,
        }
    }

    /// The committed state in `run_dir`, if any.
    pub fn load(run_dir: &Path) -> Result<Option<Self>, TrainError> {
        let path = run_dir.join(STATE_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let bytes = fs::read(&path).map_err(|e| TrainError::io(&path, e))?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| TrainError::Checkpoint(format!("{}: {e}", path.display())))
    }
}

/// Writes `tensors` to `run_dir/name` through a synced temporary file, with `metadata` in the
/// file's header.
pub fn write_tensors(
    run_dir: &Path,
    name: &str,
    tensors: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<(), TrainError> {
    let path = run_dir.join(name);
    let temporary = run_dir.join(format!(".tmp-{}-{name}", std::process::id()));
    let result = (|| {
        let views = tensors
            .iter()
            .map(|(name, tensor)| Ok((name.as_str(), TensorBytes::of(tensor)?)))
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| TrainError::Checkpoint(format!("{}: {e}", path.display())))?;
        safetensors::serialize_to_file(views, &metadata, &temporary)
            .map_err(|e| TrainError::Checkpoint(format!("{}: {e}", path.display())))?;
        File::open(&temporary)
            .and_then(|f| f.sync_all())
            .map_err(|e| TrainError::io(&temporary, e))?;
        fs::rename(&temporary, &path).map_err(|e| TrainError::io(&path, e))?;
        sync_parent(&path).map_err(|e| TrainError::io(&path, e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}

/// Writes the network's variables to `run_dir/name`, recording its config and, where known, its
/// outputs' actions in the header.
pub fn write_weights(
    run_dir: &Path,
    name: &str,
    vs: &nn::VarStore,
    model: &SlowFastConfig,
    actions: Option<&OutputActions>,
) -> Result<(), TrainError> {
    let config = serde_json::to_string(model).expect("a SlowFastConfig serializes");
    let mut metadata = HashMap::from([(MODEL_METADATA_KEY.to_string(), config)]);
    if let Some(actions) = actions {
        let actions = serde_json::to_string(actions).expect("actions serialize");
        metadata.insert(ACTIONS_METADATA_KEY.to_string(), actions);
    }
    write_tensors(run_dir, name, &model_tensors(vs), Some(metadata))
}

/// A CPU tensor's bytes as safetensors writes them.
struct TensorBytes {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl TensorBytes {
    fn of(tensor: &Tensor) -> Result<Self, String> {
        let tensor = tensor.contiguous();
        let dtype = Dtype::try_from(tensor.kind()).map_err(|e| e.to_string())?;
        let numel = tensor.numel();
        let mut bytes = vec![0u8; numel * tensor.kind().elt_size_in_bytes()];
        tensor
            .f_copy_data_u8(&mut bytes, numel)
            .map_err(|e| e.to_string())?;
        let shape = tensor.size().iter().map(|&d| d as usize).collect();
        Ok(Self {
            dtype,
            shape,
            bytes,
        })
    }
}

impl View for TensorBytes {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

/// The model's variables (weights and BatchNorm statistics) by name, on the CPU.
pub fn model_tensors(vs: &nn::VarStore) -> Vec<(String, Tensor)> {
    let mut named: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .map(|(name, t)| (name, t.detach().to_device(tch::Device::Cpu)))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named
}

pub fn read_tensors(path: &Path) -> Result<Vec<(String, Tensor)>, TrainError> {
    check_safetensors(path)
        .map_err(|problem| TrainError::Checkpoint(format!("{}: {problem}", path.display())))?;
    Tensor::read_safetensors(path)
        .map_err(|e| TrainError::Checkpoint(format!("{}: {e}", path.display())))
}

/// What libtorch's reader would report in its own terms (`HeaderTooLarge`,
/// `MetadataIncompleteBuffer`, an OS error), said of the file: missing, not a regular file, a
/// PyTorch checkpoint that needs converting, or a truncated safetensors file. Returns the
/// header's metadata (`__metadata__`: text by key).
pub fn check_safetensors(path: &Path) -> Result<HashMap<String, String>, String> {
    const CONVERT: &str = "convert it with `scripts/convert_checkpoint.py CHECKPOINT OUT.safetensors`, then name OUT.safetensors";
    // Far above any SlowFast's header (a few hundred tensors): a larger one is no header.
    const MOST_HEADER: u64 = 64 << 20;
    let meta = fs::metadata(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => {
            "no such file (a run's weights are its best-s*.safetensors and model-s*.safetensors)"
                .to_string()
        }
        _ => error.to_string(),
    })?;
    if !meta.is_file() {
        return Err("not a regular file, so not a weights file".into());
    }
    let size = meta.len();
    let mut file = File::open(path).map_err(|error| error.to_string())?;
    let mut start = [0u8; 8];
    if size < 8 || file.read_exact(&mut start).is_err() {
        return Err(format!(
            "{size} bytes, too short for a safetensors file (a download or copy cut short?)"
        ));
    }
    if start.starts_with(b"PK\x03\x04") || start[0] == 0x80 {
        return Err(format!(
            "a PyTorch checkpoint (torch.save's format, as PySlowFast's .pyth and pytorchvideo's .pyth/.pt), not safetensors: {CONVERT}"
        ));
    }
    let header_len = u64::from_le_bytes(start);
    if header_len > MOST_HEADER {
        return Err(format!(
            "not a safetensors file (it does not begin with a header size); if it is a checkpoint of PyTorch, {CONVERT}"
        ));
    }
    if 8 + header_len > size {
        return Err(format!(
            "truncated: its header needs {} bytes, the file has {size}",
            8 + header_len
        ));
    }
    let mut header = vec![0u8; header_len as usize];
    file.read_exact(&mut header)
        .map_err(|error| error.to_string())?;
    let entries: std::collections::BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&header)
            .map_err(|_| "not a safetensors file (its header is not JSON)".to_string())?;
    let data_end = entries
        .values()
        .filter_map(|entry| entry.get("data_offsets")?.get(1)?.as_u64())
        .max()
        .unwrap_or(0);
    if 8 + header_len + data_end > size {
        return Err(format!(
            "truncated: its tensors end at byte {}, the file has {size} (a download or copy cut short?)",
            8 + header_len + data_end
        ));
    }
    let metadata = entries
        .get("__metadata__")
        .map(|metadata| serde_json::from_value(metadata.clone()))
        .transpose()
        .map_err(|_| "not a safetensors file (its __metadata__ is not text by key)".to_string())?;
    Ok(metadata.unwrap_or_default())
}

/// The network the weights file at `path` records in its header, read before any data (a file
/// that is no safetensors is named here).
pub fn network_of(path: &Path) -> Result<Option<SlowFastConfig>, TrainError> {
    recorded(path, MODEL_METADATA_KEY, "the network")
}

/// The outputs' actions the weights file at `path` records in its header.
pub fn actions_of(path: &Path) -> Result<Option<OutputActions>, TrainError> {
    recorded(path, ACTIONS_METADATA_KEY, "the actions")
}

/// What the weights file at `path` records under `key` in its header metadata (what
/// [`write_weights`] writes); `None` for weights that record none (converted ones, or written
/// before it was recorded).
fn recorded<T: serde::de::DeserializeOwned>(
    path: &Path,
    key: &str,
    what: &str,
) -> Result<Option<T>, TrainError> {
    let metadata = check_safetensors(path)
        .map_err(|problem| TrainError::Checkpoint(format!("{}: {problem}", path.display())))?;
    metadata
        .get(key)
        .map(|text| {
            serde_json::from_str(text).map_err(|e| {
                TrainError::Checkpoint(format!(
                    "{}: {what} its header records ({key}): {e}",
                    path.display()
                ))
            })
        })
        .transpose()
}

/// Copies saved values into the model; every variable must be present with its shape.
pub fn load_model(vs: &nn::VarStore, path: &Path) -> Result<(), TrainError> {
    let saved: std::collections::HashMap<String, Tensor> =
        read_tensors(path)?.into_iter().collect();
    tch::no_grad(|| {
        for (name, mut var) in vs.variables() {
            let source = saved.get(&name).ok_or_else(|| {
                TrainError::Checkpoint(format!("{}: no tensor {name}", path.display()))
            })?;
            var.f_copy_(source)
                .map_err(|e| TrainError::Checkpoint(format!("{}: {name}: {e}", path.display())))?;
        }
        Ok(())
    })
}

/// Copies every tensor whose name and shape match a model variable; a head for another class
/// count is skipped and reported. A file of which nothing fits (another depth or a classifier
/// without the AVA naming) is an error rather than a silent fresh start.
pub fn load_initial(vs: &nn::VarStore, path: &Path) -> Result<InitReport, TrainError> {
    let mut saved: std::collections::BTreeMap<String, Tensor> =
        read_tensors(path)?.into_iter().collect();
    let mut variables = vs.variables().into_iter().collect::<Vec<_>>();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    let (mut loaded, mut skipped) = (0, Vec::new());
    tch::no_grad(|| {
        for (name, mut var) in variables {
            let reason = match saved.remove(&name) {
                None => "not in the file".to_string(),
                Some(source) if source.size() != var.size() => format!(
                    "shape {:?} in the file, {:?} in the model",
                    source.size(),
                    var.size()
                ),
                Some(source) => {
                    var.f_copy_(&source).map_err(|e| {
                        TrainError::Checkpoint(format!("{}: {name}: {e}", path.display()))
                    })?;
                    loaded += 1;
                    continue;
                }
            };
            skipped.push(SkippedTensor { name, reason });
        }
        Ok::<(), TrainError>(())
    })?;
    if loaded == 0 {
        return Err(TrainError::Checkpoint(format!(
            "{}: none of its tensors fits this model (weights for another depth, or not converted with scripts/convert_checkpoint.py?)",
            path.display()
        )));
    }
    Ok(InitReport {
        file: path.to_path_buf(),
        loaded,
        skipped,
        unused: saved.into_keys().collect(),
    })
}

/// Saves the model and optimizer for `state` (whose `step` names the files), commits the
/// state, and removes the files the previous checkpoint named.
pub fn save(
    run_dir: &Path,
    state: &mut TrainState,
    vs: &nn::VarStore,
    model: &SlowFastConfig,
    actions: &OutputActions,
    optimizer: &Sgd,
) -> Result<(), TrainError> {
    let model_file = format!("model-s{}.safetensors", state.step);
    let optimizer_file = format!("optimizer-s{}.safetensors", state.step);
    write_weights(run_dir, &model_file, vs, model, Some(actions))?;
    let momentum: Vec<(String, Tensor)> = optimizer
        .state()
        .into_iter()
        .map(|(n, t)| (n, t.to_device(tch::Device::Cpu)))
        .collect();
    write_tensors(run_dir, &optimizer_file, &momentum, None)?;
    state.files.model_file = Some(model_file);
    state.files.optimizer_file = Some(optimizer_file);
    commit(run_dir, state)
}

/// Writes `checkpoint.json` atomically, then deletes tensor files it does not name.
pub fn commit(run_dir: &Path, state: &TrainState) -> Result<(), TrainError> {
    let path = run_dir.join(STATE_FILE);
    let json = serde_json::to_vec_pretty(state).expect("the state serialises");
    write_atomic(&path, &json).map_err(|e| TrainError::io(&path, e))?;
    remove_stale(run_dir, state);
    Ok(())
}

fn remove_stale(run_dir: &Path, state: &TrainState) {
    let keep: Vec<&str> = [
        &state.files.model_file,
        &state.files.optimizer_file,
        &state.files.best_file,
    ]
    .into_iter()
    .filter_map(|f| f.as_deref())
    .collect();
    let Ok(entries) = fs::read_dir(run_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = ["model-s", "optimizer-s", "best-s"]
            .iter()
            .any(|p| name.starts_with(p));
        if ours && name.ends_with(".safetensors") && !keep.contains(&name.as_str()) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Path of a file the state names.
pub fn named(run_dir: &Path, file: &Option<String>) -> Option<PathBuf> {
    file.as_ref().map(|f| run_dir.join(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::optim::Sgd;
    use tch::{Device, Kind};

    fn store(value: f64) -> nn::VarStore {
        let vs = nn::VarStore::new(Device::Cpu);
        let _ = vs.root().var("w", &[3], nn::Init::Const(value));
        vs
    }

    #[test]
    fn a_crash_before_the_commit_leaves_the_previous_checkpoint_whole() {
        let dir = tempfile::tempdir().unwrap();
        let vs = store(1.0);
        let mut sgd = Sgd::new(&vs, 0.9, 0.0);
        let w = vs.variables()["w"].shallow_clone();
        (&w * 2.0).sum(Kind::Float).backward();
        sgd.apply_gradients(None, None, 0.1);
        let mut state = TrainState::new(EarlyStopping::new(3, 0.0), None);
        state.step = 1;
        save(
            dir.path(),
            &mut state,
            &vs,
            &SlowFastConfig::tiny(2),
            &Vec::new(),
            &sgd,
        )
        .unwrap();

        // A later save that died after writing its tensors but before committing, plus a
        // temporary file from a write interrupted half-way.
        write_tensors(
            dir.path(),
            "model-s2.safetensors",
            &model_tensors(&store(9.0)),
            None,
        )
        .unwrap();
        std::fs::write(dir.path().join(".tmp-1-model-s3.safetensors"), b"half").unwrap();

        let loaded = TrainState::load(dir.path()).unwrap().unwrap();
        assert_eq!(loaded, state);
        let restored = store(0.0);
        load_model(
            &restored,
            &named(dir.path(), &loaded.files.model_file).unwrap(),
        )
        .unwrap();
        assert!(restored.variables()["w"].equal(&vs.variables()["w"]));
        let mut fresh = Sgd::new(&restored, 0.9, 0.0);
        fresh
            .load_state(
                read_tensors(&named(dir.path(), &loaded.files.optimizer_file).unwrap()).unwrap(),
            )
            .unwrap();
        assert_eq!(fresh.state().len(), 1);

        // The next commit removes the uncommitted tensors.
        state.step = 4;
        save(
            dir.path(),
            &mut state,
            &vs,
            &SlowFastConfig::tiny(2),
            &Vec::new(),
            &sgd,
        )
        .unwrap();
        assert!(!dir.path().join("model-s2.safetensors").exists());
        assert!(!dir.path().join("model-s1.safetensors").exists());
        assert!(dir.path().join("model-s4.safetensors").exists());
    }

    /// Each way a weights file goes wrong is said of the file, in words, with the fix, never as
    /// the reader's own error names.
    #[test]
    fn a_wrong_weights_file_is_named_with_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.safetensors");
        write_tensors(
            dir.path(),
            "good.safetensors",
            &model_tensors(&store(1.0)),
            None,
        )
        .unwrap();
        assert!(read_tensors(&good).is_ok());
        let bytes = fs::read(&good).unwrap();
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "model.pyth",
                b"PK\x03\x04rest of a zip".to_vec(),
                "scripts/convert_checkpoint.py",
            ),
            (
                "legacy.pyth",
                b"\x80\x02}q\x00(X\x05".to_vec(),
                "scripts/convert_checkpoint.py",
            ),
            ("short.safetensors", bytes[..5].to_vec(), "too short"),
            (
                "cut.safetensors",
                bytes[..bytes.len() - 4].to_vec(),
                "truncated: its tensors end",
            ),
            (
                "cut-header.safetensors",
                bytes[..20].to_vec(),
                "truncated: its header needs",
            ),
            (
                "text.safetensors",
                b"hello, this is not weights".to_vec(),
                "not a safetensors file",
            ),
        ];
        for (name, content, expected) in cases {
            let path = dir.path().join(name);
            fs::write(&path, content).unwrap();
            let error = read_tensors(&path).unwrap_err().to_string();
            assert!(
                error.contains(name) && error.contains(expected),
                "{name}: {error}"
            );
            for raw in [
                "HeaderTooLarge",
                "MetadataIncompleteBuffer",
                "IoError",
                "Os {",
            ] {
                assert!(!error.contains(raw), "{name}: {error}");
            }
        }
        let error = read_tensors(&dir.path().join("missing.safetensors"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("missing.safetensors: no such file"),
            "{error}"
        );
        let error = read_tensors(dir.path()).unwrap_err().to_string();
        assert!(error.contains("not a regular file"), "{error}");
    }
}
