//! SGD with Nesterov momentum, written out so its state (the momentum buffers) can be
//! checkpointed: tch's optimizer keeps it inside libtorch with no way to read it back.
//! Also the global-norm gradient clip and fp16's dynamic loss scale.
//!
//! The trainable tensors, their gradients and their momentum live end to end in three flat
//! buffers, so an update is about ten tensor operations whatever the model: done tensor by
//! tensor it was six to eight per tensor, about 2,500 kernel launches a step for R50, where
//! PyTorch's SGD launches a few multi-tensor kernels on a GPU. tch has no multi-tensor operations.

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor, nn};

/// Where one trainable tensor lives in the flat buffers.
#[derive(Debug)]
struct Slot {
    name: String,
    /// The variable itself; its data is a view of [`Sgd::params`].
    tensor: Tensor,
    /// Its place in [`Sgd::grads`], and that place's address, to tell whether the gradient
    /// autograd holds is already there.
    grad_place: Tensor,
    grad_address: usize,
    offset: i64,
    shape: Vec<i64>,
}

impl Slot {
    fn view(&self, flat: &Tensor) -> Tensor {
        let numel = self.shape.iter().product();
        flat.narrow(0, self.offset, numel)
            .view(self.shape.as_slice())
    }
}

/// PyTorch's `torch.optim.SGD(nesterov=True, dampening=0)` update, with weight decay applied
/// only to parameters that are not BatchNorm weights or biases (PySlowFast's `BN.WEIGHT_DECAY`
/// of 0). A parameter the loss did not reach has a zero gradient, as after PyTorch's
/// `zero_grad(set_to_none=False)`: decay and momentum still move it.
#[derive(Debug)]
pub struct Sgd {
    slots: Vec<Slot>,
    /// Every trainable tensor, decayed ones first (`decayed` elements), then BatchNorm's.
    params: Tensor,
    grads: Tensor,
    /// Zero before the first step, which makes that step's buffer the gradient, as PyTorch's is.
    buffer: Tensor,
    decayed: i64,
    /// The factors as tensors on the buffers' device, for the fused `addcmul_`; no weight decay
    /// when it is 0.
    momentum: Tensor,
    weight_decay: Option<Tensor>,
    /// Elements per pass of the update: the whole buffer on a GPU (one kernel per operation);
    /// on a CPU a piece small enough for the update's passes over it to stay in cache.
    chunk: i64,
}

/// 256 KiB of f32 per buffer.
const CPU_CHUNK: i64 = 1 << 16;

/// BatchNorm parameters are named `...bn.weight` / `...bn.bias` / `..._bn.weight` in
/// PySlowFast's key scheme.
pub fn is_batch_norm(name: &str) -> bool {
    let mut parts = name.rsplit('.');
    let last = parts.next().unwrap_or_default();
    let owner = parts.next().unwrap_or_default();
    matches!(last, "weight" | "bias") && owner.ends_with("bn")
}

