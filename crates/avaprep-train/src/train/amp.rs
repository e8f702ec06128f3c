//! The dtype CUDA autocast computes in. tch 0.24 can switch autocast on but not choose its dtype
//! (libtorch's default is fp16), so bf16 goes through libtorch's own
//! `at::autocast::{set,get}_autocast_dtype`, bound by their C++ symbol names. Both take and return
//! one-byte enums (`c10::DeviceType`, `c10::ScalarType`), which the Itanium C++ ABI passes as
//! plain integers. The names are those of the libtorch this crate pins (2.11.0): another version
//! fails to link rather than misbehave.

unsafe extern "C" {
    #[link_name = "_ZN2at8autocast18set_autocast_dtypeEN3c1010DeviceTypeENS1_10ScalarTypeE"]
    fn at_set_autocast_dtype(device_type: i8, scalar_type: i8);
    #[cfg(test)]
    #[link_name = "_ZN2at8autocast18get_autocast_dtypeEN3c1010DeviceTypeE"]
    fn at_get_autocast_dtype(device_type: i8) -> i8;
}

/// `c10::DeviceType::CUDA`.
const CUDA: i8 = 1;

/// The two autocast dtypes, as `c10::ScalarType` numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutocastDtype {
    Half = 5,
    BFloat16 = 15,
}

/// Sets the dtype of CUDA autocast regions for the whole process.
pub fn set_cuda_autocast_dtype(dtype: AutocastDtype) {
    // SAFETY: both functions only store or load one element of libtorch's per-device dtype table,
    // indexed by a valid DeviceType; they do not throw.
    unsafe { at_set_autocast_dtype(CUDA, dtype as i8) }
}

/// The dtype CUDA autocast regions use now, or `None` for one other than fp16 and bf16.
#[cfg(test)]
fn cuda_autocast_dtype() -> Option<AutocastDtype> {
    // SAFETY: as above.
    match unsafe { at_get_autocast_dtype(CUDA) } {
        5 => Some(AutocastDtype::Half),
        15 => Some(AutocastDtype::BFloat16),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binding reaches libtorch's table: libtorch's default is fp16, and what is set is read
    /// back. No GPU is needed, the table exists for every device type.
    #[test]
    fn sets_and_reads_libtorchs_cuda_autocast_dtype() {
        let _global = crate::train::torch_rng_lock();
        assert_eq!(cuda_autocast_dtype(), Some(AutocastDtype::Half));
        set_cuda_autocast_dtype(AutocastDtype::BFloat16);
        assert_eq!(cuda_autocast_dtype(), Some(AutocastDtype::BFloat16));
        set_cuda_autocast_dtype(AutocastDtype::Half);
        assert_eq!(cuda_autocast_dtype(), Some(AutocastDtype::Half));
    }
}
