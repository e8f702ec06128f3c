//! Link-time set-up of the trainer, `avaprep-train`: it must find libtorch without
//! LD_LIBRARY_PATH (an rpath to the torch library folder) and must load `libtorch_cuda` when it
//! exists, because tch only sees CUDA when that library is loaded and the default `--as-needed`
//! link drops it. The data tool, `avaprep`, gets none of this: it links no libtorch.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=AVAPREP_TORCH_LIB");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    let Some(torch_lib) = torch_lib_dir() else {
        println!(
            "cargo:warning=neither AVAPREP_TORCH_LIB nor LIBTORCH is set: the binary will need LD_LIBRARY_PATH (run scripts/setup.sh)"
        );
        return;
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", torch_lib.display());
    if torch_lib.join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-L{}", torch_lib.display());
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
}

fn torch_lib_dir() -> Option<PathBuf> {
    if let Ok(dir) = env::var("AVAPREP_TORCH_LIB") {
        return Some(PathBuf::from(dir));
    }
    env::var("LIBTORCH")
        .ok()
        .map(|dir| PathBuf::from(dir).join("lib"))
}
