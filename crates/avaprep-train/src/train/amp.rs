//! CUDA autocast, through libtorch's own per-device functions in `at::autocast`, bound by their C++
//! symbol names. tch 0.24 can switch autocast on but not choose its dtype (libtorch's default is
//! fp16), and its `tch::autocast` calls the device-less `at::autocast::{is,set}_enabled`, which
//! libtorch 2.11 deprecates with a warning on every call: on a GPU, three lines a forward pass, ten
//! thousand in the demo's training. The functions take and return one-byte enums
//! (`c10::DeviceType`, `c10::ScalarType`) and `bool`, which the Itanium C++ ABI passes as plain
//! integers. The names are those of the libtorch this crate pins (2.11.0): another version fails to
//! link rather than misbehave.

unsafe extern "C" {
    #[link_name = "_ZN2at8autocast18set_autocast_dtypeEN3c1010DeviceTypeENS1_10ScalarTypeE"]
    fn at_set_autocast_dtype(device_type: i8, scalar_type: i8);
    #[cfg(test)]
    #[link_name = "_ZN2at8autocast18get_autocast_dtypeEN3c1010DeviceTypeE"]
    fn at_get_autocast_dtype(device_type: i8) -> i8;
    #[link_name = "_ZN2at8autocast19is_autocast_enabledEN3c1010DeviceTypeE"]
    fn at_is_autocast_enabled(device_type: i8) -> bool;
    #[link_name = "_ZN2at8autocast20set_autocast_enabledEN3c1010DeviceTypeEb"]
    fn at_set_autocast_enabled(device_type: i8, enabled: bool);
    #[link_name = "_ZN2at8autocast17increment_nestingEv"]
    fn at_increment_nesting() -> i32;
    #[link_name = "_ZN2at8autocast17decrement_nestingEv"]
    fn at_decrement_nesting() -> i32;
    #[link_name = "_ZN2at8autocast11clear_cacheEv"]
    fn at_clear_cache();
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

/// Runs `f` with CUDA autocast on or off, as `torch.autocast("cuda", enabled)` does: the region
/// nests, the casts it caches are dropped when the outermost region ends, and the previous state
/// comes back even when `f` panics. Tensors on the CPU are not affected.
pub fn cuda_autocast<T>(enabled: bool, f: impl FnOnce() -> T) -> T {
    let _region = AutocastRegion::enter(enabled);
    f()
}

struct AutocastRegion {
    enabled_before: bool,
}

impl AutocastRegion {
    fn enter(enabled: bool) -> Self {
        // SAFETY: these functions set or read libtorch's thread-local autocast state and nesting
        // count; they do not throw.
        unsafe {
            let enabled_before = at_is_autocast_enabled(CUDA);
            at_set_autocast_enabled(CUDA, enabled);
            at_increment_nesting();
            Self { enabled_before }
        }
    }
}

impl Drop for AutocastRegion {
    fn drop(&mut self) {
        // SAFETY: as in `enter`; the nesting count was raised there.
        unsafe {
            if at_decrement_nesting() == 0 {
                at_clear_cache();
            }
            at_set_autocast_enabled(CUDA, self.enabled_before);
        }
    }
}

/// Whether CUDA autocast is on in this thread.
#[cfg(test)]
fn cuda_autocast_enabled() -> bool {
    // SAFETY: as in `AutocastRegion::enter`.
    unsafe { at_is_autocast_enabled(CUDA) }
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

    /// Regions switch libtorch's CUDA autocast state, nest, and restore it on the way out, a
    /// panic included. No GPU is needed: the state is thread-local and exists without CUDA.
    #[test]
    fn autocast_regions_nest_and_restore_libtorchs_state() {
        assert!(!cuda_autocast_enabled());
        let inner = cuda_autocast(true, || {
            assert!(cuda_autocast_enabled());
            cuda_autocast(false, cuda_autocast_enabled)
        });
        assert!(!inner);
        assert!(!cuda_autocast_enabled());

        let panicked = std::panic::catch_unwind(|| cuda_autocast(true, || panic!("inside")));
        assert!(panicked.is_err());
        assert!(!cuda_autocast_enabled());

        // CPU tensors compute in their own dtype inside a region.
        let product = cuda_autocast(true, || {
            let a = tch::Tensor::ones([2, 2], (tch::Kind::Float, tch::Device::Cpu));
            a.matmul(&a)
        });
        assert_eq!(product.kind(), tch::Kind::Float);
    }
}
