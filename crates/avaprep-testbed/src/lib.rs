//! What avaprep is tested, demonstrated and benchmarked against, kept out of the product
//! library: [`synth`], a miniature of AVA made of real encoded videos whose frames carry their
//! own number, with the official files' layout; and [`serve`], an HTTP mirror of such a folder
//! whose faults (drops, stalls, wrong bytes) the download tests inject. `avaprep synth` and
//! `avaprep serve` run them for the demo. [`scratch`] gives tests folders that go when their
//! process exits.

pub mod scratch;
pub mod serve;
#[cfg(feature = "synth")]
pub mod synth;
