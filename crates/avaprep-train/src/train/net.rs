//! The network a run trains: the SlowFast model in its variable store.

use tch::{Device, Kind, Tensor, nn};

use super::loader::{Batch, Pixels, normalise};
use super::model::{SlowFast, SlowFastConfig, upload};
use avaprep::trainer_settings::TrainConfig;

/// The network and the variables it lives in.
pub struct Net {
    pub vs: nn::VarStore,
    pub model: SlowFast,
    /// The network's shape, recorded in every weights file it writes.
    pub config: SlowFastConfig,
}

impl Net {
    pub fn new(config: &TrainConfig, num_classes: usize, device: Device) -> Self {
        let mut cfg = config.model.build(num_classes as i64, config.clip_frames);
        if let Some(dropout) = config.dropout {
            cfg.dropout = dropout;
        }
        Self::of_network(cfg, device)
    }

    /// The network a weights file recorded, as it was built.
    pub fn of_network(cfg: SlowFastConfig, device: Device) -> Self {
        let vs = nn::VarStore::new(device);
        let model = SlowFast::new(&vs.root(), &cfg);
        Self {
            vs,
            model,
            config: cfg,
        }
    }

    /// Logits `[K, C]` for a batch; `autocast` runs the forward pass in reduced precision.
    pub fn forward(&self, batch: &Batch, train: bool, autocast: bool) -> Tensor {
        let (slow, fast, boxes) = self.inputs(batch, self.vs.device());
        super::amp::cuda_autocast(autocast, || {
            self.model.forward_t(&slow, &fast, &boxes, train)
        })
        .to_kind(Kind::Float)
    }

    /// What the network takes of a batch: the Slow and Fast pathways' clips on `device` and the
    /// boxes `[K, 5]` on the host, where RoIAlign works out its geometry without waiting for the
    /// device.
    pub fn inputs(&self, batch: &Batch, device: Device) -> (Tensor, Tensor, Tensor) {
        let clips = clips_on(batch, device);
        let (slow, fast) = super::model::pack_pathways(&clips, self.config.alpha);
        let flat: Vec<f32> = batch.boxes.iter().flatten().copied().collect();
        let boxes = Tensor::from_slice(&flat).view([-1, 5]);
        (slow, fast, boxes)
    }
}

/// A batch's clips `[B, 3, T, H, W]` as the network takes them, on `device`.
pub fn clips_on(batch: &Batch, device: Device) -> Tensor {
    match &batch.clips {
        Pixels::Normalised(values) => upload(&Tensor::from_slice(values).view(batch.shape), device),
        Pixels::Bytes(bytes) => {
            let bytes = upload(&Tensor::from_slice(bytes).view(batch.shape), device);
            normalise(&bytes, &batch.sizes)
        }
    }
}

/// A batch's training targets `[K, C]`, on the CPU.
pub fn targets(batch: &Batch) -> Tensor {
    Tensor::from_slice(&batch.targets).view([batch.owners.len() as i64, -1])
}
