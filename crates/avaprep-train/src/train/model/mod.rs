//! SlowFast (Feichtenhofer et al., "SlowFast Networks for Video Recognition", ICCV 2019,
//! <https://arxiv.org/abs/1812.03982>) with the AVA RoI head, in tch.
//!
//! # Variable names
//!
//! VarStore paths are PySlowFast's state-dict keys, so a PySlowFast checkpoint (its
//! `model_state`, minus `num_batches_tracked`) loads as is and a pytorchvideo one after the
//! renaming done by `scripts/convert_checkpoint.py`. `P` is the pathway (0 = Slow, 1 = Fast),
//! `S` the stage (2..5 = res2..res5), `J` the block in the stage; BatchNorms hold `weight`,
//! `bias`, `running_mean` and `running_var`, convs only `weight`.
//!
//! | ours (= PySlowFast) | pytorchvideo `create_slowfast_with_roi_head` |
//! |---|---|
//! | `s1.pathwayP_stem.conv` | `blocks.0.multipathway_blocks.P.conv` |
//! | `s1.pathwayP_stem.bn` | `blocks.0.multipathway_blocks.P.norm` |
//! | `sN_fuse.conv_f2s` (N = 1..4) | `blocks.{N-1}.multipathway_fusion.conv_fast_to_slow` |
//! | `sN_fuse.bn` | `blocks.{N-1}.multipathway_fusion.norm` |
//! | `sS.pathwayP_resJ.branch1` (shortcut) | `blocks.{S-1}.multipathway_blocks.P.res_blocks.J.branch1_conv` |
//! | `sS.pathwayP_resJ.branch1_bn` | `blocks.{S-1}.multipathway_blocks.P.res_blocks.J.branch1_norm` |
//! | `sS.pathwayP_resJ.branch2.{a,b,c}` | `blocks.{S-1}.multipathway_blocks.P.res_blocks.J.branch2.conv_{a,b,c}` |
//! | `sS.pathwayP_resJ.branch2.{a,b,c}_bn` | `blocks.{S-1}.multipathway_blocks.P.res_blocks.J.branch2.norm_{a,b,c}` |
//! | `head.projection` | `detection_head.proj` |
//!
//! pytorchvideo's keys carry a `model.` prefix inside its detection wrapper.

mod blocks;
mod head;
mod roi_align;
#[cfg(test)]
mod tests;

pub use avaprep::trainer_settings::network::SlowFastConfig;
pub use blocks::{FuseFastToSlow, Pathway, ResStage, Stem};
pub use head::{RoiHead, probabilities};
#[cfg(test)]
pub use roi_align::{RoiAlignSpec, roi_align};

use tch::{Device, Kind, Tensor, nn};

/// The whole detector: two pathways with lateral fusions, and the RoI head.
#[derive(Debug)]
pub struct SlowFast {
    slow_stem: Stem,
    fast_stem: Stem,
    /// After the stem, res2, res3 and res4 (never after res5).
    fuse: Vec<FuseFastToSlow>,
    slow_res: Vec<ResStage>,
    fast_res: Vec<ResStage>,
    head: RoiHead,
}

impl SlowFast {
    /// Builds the network under `p` (normally the VarStore root) with PySlowFast's init.
    pub fn new(p: &nn::Path, cfg: &SlowFastConfig) -> Self {
        let s1 = p / "s1";
        let [slow_c, fast_c] = cfg.stem_channels();
        let [slow_tk, fast_tk] = cfg.stem_temporal_kernel;
        let slow_stem = Stem::new(&s1 / "pathway0_stem", 3, slow_c, slow_tk);
        let fast_stem = Stem::new(&s1 / "pathway1_stem", 3, fast_c, fast_tk);
        let fuse = (0..4)
            .map(|i| {
                let fast_channels = if i == 0 {
                    fast_c
                } else {
                    cfg.stage_out_channels(i - 1)[1]
                };
                FuseFastToSlow::new(p / format!("s{}_fuse", i + 1), fast_channels, cfg)
            })
            .collect();
        let stage = |pathway| {
            (0..4)
                .map(|s| ResStage::new(&(p / format!("s{}", s + 2)), pathway, s, cfg))
                .collect()
        };
        Self {
            slow_stem,
            fast_stem,
            fuse,
            slow_res: stage(Pathway::Slow),
            fast_res: stage(Pathway::Fast),
            head: RoiHead::new(p / "head", cfg),
        }
    }

