//! Which device and arithmetic a run uses, from its settings.

use tch::Device;

use super::TrainError;
use super::amp::{AutocastDtype, set_cuda_autocast_dtype};
use super::config::{Precision, TrainConfig};

/// The device and the precision actually used, with libtorch's autocast dtype set to match.
/// Mixed precision is CUDA-only; `auto` picks fp16 with the loss scaler there, which every CUDA
/// GPU runs natively (bf16 needs Ampere or later).
pub(crate) fn resolve_device(config: &TrainConfig) -> Result<(Device, Precision), TrainError> {
    let cuda = |n: usize| {
        if tch::Cuda::is_available() && n < tch::Cuda::device_count() as usize {
            Ok(Device::Cuda(n))
        } else {
            Err(TrainError::Device(format!(
                "cuda:{n} is not available; use --set device=\"cpu\""
            )))
        }
    };
    let device = match config.device.as_str() {
        "auto" => Device::cuda_if_available(),
        "cpu" => Device::Cpu,
        "cuda" => cuda(0)?,
        other => match other.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
            Some(n) => cuda(n)?,
            None => {
                return Err(TrainError::Device(format!(
                    "unknown device {other:?} (auto, cpu, cuda, cuda:N)"
                )));
            }
        },
    };
    let precision = match (config.precision, device.is_cuda()) {
        (Precision::Auto, true) => Precision::Fp16,
        (Precision::Auto | Precision::Fp32, _) => Precision::Fp32,
        (mixed @ (Precision::Fp16 | Precision::Bf16), true) => mixed,
        (mixed, false) => {
            let name = if mixed == Precision::Bf16 {
                "bf16"
            } else {
                "fp16"
            };
            return Err(TrainError::Device(format!(
                "{name} autocast needs CUDA; use --set precision=\"fp32\" on the CPU"
            )));
        }
    };
    match precision {
        Precision::Bf16 => set_cuda_autocast_dtype(AutocastDtype::BFloat16),
        Precision::Fp16 => set_cuda_autocast_dtype(AutocastDtype::Half),
        Precision::Auto | Precision::Fp32 => {}
    }
    Ok((device, precision))
}
