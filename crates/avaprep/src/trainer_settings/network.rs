//! Hyper-parameters of SlowFast with the AVA RoI head, and the presets used by the trainer and tests.

use serde::{Deserialize, Serialize};

/// Everything that fixes the shape of a SlowFast detector.
///
/// Field names follow the paper (alpha, beta) and PySlowFast's config keys where the paper has no name.
/// Arrays indexed by stage run res2..res5; pairs indexed by pathway are `[slow, fast]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowFastConfig {
    /// Bottleneck blocks per stage, res2..res5 (R50: 3, 4, 6, 3).
    pub stage_depths: [usize; 4],
    /// Inner width of res2's Slow bottleneck; every other Slow width is a power-of-two multiple of it.
    pub width_per_group: i64,
    /// Frame-rate ratio: the Slow pathway sees every alpha-th Fast frame.
    pub alpha: i64,
    /// Channel ratio 1/beta: the Fast pathway has 1/beta_inv of the Slow pathway's channels.
    pub beta_inv: i64,
    /// Temporal kernel of the Fast-to-Slow fusion conv.
    pub fusion_kernel: i64,
    /// Fusion conv output channels = Fast channels * this ratio.
    pub fusion_conv_channel_ratio: i64,
    /// Frames in the Fast clip (the Slow clip has num_frames / alpha).
    pub num_frames: i64,
    /// Temporal kernel of the stem conv, `[slow, fast]` (paper: 1 and 5).
    pub stem_temporal_kernel: [i64; 2],
    /// Temporal kernel of each stage's first bottleneck conv, `[slow, fast]` per stage res2..res5.
    pub stage_temporal_kernels: [[i64; 2]; 4],
    /// Spatial stride of each stage res2..res5 (AVA keeps res5 at stride 1).
    pub spatial_strides: [i64; 4],
    /// Spatial dilation of each stage's 3x3 conv res2..res5 (AVA dilates res5 by 2).
    pub spatial_dilations: [i64; 4],
    /// Action classes predicted per box (AVA: 80; the evaluation keeps 60).
    pub num_classes: i64,
    /// Dropout before the classifier, only in train mode.
    pub dropout: f64,
    /// Side of the RoIAlign output grid.
    pub roi_output_size: i64,
    /// Feature-map pixels per input pixel at res5 (1/16 with the AVA strides).
    pub roi_spatial_scale: f64,
    /// Samples per RoI bin and axis; 0 picks ceil(roi size / output size) per box, as PySlowFast does.
    pub roi_sampling_ratio: i64,
    /// Shift boxes by half a pixel before sampling (Detectron2's `aligned`).
    pub roi_aligned: bool,
}

impl SlowFastConfig {
    /// SlowFast R50 8x8 with the AVA head: PySlowFast's `SLOWFAST_32x2_R50_SHORT`, 33.83 M parameters
    /// with 80 classes.
    pub fn r50_8x8_ava() -> Self {
        Self {
            stage_depths: [3, 4, 6, 3],
            width_per_group: 64,
            alpha: 4,
            beta_inv: 8,
            fusion_kernel: 7,
            fusion_conv_channel_ratio: 2,
            num_frames: 32,
            stem_temporal_kernel: [1, 5],
            // The paper's table: Slow uses temporal kernels only from res4 on ("non-degenerate"
            // convolutions would hurt early layers), Fast everywhere.
            stage_temporal_kernels: [[1, 3], [1, 3], [3, 3], [3, 3]],
            spatial_strides: [1, 2, 2, 1],
            spatial_dilations: [1, 1, 1, 2],
            num_classes: 80,
            dropout: 0.5,
            roi_output_size: 7,
            roi_spatial_scale: 1.0 / 16.0,
            roi_sampling_ratio: 0,
            roi_aligned: true,
        }
    }

