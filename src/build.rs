//! Link-time set-up of the trainer, `avaprep-train` (the `train` feature): it must find libtorch
//! without LD_LIBRARY_PATH (an rpath to the torch library folder) and must load `libtorch_cuda`
//! when it exists, because tch only sees CUDA when that library is loaded and the default
//! `--as-needed` link drops it. The data tool, `avaprep`, gets none of this: it links no libtorch.
//!
//! Both executables draw text (the report's labels, the training curves) in one font embedded at
//! build time, so a picture never depends on the fonts of the machine it is drawn on: DejaVu Sans
//! from Debian's `fonts-dejavu-core` (scripts/setup.sh installs it), or the file `AVAPREP_FONT`
//! names.

use std::env;
use std::path::{Path, PathBuf};

const TRAINER: &str = "avaprep-train";
const DEBIAN_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn main() {
    println!("cargo:rerun-if-changed=src/build.rs");
    embed_font();
    println!("cargo:rerun-if-env-changed=AVAPREP_TORCH_LIB");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if env::var_os("CARGO_FEATURE_TRAIN").is_none() {
        return;
    }
    let Some(torch_lib) = torch_lib_dir() else {
        println!(
            "cargo:warning=neither AVAPREP_TORCH_LIB nor LIBTORCH is set: the binary will need LD_LIBRARY_PATH (run scripts/setup.sh)"
        );
        return;
    };
    println!(
        "cargo:rustc-link-arg-bin={TRAINER}=-Wl,-rpath,{}",
        torch_lib.display()
    );
    if torch_lib.join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg-bin={TRAINER}=-Wl,--no-as-needed");
        println!(
            "cargo:rustc-link-arg-bin={TRAINER}=-L{}",
            torch_lib.display()
        );
        println!("cargo:rustc-link-arg-bin={TRAINER}=-ltorch_cuda");
        println!("cargo:rustc-link-arg-bin={TRAINER}=-Wl,--as-needed");
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

/// Hands the font's path to `include_bytes!` in src/font.rs.
fn embed_font() {
    println!("cargo:rerun-if-env-changed=AVAPREP_FONT");
    let font = env::var("AVAPREP_FONT").unwrap_or_else(|_| DEBIAN_FONT.to_string());
    if !Path::new(&font).is_file() {
        panic!(
            "no font at {font}: install Debian's fonts-dejavu-core (scripts/setup.sh does), or set AVAPREP_FONT to a TrueType file"
        );
    }
    println!("cargo:rerun-if-changed={font}");
    println!("cargo:rustc-env=AVAPREP_FONT_FILE={font}");
}