impl Sgd {
    /// Moves every trainable variable of `vs` into the flat buffers (the variables stay the
    /// model's; their data becomes a view). Decayed tensors come first, each group in name
    /// order. The variables must share one kind and device, as a model's do.
    pub fn new(vs: &nn::VarStore, momentum: f64, weight_decay: f64) -> Self {
        let mut named: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .collect();
        named.sort_by(|a, b| (is_batch_norm(&a.0), &a.0).cmp(&(is_batch_norm(&b.0), &b.0)));
        let options = named
            .first()
            .map_or((Kind::Float, Device::Cpu), |(_, t)| (t.kind(), t.device()));
        assert!(
            named.iter().all(|(_, t)| (t.kind(), t.device()) == options),
            "the trainable variables must share one kind and device"
        );
        // Each tensor starts on a 256-byte boundary, as one allocated alone would: kernels
        // (oneDNN's, CUDA's vectorised ones) take slower paths on misaligned data.
        let padded_len = |t: &Tensor| t.numel().next_multiple_of(64) as i64;
        let total = named.iter().map(|(_, t)| padded_len(t)).sum();
        let decayed = named
            .iter()
            .filter(|(name, _)| !is_batch_norm(name))
            .map(|(_, t)| padded_len(t))
            .sum();
        let params = Tensor::zeros([total], options);
        let grads = Tensor::zeros([total], options);
        let mut offset = 0;
        let slots = named
            .into_iter()
            .map(|(name, mut tensor)| {
                let mut slot = Slot {
                    name,
                    grad_place: Tensor::new(),
                    grad_address: 0,
                    offset,
                    shape: tensor.size(),
                    tensor: tensor.shallow_clone(),
                };
                offset += padded_len(&tensor);
                let mut place = slot.view(&params);
                tch::no_grad(|| place.copy_(&tensor));
                tensor.set_data(&place);
                slot.grad_place = slot.view(&grads);
                slot.grad_address = slot.grad_place.data_ptr() as usize;
                slot
            })
            .collect();
        let factor = |value: f64| Tensor::from(value).to_kind(options.0).to_device(options.1);
        Self {
            slots,
            buffer: Tensor::zeros([total], options),
            params,
            grads,
            decayed,
            momentum: factor(momentum),
            weight_decay: (weight_decay != 0.0).then(|| factor(weight_decay)),
            chunk: if options.1.is_cuda() {
                total.max(1)
            } else {
                CPU_CHUNK
            },
        }
    }

    /// Moves each gradient autograd created into its place in the flat buffer and points the
    /// gradient there: later backward passes add into it in place, as they do for
    /// DistributedDataParallel's bucket views. A gradient that does not exist yet is skipped.
    fn gather_grads(&self) {
        for slot in &self.slots {
            let mut grad = slot.tensor.grad();
            if grad.defined() && grad.data_ptr() as usize != slot.grad_address {
                let mut place = slot.grad_place.shallow_clone();
                tch::no_grad(|| place.copy_(&grad));
                grad.set_data(&place);
            }
        }
    }

    /// Scales the gradients so their global L2 norm is at most `max_norm`, as
    /// `torch.nn.utils.clip_grad_norm_` does: on their device, never reading the norm back (a
    /// read would make the host wait for the GPU once a step).
    fn clip_grad_norm(&mut self, max_norm: f64) {
        // `max_norm / (norm + 1e-6)` as PyTorch's float-by-tensor division computes it, with no
        // scalar tensor to copy to the device.
        let factor = ((self.grads.norm() + 1e-6).reciprocal() * max_norm).clamp_max(1.0);
        tch::no_grad(|| {
            let _ = self.grads.f_mul_(&factor);
        });
    }

    /// The update of an optimizer step, once its gradients are accumulated: unscaled (fp16),
    /// clipped (`grad_clip`), applied at `lr`, then zeroed. An fp16 step whose gradients
    /// overflowed is skipped, as PyTorch's GradScaler does.
    pub fn apply_gradients(
        &mut self,
        scaler: Option<&mut LossScaler>,
        grad_clip: Option<f64>,
        lr: f64,
    ) {
        self.gather_grads();
        let overflow = scaler.is_some_and(|scaler| {
            let overflow = scaler.unscale(std::slice::from_ref(&self.grads));
            scaler.update(overflow);
            overflow
        });
        if !overflow {
            if let Some(max_norm) = grad_clip {
                self.clip_grad_norm(max_norm);
            }
            self.update(lr);
        }
        let _ = self.grads.zero_();
    }

    /// In place, with no temporary tensor, as PyTorch's foreach SGD is (the gradients become
    /// the update; they are zeroed before the next backward pass anyway).
    fn update(&mut self, lr: f64) {
        let total = self.params.size()[0];
        tch::no_grad(|| {
            for (start, end, decayed) in [(0, self.decayed, true), (self.decayed, total, false)] {
                for at in (start..end).step_by(self.chunk as usize) {
                    let len = self.chunk.min(end - at);
                    self.update_piece(at, len, decayed, lr);
                }
            }
        });
    }

