//! The AVA detection head: per-box features from both pathways, then an action classifier.

use tch::nn;
use tch::{Kind, Tensor};

use super::roi_align::{RoiAlignSpec, roi_align};
use avaprep::trainer_settings::network::SlowFastConfig;

/// PySlowFast's `ResNetRoIHead`: per pathway, average over time, RoIAlign each box, max-pool the
/// bins; concatenate both pathways, dropout, and a linear layer to one logit per class.
#[derive(Debug)]
pub struct RoiHead {
    roi: RoiAlignSpec,
    dropout: f64,
    projection: nn::Linear,
}

impl RoiHead {
    /// `p` is the head's path (`head`); the classifier is `head.projection`.
    pub fn new(p: nn::Path, cfg: &SlowFastConfig) -> Self {
        let linear = nn::LinearConfig {
            ws_init: nn::Init::Randn {
                mean: 0.0,
                stdev: 0.01,
            },
            bs_init: Some(nn::Init::Const(0.0)),
            bias: true,
        };
        let projection = nn::linear(
            &p / "projection",
            cfg.head_in_channels(),
            cfg.num_classes,
            linear,
        );
        let roi = RoiAlignSpec {
            output_size: (cfg.roi_output_size, cfg.roi_output_size),
            spatial_scale: cfg.roi_spatial_scale,
            sampling_ratio: cfg.roi_sampling_ratio,
            aligned: cfg.roi_aligned,
        };
        Self {
            roi,
            dropout: cfg.dropout,
            projection,
        }
    }

    /// `slow`/`fast`: res5 features `[B, C, T, h, w]`; `boxes`: `[K, 5]` in input pixels.
    /// Returns `[K, num_classes]` logits (the loss applies the sigmoid).
    pub fn forward_t(&self, slow: &Tensor, fast: &Tensor, boxes: &Tensor, train: bool) -> Tensor {
        let features = Tensor::cat(
            &[
                self.box_features(slow, boxes),
                self.box_features(fast, boxes),
            ],
            1,
        );
        features
            .dropout(self.dropout, train)
            .apply(&self.projection)
    }

    /// `[K, C]`: one pathway's feature per box. Averaging over all frames equals PySlowFast's
    /// AvgPool3d with kernel T, and a max over the 7x7 bins its MaxPool2d(7).
    fn box_features(&self, xs: &Tensor, boxes: &Tensor) -> Tensor {
        let frame = xs.mean_dim(2, false, xs.kind());
        roi_align(&frame, boxes, self.roi).amax([2, 3], false)
    }
}

/// Per-class probabilities from the head's logits (AVA classes are not exclusive: sigmoid, not
/// softmax).
pub fn probabilities(logits: &Tensor) -> Tensor {
    logits.to_kind(Kind::Float).sigmoid()
}