    /// pytorchvideo's `model_depth=18` SlowFast: the R50 8x8 widths with one bottleneck per stage
    /// (11.16 M parameters with 80 classes). Not a basic-block ResNet-18, but the cheap variant
    /// that has a reference implementation; res5 features stay 2048 + 256 channels.
    pub fn r18_ava() -> Self {
        Self {
            stage_depths: [1, 1, 1, 1],
            ..Self::r50_8x8_ava()
        }
    }

    /// A model small enough for CPU tests: one block per stage, narrow widths, a Fast pathway
    /// half as wide as Slow (motion is all it has to see), 16 Fast frames, and res4 unstrided so
    /// the RoI features come from a 1/8 map (7 x 7 would be too coarse at 112 pixels).
    pub fn tiny(num_classes: i64) -> Self {
        Self {
            stage_depths: [1, 1, 1, 1],
            width_per_group: 8,
            beta_inv: 2,
            num_frames: 16,
            spatial_strides: [1, 2, 1, 1],
            roi_spatial_scale: 1.0 / 8.0,
            num_classes,
            ..Self::r50_8x8_ava()
        }
    }

    /// Frames in the Slow clip.
    #[cfg(test)]
    pub fn slow_frames(&self) -> i64 {
        self.num_frames / self.alpha
    }

    /// Output channels of the stem, `[slow, fast]`, before fusion.
    pub fn stem_channels(&self) -> [i64; 2] {
        [self.width_per_group, self.width_per_group / self.beta_inv]
    }

    /// Output channels of stage `s` (0 = res2), `[slow, fast]`: 4x the inner width, doubling per stage.
    pub fn stage_out_channels(&self, s: usize) -> [i64; 2] {
        let slow = (self.width_per_group * 4) << s;
        [slow, slow / self.beta_inv]
    }

    /// Inner (bottleneck) width of stage `s`, `[slow, fast]`.
    pub fn stage_inner_channels(&self, s: usize) -> [i64; 2] {
        let slow = self.width_per_group << s;
        [slow, slow / self.beta_inv]
    }

    /// Channels the fusion after a layer with `fast_channels` Fast channels concatenates onto Slow.
    pub fn fused_channels(&self, fast_channels: i64) -> i64 {
        fast_channels * self.fusion_conv_channel_ratio
    }

    /// Input channels of stage `s`, `[slow, fast]`, after the preceding fusion.
    pub fn stage_in_channels(&self, s: usize) -> [i64; 2] {
        let [slow, fast] = if s == 0 {
            self.stem_channels()
        } else {
            self.stage_out_channels(s - 1)
        };
        [slow + self.fused_channels(fast), fast]
    }

    /// Channels entering the classifier: res5 Slow + res5 Fast.
    pub fn head_in_channels(&self) -> i64 {
        let [slow, fast] = self.stage_out_channels(3);
        slow + fast
    }
}

impl Default for SlowFastConfig {
    fn default() -> Self {
        Self::r50_8x8_ava()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r50_channels_match_the_paper_table() {
        let cfg = SlowFastConfig::r50_8x8_ava();
        assert_eq!(cfg.stage_in_channels(0), [80, 8]);
        assert_eq!(cfg.stage_in_channels(1), [320, 32]);
        assert_eq!(cfg.stage_in_channels(2), [640, 64]);
        assert_eq!(cfg.stage_in_channels(3), [1280, 128]);
        assert_eq!(cfg.stage_out_channels(3), [2048, 256]);
        assert_eq!(cfg.stage_inner_channels(3), [512, 64]);
        assert_eq!(cfg.head_in_channels(), 2304);
        assert_eq!(cfg.slow_frames(), 8);
    }

    #[test]
    fn config_round_trips_through_json_and_rejects_unknown_keys() {
        let cfg = SlowFastConfig::tiny(3);
        let json = serde_json::to_string(&cfg).unwrap();
        assert_eq!(serde_json::from_str::<SlowFastConfig>(&json).unwrap(), cfg);
        let bad = json.replacen('{', "{\"depth\":50,", 1);
        assert!(serde_json::from_str::<SlowFastConfig>(&bad).is_err());
    }
}
