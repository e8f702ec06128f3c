//! Integration tests: one binary, real processes, real files.

mod cli_frame;
#[cfg(feature = "extract")]
mod extract;
mod fetch;
#[cfg(feature = "extract")]
mod folders;
#[cfg(feature = "extract")]
mod gpu_train_script;
#[cfg(feature = "extract")]
mod hints;
#[cfg(feature = "extract")]
mod import;
#[cfg(feature = "extract")]
mod invalidation;
#[cfg(feature = "extract")]
mod lists;
#[cfg(feature = "extract")]
mod nothing_lost;
#[cfg(feature = "extract")]
mod on_disk;
#[cfg(feature = "extract")]
mod pipeline;
#[cfg(feature = "extract")]
mod readme;
#[cfg(feature = "extract")]
mod report;
#[cfg(feature = "extract")]
mod resume;
mod runner;
mod support;
#[cfg(feature = "extract")]
mod validate;
