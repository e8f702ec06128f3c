//! avaprep: turns the AVA 2.2 action-detection dataset into a small, training-ready dataset.
//!
//! One module per pipeline stage; [`pipeline`] wires them. Stages exchange typed records through
//! files under the data directory, never through shared state.

pub mod annotations;
pub mod cli;
pub mod fsutil;
pub mod manifest;
pub mod pipeline;
pub mod report;
pub mod serve;
pub mod stages;