    fn update_piece(&self, at: i64, len: i64, decayed: bool, lr: f64) {
        let mut params = self.params.narrow(0, at, len);
        let mut grads = self.grads.narrow(0, at, len);
        let mut buffer = self.buffer.narrow(0, at, len);
        if let Some(weight_decay) = self.weight_decay.as_ref().filter(|_| decayed) {
            let _ = grads.f_addcmul_(&params, weight_decay);
        }
        let _ = buffer.f_mul_(&self.momentum);
        let _ = buffer.f_add_(&grads);
        // Nesterov: step along the gradient plus the momentum-extrapolated buffer.
        let _ = grads.f_addcmul_(&buffer, &self.momentum);
        let _ = grads.f_mul_scalar_(-lr);
        let _ = params.f_add_(&grads);
    }

    /// The momentum buffers, keyed by parameter name.
    pub fn state(&self) -> Vec<(String, Tensor)> {
        self.slots
            .iter()
            .map(|slot| (slot.name.clone(), slot.view(&self.buffer)))
            .collect()
    }

    /// Restores buffers saved by [`Sgd::state`]; unknown names are an error (a different model).
    pub fn load_state(&mut self, state: Vec<(String, Tensor)>) -> Result<(), String> {
        for (name, saved) in state {
            let slot = self
                .slots
                .iter()
                .find(|slot| slot.name == name)
                .ok_or_else(|| format!("optimizer state has unknown parameter {name}"))?;
            if saved.size() != slot.shape {
                return Err(format!("optimizer state for {name} has the wrong shape"));
            }
            tch::no_grad(|| slot.view(&self.buffer).copy_(&saved));
        }
        Ok(())
    }
}

/// fp16's dynamic loss scale (PyTorch's `GradScaler` rules): the loss is multiplied by `scale`
/// before backward; gradients are divided by it before the update; a step whose gradients
/// overflowed is skipped and halves the scale; `growth_interval` clean steps double it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossScaler {
    pub scale: f64,
    pub growth_tracker: u32,
    pub growth_factor: f64,
    pub backoff_factor: f64,
    pub growth_interval: u32,
}

impl Default for LossScaler {
    fn default() -> Self {
        Self {
            scale: 65536.0,
            growth_tracker: 0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
        }
    }
}

impl LossScaler {
    /// Divides the gradients by the scale in place; returns whether any is inf or NaN.
    pub fn unscale(&self, grads: &[Tensor]) -> bool {
        let inverse = 1.0 / self.scale;
        let found: Vec<Tensor> = tch::no_grad(|| {
            grads
                .iter()
                .map(|g| {
                    let _ = g.shallow_clone().f_mul_scalar_(inverse);
                    g.isfinite().logical_not().any()
                })
                .collect()
        });
        !found.is_empty() && Tensor::stack(&found, 0).any().int64_value(&[]) != 0
    }

