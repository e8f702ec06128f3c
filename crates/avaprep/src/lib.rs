//! avaprep: turns the AVA 2.2 action-detection dataset into a small, training-ready dataset.
//!
//! One module per pipeline stage; [`pipeline`] wires them. Stages exchange typed records through
//! files under the data directory, never through shared state.

pub mod annotations;
pub mod bad_setting;
pub mod decimal;
pub mod eval;
#[cfg(feature = "extract")]
pub mod extract;
pub mod fetch;
pub mod font;
pub mod frame_index;
pub mod fsutil;
#[cfg(feature = "extract")]
pub mod import;
pub mod layout;
pub mod manifest;
pub mod markup;
#[cfg(feature = "extract")]
pub mod media;
pub mod overrides;
pub mod pipeline;
pub mod progress;
#[cfg(test)]
mod reader_property_tests;
pub mod records;
pub mod report;
pub mod split;
pub mod stages;
#[cfg(test)]
pub(crate) mod testing;
pub mod trainer_protocol;
pub mod trainer_settings;
pub mod validate;
