//! SGD with Nesterov momentum, written out so its state (the momentum buffers) can be
//! checkpointed: tch's optimizer keeps it inside libtorch with no way to read it back.
//! Also the global-norm gradient clip and fp16's dynamic loss scale.

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor, nn};

/// One trainable tensor and its optimizer state.
#[derive(Debug)]
struct Param {
    name: String,
    tensor: Tensor,
    decay: bool,
    momentum: Option<Tensor>,
}

/// PyTorch's `torch.optim.SGD(nesterov=True, dampening=0)` update, with weight decay applied
/// only to parameters that are not BatchNorm weights or biases (PySlowFast's `BN.WEIGHT_DECAY`
/// of 0).
#[derive(Debug)]
pub struct Sgd {
    params: Vec<Param>,
    momentum: f64,
    weight_decay: f64,
}

/// BatchNorm parameters are named `...bn.weight` / `...bn.bias` / `..._bn.weight` in
/// PySlowFast's key scheme.
pub fn is_batch_norm(name: &str) -> bool {
    let mut parts = name.rsplit('.');
    let last = parts.next().unwrap_or_default();
    let owner = parts.next().unwrap_or_default();
    matches!(last, "weight" | "bias") && owner.ends_with("bn")
}

impl Sgd {
    /// Every trainable variable of `vs`, in name order so the state file is stable.
    pub fn new(vs: &nn::VarStore, momentum: f64, weight_decay: f64) -> Self {
        let mut named: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let params = named
            .into_iter()
            .map(|(name, tensor)| Param {
                decay: !is_batch_norm(&name),
                name,
                tensor,
                momentum: None,
            })
            .collect();
        Self {
            params,
            momentum,
            weight_decay,
        }
    }

    pub fn zero_grad(&mut self) {
        for p in &mut self.params {
            p.tensor.zero_grad();
        }
    }

    /// The gradients that exist (a parameter unused by the loss has none).
    pub fn grads(&self) -> Vec<Tensor> {
        self.params
            .iter()
            .map(|p| p.tensor.grad())
            .filter(Tensor::defined)
            .collect()
    }

    /// Scales the gradients so their global L2 norm is at most `max_norm`, as
    /// `torch.nn.utils.clip_grad_norm_` does: on their device, never reading the norm back (a
    /// read would make the host wait for the GPU once a step).
    fn clip_grad_norm(&self, max_norm: f64) {
        let grads = self.grads();
        let Some(norm) = global_norm(&grads) else {
            return;
        };
        let max_norm = Tensor::from(max_norm as f32).to_device(norm.device());
        let factor = (max_norm / (norm + 1e-6)).clamp_max(1.0);
        tch::no_grad(|| {
            for mut g in grads {
                let _ = g.f_mul_(&factor);
            }
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
        let overflow = scaler.is_some_and(|scaler| {
            let overflow = scaler.unscale(&self.grads());
            scaler.update(overflow);
            overflow
        });
        if !overflow {
            if let Some(max_norm) = grad_clip {
                self.clip_grad_norm(max_norm);
            }
            self.step(lr);
        }
        self.zero_grad();
    }

    /// One update with learning rate `lr`, in place as PyTorch's foreach SGD does (the
    /// gradients become the update; they are zeroed before the next backward pass anyway).
    pub fn step(&mut self, lr: f64) {
        let (momentum, weight_decay) = (self.momentum, self.weight_decay);
        tch::no_grad(|| {
            for p in &mut self.params {
                let mut d = p.tensor.grad();
                if !d.defined() {
                    continue;
                }
                if p.decay && weight_decay != 0.0 {
                    let _ = d.f_add_(&(&p.tensor * weight_decay));
                }
                let buffer = match &mut p.momentum {
                    None => p.momentum.insert(d.copy()),
                    Some(buffer) => {
                        let _ = buffer.f_mul_scalar_(momentum);
                        let _ = buffer.f_add_(&d);
                        buffer
                    }
                };
                // Nesterov: step along the gradient plus the momentum-extrapolated buffer.
                let _ = d.f_add_(&(&*buffer * momentum));
                let _ = p.tensor.f_sub_(&(d * lr));
            }
        });
    }

    /// The momentum buffers, keyed by parameter name.
    pub fn state(&self) -> Vec<(String, Tensor)> {
        self.params
            .iter()
            .filter_map(|p| Some((p.name.clone(), p.momentum.as_ref()?.shallow_clone())))
            .collect()
    }

    /// Restores buffers saved by [`Sgd::state`]; unknown names are an error (a different model).
    pub fn load_state(&mut self, state: Vec<(String, Tensor)>) -> Result<(), String> {
        for (name, buffer) in state {
            let param = self
                .params
                .iter_mut()
                .find(|p| p.name == name)
                .ok_or_else(|| format!("optimizer state has unknown parameter {name}"))?;
            if buffer.size() != param.tensor.size() {
                return Err(format!("optimizer state for {name} has the wrong shape"));
            }
            param.momentum = Some(buffer.to_device(param.tensor.device()));
        }
        Ok(())
    }
}

/// L2 norm over all tensors, in f32 on their device (a scalar tensor there); None for none.
fn global_norm(tensors: &[Tensor]) -> Option<Tensor> {
    if tensors.is_empty() {
        return None;
    }
    let squares: Vec<Tensor> = tensors
        .iter()
        .map(|t| t.to_kind(Kind::Float).square().sum(Kind::Float))
        .collect();
    Some(Tensor::stack(&squares, 0).sum(Kind::Float).sqrt())
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
            sgd.zero_grad();
            ((&w * &w).sum(Kind::Float) / 2.0 + (&b * &b).sum(Kind::Float) / 2.0).backward();
            sgd.step(0.1);
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

    #[test]
    fn clipping_bounds_the_global_norm() {
        let vs = nn::VarStore::new(Device::Cpu);
        let w = vs.root().var("w", &[2], nn::Init::Const(0.0));
        let sgd = Sgd::new(&vs, 0.9, 0.0);
        (&w * Tensor::from_slice(&[3.0f32, 4.0]))
            .sum(Kind::Float)
            .backward();
        let norm = |sgd: &Sgd| global_norm(&sgd.grads()).unwrap().double_value(&[]);
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
