//! Integration tests: one binary, real processes, real files.

mod cli_frame;
mod runner;
mod support;