    /// The scale after a step that did (`found_inf`) or did not overflow.
    pub fn update(&mut self, found_inf: bool) {
        if found_inf {
            self.scale *= self.backoff_factor;
            self.growth_tracker = 0;
        } else {
            self.growth_tracker += 1;
            if self.growth_tracker >= self.growth_interval {
                self.scale *= self.growth_factor;
                self.growth_tracker = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    #[test]
    fn batch_norm_names_are_recognised() {
        assert!(is_batch_norm("s1.pathway0_stem.bn.weight"));
        assert!(is_batch_norm("s2.pathway1_res0.branch2.a_bn.bias"));
        assert!(is_batch_norm("s2.pathway0_res0.branch1_bn.weight"));
        assert!(!is_batch_norm("s2.pathway0_res0.branch2.a.weight"));
        assert!(!is_batch_norm("head.projection.bias"));
        assert!(!is_batch_norm("s1.pathway0_stem.bn.running_mean"));
    }

    /// Two steps against PyTorch's SGD(lr, momentum=0.9, nesterov=True, weight_decay=wd) on
    /// f(w) = sum(w^2) / 2, whose gradient is w: worked out by hand.
    #[test]
    fn nesterov_sgd_matches_the_pytorch_update() {
        let vs = nn::VarStore::new(Device::Cpu);
        let w = vs.root().var("w", &[1], nn::Init::Const(1.0));
        let b = (vs.root() / "bn").var("weight", &[1], nn::Init::Const(1.0));
        let mut sgd = Sgd::new(&vs, 0.9, 0.1);
        for _ in 0..2 {
            ((&w * &w).sum(Kind::Float) / 2.0 + (&b * &b).sum(Kind::Float) / 2.0).backward();
            sgd.apply_gradients(None, None, 0.1);
        }
        // w: d1 = 1 + 0.1 = 1.1, buf 1.1, upd 1.1 + 0.99 = 2.09, w = 0.791;
        //    d2 = 0.791 * 1.1 = 0.8701, buf = 0.99 + 0.8701 = 1.8601, upd = 0.8701 + 1.67409,
        //    w = 0.791 - 0.254419 = 0.536581.
        assert!((w.double_value(&[0]) - 0.536581).abs() < 1e-6);
        // bn.weight has no decay: d1 = 1, upd 1.9, b = 0.81; d2 = 0.81, buf 1.71,
        // upd = 0.81 + 1.539 = 2.349, b = 0.81 - 0.2349 = 0.5751.
        assert!((b.double_value(&[0]) - 0.5751).abs() < 1e-6);
        assert_eq!(sgd.state().len(), 2);
    }

    /// The model's variables become views of the flat buffer, and so do their gradients once
    /// gathered: backward passes then accumulate into it, and an update through the buffer is
    /// what the model sees, in its shapes.
    #[test]
    fn variables_and_gradients_live_in_the_flat_buffers() {
        let vs = nn::VarStore::new(Device::Cpu);
        let w = vs.root().var("w", &[2, 3], nn::Init::Const(1.0));
        let b = (vs.root() / "bn").var("bias", &[3], nn::Init::Const(2.0));
        let loss = || {
            (&w * Tensor::from_slice(&[1.0f32, 2.0, 3.0])).sum(Kind::Float)
                + (&b * 4.0).sum(Kind::Float)
        };
        let mut sgd = Sgd::new(&vs, 0.0, 0.5);
        // Pieces smaller than a tensor, and across the padding between tensors, update the same.
        sgd.chunk = 4;
        assert_eq!(w.size(), [2, 3]);
        assert_eq!(w.data_ptr(), sgd.params.data_ptr());
        assert_eq!(Vec::<f32>::try_from(&b).unwrap(), [2.0; 3]);
        loss().backward();
        // At a learning rate of 0 the weights stay; the gradients are gathered, then zeroed.
        sgd.apply_gradients(None, None, 0.0);
        // Two backward passes add up in place, in the buffer the update reads.
        loss().backward();
        loss().backward();
        assert_eq!(w.grad().data_ptr(), sgd.grads.data_ptr());
        sgd.apply_gradients(None, None, 0.1);
        // w: gradient 2 x (1, 2, 3) by row plus decay 0.5; bn.bias: 2 x 4, no decay.
        let weights = Vec::<f32>::try_from(&w.flatten(0, -1)).unwrap();
        let expected = [0.75, 0.55, 0.35, 0.75, 0.55, 0.35];
        for (weight, expected) in weights.iter().zip(expected) {
            assert!((weight - expected).abs() < 1e-6, "{weights:?}");
        }
        assert_eq!(Vec::<f32>::try_from(&b).unwrap(), [1.2, 1.2, 1.2]);
        assert_eq!(
            Vec::<f32>::try_from(&w.grad().flatten(0, -1)).unwrap(),
            [0.0; 6]
        );
        assert!(vs.variables()["w"].equal(&w));
    }

    #[test]
    fn clipping_bounds_the_global_norm() {
        let vs = nn::VarStore::new(Device::Cpu);
        let w = vs.root().var("w", &[2], nn::Init::Const(0.0));
        let mut sgd = Sgd::new(&vs, 0.9, 0.0);
        (&w * Tensor::from_slice(&[3.0f32, 4.0]))
            .sum(Kind::Float)
            .backward();
        sgd.gather_grads();
        let norm = |sgd: &Sgd| sgd.grads.norm().double_value(&[]);
        assert!((norm(&sgd) - 5.0).abs() < 1e-6);
        sgd.clip_grad_norm(1.0);
        assert!((norm(&sgd) - 1.0).abs() < 1e-4);
        // Under the bound the gradients stay as they are: (3, 4) / 5.
        sgd.clip_grad_norm(2.0);
        let grad = Vec::<f32>::try_from(&w.grad()).unwrap();
        assert!(
            (grad[0] - 0.6).abs() < 1e-4 && (grad[1] - 0.8).abs() < 1e-4,
            "{grad:?}"
        );
    }

    /// The fp16 update, which only a GPU trains: an overflowed step leaves the weights, zeroes
    /// the gradients and halves the scale; a clean one unscales, then clips, then steps.
    #[test]
    fn scaled_updates_skip_overflows_and_unscale_before_clipping() {
        let vs = nn::VarStore::new(Device::Cpu);
        let w = vs.root().var("w", &[2], nn::Init::Const(1.0));
        let mut sgd = Sgd::new(&vs, 0.0, 0.0);
        let mut scaler = LossScaler::default();
        let scale = scaler.scale;
        (&w * Tensor::from_slice(&[f32::INFINITY, 1.0]))
            .sum(Kind::Float)
            .backward();
        sgd.apply_gradients(Some(&mut scaler), Some(1.0), 0.5);
        assert_eq!(Vec::<f32>::try_from(&w).unwrap(), vec![1.0, 1.0]);
        assert_eq!(Vec::<f32>::try_from(&w.grad()).unwrap(), vec![0.0, 0.0]);
        assert_eq!(scaler.scale, scale / 2.0);
        // Gradients (3, 4) x scale: unscaled to norm 5, clipped to norm 1, a step of 0.5.
        let scale = scaler.scale as f32;
        (&w * Tensor::from_slice(&[3.0 * scale, 4.0 * scale]))
            .sum(Kind::Float)
            .backward();
        sgd.apply_gradients(Some(&mut scaler), Some(1.0), 0.5);
        let weights = Vec::<f32>::try_from(&w).unwrap();
        let expected = [1.0 - 0.5 * 0.6, 1.0 - 0.5 * 0.8];
        for (weight, expected) in weights.iter().zip(expected) {
            assert!((weight - expected).abs() < 1e-5, "{weights:?}");
        }
        assert_eq!(scaler.growth_tracker, 1);
    }

    #[test]
    fn loss_scale_backs_off_on_overflow_and_grows_after_clean_steps() {
        let mut scaler = LossScaler {
            growth_interval: 2,
            ..LossScaler::default()
        };
        let grads = [Tensor::from_slice(&[65536.0f32, 131072.0])];
        assert!(!scaler.unscale(&grads));
        assert_eq!(Vec::<f32>::try_from(&grads[0]).unwrap(), vec![1.0, 2.0]);
        assert!(scaler.unscale(&[Tensor::from_slice(&[f32::INFINITY])]));
        scaler.update(true);
        assert_eq!(scaler.scale, 32768.0);
        scaler.update(false);
        scaler.update(false);
        assert_eq!(scaler.scale, 65536.0);
    }
}
