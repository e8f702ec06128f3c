//! `avaprep train`: a single-GPU SlowFast trainer for AVA on the extracted frames.

pub mod model;
