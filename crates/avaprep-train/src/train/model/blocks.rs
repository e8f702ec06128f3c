//! Backbone blocks: stem, Fast-to-Slow fusion, bottleneck and residual stage.
//!
//! Variable names inside each block are PySlowFast's attribute names (see the module docs in
//! `mod.rs`), so a PySlowFast state dict loads without renaming.

use tch::Tensor;
use tch::nn;

use avaprep::trainer_settings::network::SlowFastConfig;

/// BatchNorm momentum and epsilon of PySlowFast and pytorchvideo.
const BN_EPS: f64 = 1e-5;
const BN_MOMENTUM: f64 = 0.1;

/// PySlowFast initialises convs with `c2_msra_fill`: Kaiming normal over fan-out.
const CONV_INIT: nn::Init = nn::Init::Kaiming {
    dist: nn::init::NormalOrUniform::Normal,
    fan: nn::init::FanInOut::FanOut,
    non_linearity: nn::init::NonLinearity::ReLU,
};

/// Shape of a bias-free 3D convolution; padding keeps every axis "same" before striding.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConvSpec {
    pub kernel: [i64; 3],
    pub stride: [i64; 3],
    pub dilation: [i64; 3],
}

impl ConvSpec {
    /// A kernel with unit stride and dilation.
    pub fn kernel(kernel: [i64; 3]) -> Self {
        Self {
            kernel,
            stride: [1, 1, 1],
            dilation: [1, 1, 1],
        }
    }

    pub fn stride(self, stride: [i64; 3]) -> Self {
        Self { stride, ..self }
    }

    pub fn dilation(self, dilation: [i64; 3]) -> Self {
        Self { dilation, ..self }
    }

    fn padding(&self) -> [i64; 3] {
        std::array::from_fn(|i| self.dilation[i] * (self.kernel[i] / 2))
    }
}

/// A bias-free conv followed by BatchNorm, the unit every block is made of. The two layers live
/// under separate paths because PySlowFast names them as siblings (`a`, `a_bn`).
#[derive(Debug)]
pub(crate) struct ConvBn {
    conv: nn::Conv<[i64; 3]>,
    bn: nn::BatchNorm,
}

impl ConvBn {
    /// `zero_gamma` starts the BN scale at 0 so a residual branch begins as the identity
    /// (PySlowFast's `ZERO_INIT_FINAL_BN`).
    pub fn new(
        conv_path: nn::Path,
        bn_path: nn::Path,
        c_in: i64,
        c_out: i64,
        spec: ConvSpec,
        zero_gamma: bool,
    ) -> Self {
        let config = nn::ConvConfigND {
            stride: spec.stride,
            padding: spec.padding(),
            dilation: spec.dilation,
            groups: 1,
            bias: false,
            ws_init: CONV_INIT,
            bs_init: nn::Init::Const(0.0),
            padding_mode: nn::PaddingMode::Zeros,
        };
        let conv = nn::conv(conv_path, c_in, c_out, spec.kernel, config);
        // tch's default BN scale init is uniform(0, 1); PySlowFast uses 1.
        let bn_config = nn::BatchNormConfig {
            eps: BN_EPS,
            momentum: BN_MOMENTUM,
            ws_init: nn::Init::Const(if zero_gamma { 0.0 } else { 1.0 }),
            bs_init: nn::Init::Const(0.0),
            ..Default::default()
        };
        let bn = nn::batch_norm3d(bn_path, c_out, bn_config);
        Self { conv, bn }
    }

    pub fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        xs.apply(&self.conv).apply_t(&self.bn, train)
    }
}

/// conv1 + pool1 of one pathway: a [Tk,7,7] conv with spatial stride 2, then a 3x3 max pool with
/// stride 2, so the stem divides the resolution by 4 and keeps every frame.
#[derive(Debug)]
pub struct Stem {
    conv: ConvBn,
}

impl Stem {
    /// `p` is the pathway's stem path (`s1/pathway0_stem`).
    pub fn new(p: nn::Path, c_in: i64, c_out: i64, temporal_kernel: i64) -> Self {
        let spec = ConvSpec::kernel([temporal_kernel, 7, 7]).stride([1, 2, 2]);
        Self {
            conv: ConvBn::new(&p / "conv", &p / "bn", c_in, c_out, spec, false),
        }
    }

    pub fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.conv.forward_t(xs, train).relu().max_pool3d(
            [1, 3, 3],
            [1, 2, 2],
            [0, 1, 1],
            [1, 1, 1],
            false,
        )
    }
}

/// The lateral connection: a time-strided conv maps Fast features to the Slow frame rate, and the
/// result is concatenated onto the Slow channels.
#[derive(Debug)]
pub struct FuseFastToSlow {
    conv: ConvBn,
}

