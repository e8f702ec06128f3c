//! Integration tests: one binary, real processes, real files.

mod cli_frame;
#[cfg(feature = "extract")]
mod extract;
mod fetch;
mod runner;
mod support;
