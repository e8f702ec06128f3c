//! Which device and arithmetic a run uses, from its settings.

use tch::Device;

use super::TrainError;
use super::amp::{AutocastDtype, set_cuda_autocast_dtype};
use avaprep::trainer_settings::{Precision, TrainConfig};

/// A device as the `device` setting spells it: `cpu`, `cuda:0`.
pub(crate) fn device_name(device: Device) -> String {
    match device {
        Device::Cuda(index) => format!("cuda:{index}"),
        Device::Cpu => "cpu".to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `--set` a hint names, applied to the settings that failed as the trainer applies it.
    fn apply_hint(config: &TrainConfig, message: &str) -> TrainConfig {
        let assignment = message
            .split("--set ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no --set in {message:?}"));
        let mut table = toml::Table::try_from(config).unwrap();
        avaprep::overrides::apply_override(&mut table, assignment).unwrap();
        table.try_into().unwrap()
    }

    #[test]
    fn each_device_hint_names_a_setting_that_works() {
        let mut config = TrainConfig::synthetic_tiny();
        config.device = "cuda:999".into();
        let message = resolve_device(&config).unwrap_err().to_string();
        let fixed = apply_hint(&config, &message);
        assert_eq!(
            resolve_device(&fixed).unwrap(),
            (Device::Cpu, Precision::Fp32)
        );

        let mut config = TrainConfig::synthetic_tiny();
        config.device = "cpu".into();
        config.precision = Precision::Bf16;
        let message = resolve_device(&config).unwrap_err().to_string();
        let fixed = apply_hint(&config, &message);
        assert_eq!(
            resolve_device(&fixed).unwrap(),
            (Device::Cpu, Precision::Fp32)
        );
    }
}
