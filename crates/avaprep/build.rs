//! Embeds the one font the pictures' text is drawn in (the report's labels here, the training
//! curves in the trainer), so a picture never depends on the fonts of the machine it is drawn on:
//! DejaVu Sans from Debian's `fonts-dejavu-core` (scripts/setup.sh installs it), or the file
//! `AVAPREP_FONT` names.

use std::env;
use std::path::Path;

const DEBIAN_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    embed_font();
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