impl FuseFastToSlow {
    /// `p` is the fusion's path (`s1_fuse`); `fast_channels` the Fast width at that point.
    pub fn new(p: nn::Path, fast_channels: i64, cfg: &SlowFastConfig) -> Self {
        let spec = ConvSpec::kernel([cfg.fusion_kernel, 1, 1]).stride([cfg.alpha, 1, 1]);
        let c_out = cfg.fused_channels(fast_channels);
        Self {
            conv: ConvBn::new(
                &p / "conv_f2s",
                &p / "bn",
                fast_channels,
                c_out,
                spec,
                false,
            ),
        }
    }

    /// Returns the fused Slow tensor; the Fast pathway continues unchanged.
    pub fn forward_t(&self, slow: &Tensor, fast: &Tensor, train: bool) -> Tensor {
        let lateral = self.conv.forward_t(fast, train).relu();
        Tensor::cat(&[slow, &lateral], 1)
    }
}

/// Widths and strides of one bottleneck block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BottleneckSpec {
    pub c_in: i64,
    pub c_inner: i64,
    pub c_out: i64,
    pub temporal_kernel: i64,
    pub spatial_stride: i64,
    pub spatial_dilation: i64,
}

/// ResNet bottleneck with a temporal kernel on its first conv: a = [Tk,1,1], b = [1,3,3] (carries
/// the stride and dilation), c = 1x1x1, and ReLU(shortcut + c). The shortcut is a strided 1x1x1
/// projection whenever the shape changes, identity otherwise.
#[derive(Debug)]
pub struct Bottleneck {
    shortcut: Option<ConvBn>,
    a: ConvBn,
    b: ConvBn,
    c: ConvBn,
}

impl Bottleneck {
    /// `p` is the block's path (`s2/pathway0_res0`).
    pub(crate) fn new(p: nn::Path, spec: BottleneckSpec) -> Self {
        let stride = [1, spec.spatial_stride, spec.spatial_stride];
        let needs_projection = spec.c_in != spec.c_out || spec.spatial_stride != 1;
        let shortcut = needs_projection.then(|| {
            let proj = ConvSpec::kernel([1, 1, 1]).stride(stride);
            ConvBn::new(
                &p / "branch1",
                &p / "branch1_bn",
                spec.c_in,
                spec.c_out,
                proj,
                false,
            )
        });
        let q = &p / "branch2";
        let a_spec = ConvSpec::kernel([spec.temporal_kernel, 1, 1]);
        let b_spec = ConvSpec::kernel([1, 3, 3]).stride(stride).dilation([
            1,
            spec.spatial_dilation,
            spec.spatial_dilation,
        ]);
        let c_spec = ConvSpec::kernel([1, 1, 1]);
        let (c_in, c_inner, c_out) = (spec.c_in, spec.c_inner, spec.c_out);
        Self {
            shortcut,
            a: ConvBn::new(&q / "a", &q / "a_bn", c_in, c_inner, a_spec, false),
            b: ConvBn::new(&q / "b", &q / "b_bn", c_inner, c_inner, b_spec, false),
            c: ConvBn::new(&q / "c", &q / "c_bn", c_inner, c_out, c_spec, true),
        }
    }

    pub fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let branch = self.a.forward_t(xs, train).relu();
        let branch = self.b.forward_t(&branch, train).relu();
        let branch = self.c.forward_t(&branch, train);
        let identity = match &self.shortcut {
            Some(proj) => proj.forward_t(xs, train),
            None => xs.shallow_clone(),
        };
        (identity + branch).relu()
    }
}

/// One residual stage (res2..res5) of one pathway.
#[derive(Debug)]
pub struct ResStage {
    blocks: Vec<Bottleneck>,
}

/// Pathway index in PySlowFast's names: 0 is Slow, 1 is Fast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pathway {
    Slow = 0,
    Fast = 1,
}

impl ResStage {
    /// `p` is the stage's path (`s2` for res2); `stage` counts from 0 = res2.
    pub fn new(p: &nn::Path, pathway: Pathway, stage: usize, cfg: &SlowFastConfig) -> Self {
        let pw = pathway as usize;
        let c_inner = cfg.stage_inner_channels(stage)[pw];
        let c_out = cfg.stage_out_channels(stage)[pw];
        let blocks = (0..cfg.stage_depths[stage])
            .map(|i| {
                let first = i == 0;
                let spec = BottleneckSpec {
                    c_in: if first {
                        cfg.stage_in_channels(stage)[pw]
                    } else {
                        c_out
                    },
                    c_inner,
                    c_out,
                    temporal_kernel: cfg.stage_temporal_kernels[stage][pw],
                    spatial_stride: if first { cfg.spatial_strides[stage] } else { 1 },
                    spatial_dilation: cfg.spatial_dilations[stage],
                };
                Bottleneck::new(p / format!("pathway{pw}_res{i}"), spec)
            })
            .collect();
        Self { blocks }
    }

    pub fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.blocks
            .iter()
            .fold(xs.shallow_clone(), |x, block| block.forward_t(&x, train))
    }
}
