//! Integration tests: one binary, real processes, real files.

mod cli_frame;
mod fetch;
mod runner;
mod support;
