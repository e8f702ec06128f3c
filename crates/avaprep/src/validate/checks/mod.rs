//! The checks, by family: the dataset's tables read once ([`dataset`]), then [`annotations`],
//! [`lists`] and views, [`frames`] (in parallel) and [`files`].

mod annotations;
mod dataset;
mod files;
mod frames;
mod lists;

use std::collections::BTreeMap;

pub use annotations::check_tables;
pub use dataset::DatasetTables;
pub use files::check_checksums;
pub use frames::check_frames;
pub use lists::{check_consumer_clock, check_mmaction2_view};

use super::{CheckId, CheckResult};

type Results = BTreeMap<CheckId, CheckResult>;

fn result(results: &mut Results, id: CheckId) -> &mut CheckResult {
    results.get_mut(&id).expect("every check has a result")
}