    /// `slow`: `[B, 3, T/alpha, H, W]`, `fast`: `[B, 3, T, H, W]` (normalised pixels), `boxes`:
    /// `[K, 5]` rows of (batch index, x1, y1, x2, y2) in input pixels. Returns `[K, num_classes]`
    /// logits.
    pub fn forward_t(&self, slow: &Tensor, fast: &Tensor, boxes: &Tensor, train: bool) -> Tensor {
        let (slow, fast) = self.backbone(slow, fast, train);
        self.head.forward_t(&slow, &fast, boxes, train)
    }

    /// Per-class probabilities for inference: eval mode, no autograd, sigmoid of the logits.
    #[cfg(test)]
    pub fn predict(&self, slow: &Tensor, fast: &Tensor, boxes: &Tensor) -> Tensor {
        tch::no_grad(|| probabilities(&self.forward_t(slow, fast, boxes, false)))
    }

    /// The res5 features of both pathways, `[B, 2048, T/alpha, H/16, W/16]` and
    /// `[B, 256, T, H/16, W/16]` for R50.
    pub fn backbone(&self, slow: &Tensor, fast: &Tensor, train: bool) -> (Tensor, Tensor) {
        let mut slow = self.slow_stem.forward_t(slow, train);
        let mut fast = self.fast_stem.forward_t(fast, train);
        slow = self.fuse[0].forward_t(&slow, &fast, train);
        for s in 0..4 {
            slow = self.slow_res[s].forward_t(&slow, train);
            fast = self.fast_res[s].forward_t(&fast, train);
            if let Some(fuse) = self.fuse.get(s + 1) {
                slow = fuse.forward_t(&slow, &fast, train);
            }
        }
        (slow, fast)
    }
}

/// Which Fast frames the Slow pathway sees: `linspace(0, T-1, T/alpha)` truncated toward zero,
/// PySlowFast's rule (T = 32, alpha = 4 gives 0, 4, 8, 13, 17, 22, 26, 31: not an exact stride).
pub fn slow_frame_indices(num_frames: i64, alpha: i64) -> Vec<i64> {
    // libtorch's own linspace, so the rounding of the float steps matches PySlowFast bit for bit.
    let steps = num_frames / alpha;
    let index = Tensor::linspace(
        0.0,
        (num_frames - 1) as f64,
        steps,
        (Kind::Float, Device::Cpu),
    )
    .to_kind(Kind::Int64);
    Vec::<i64>::try_from(&index).expect("int64 indices")
}

/// A copy of host tensor `t` on `device`, queued behind the work already queued there where the
/// driver can (from pageable memory it may still wait, for a large copy): a blocking copy to a
/// GPU always first waits for all of it, leaving the GPU idle until the host catches up. The
/// host data may go at once, as the driver has staged it by then. No copy on the CPU.
pub fn upload(t: &Tensor, device: Device) -> Tensor {
    t.to_device_(device, t.kind(), true, false)
}

/// Splits a Fast clip (`[C, T, H, W]` or `[B, C, T, H, W]`) into the `(slow, fast)` pair.
pub fn pack_pathways(fast_clip: &Tensor, alpha: i64) -> (Tensor, Tensor) {
    let time_dim = fast_clip.dim() as i64 - 3;
    let indices = slow_frame_indices(fast_clip.size()[time_dim as usize], alpha);
    let indices = upload(&Tensor::from_slice(&indices), fast_clip.device());
    (
        fast_clip.index_select(time_dim, &indices),
        fast_clip.shallow_clone(),
    )
}
