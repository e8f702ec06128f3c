//! The stage graph: an order where every stage follows what it reads, the streaming groups of
//! per-video stages, and every stage a stage reads however far back.

use std::collections::BTreeSet;

use super::Runner;
use crate::pipeline::PipelineError;
use crate::pipeline::stage::{AnyStage, Granularity, StageName};

/// Stages in an order where every stage comes after its dependencies; ties keep the given order.
pub(crate) fn topological_order<'s, Id: StageName>(
    stages: &[&'s dyn AnyStage<Id>],
) -> Result<Vec<&'s dyn AnyStage<Id>>, PipelineError> {
    let in_run: BTreeSet<Id> = stages.iter().map(|stage| stage.id()).collect();
    // Dependencies outside the list are inputs produced earlier (by another command).
    let mut placed: BTreeSet<Id> = stages
        .iter()
        .flat_map(|stage| stage.depends_on().iter().copied())
        .filter(|dependency| !in_run.contains(dependency))
        .collect();
    let mut order = Vec::new();
    while order.len() < stages.len() {
        let next = stages.iter().find(|stage| {
            !placed.contains(&stage.id())
                && stage
                    .depends_on()
                    .iter()
                    .all(|dependency| placed.contains(dependency))
        });
        match next {
            Some(stage) => {
                placed.insert(stage.id());
                order.push(*stage);
            }
            None => {
                let remaining = stages
                    .iter()
                    .filter(|stage| !placed.contains(&stage.id()))
                    .map(|stage| stage.id().name().to_string())
                    .collect();
                return Err(PipelineError::Cycle(remaining));
            }
        }
    }
    Ok(order)
}

/// The stage at `index`, plus the per-video stages that directly follow it when it is one.
pub(crate) fn group_at<'s, Id: StageName>(
    order: &[&'s dyn AnyStage<Id>],
    index: usize,
) -> Vec<&'s dyn AnyStage<Id>> {
    let first = order[index];
    if first.granularity() == Granularity::Whole {
        return vec![first];
    }
    order[index..]
        .iter()
        .take_while(|stage| stage.granularity() == Granularity::PerVideo)
        .copied()
        .collect()
}

impl<Id: StageName> Runner<'_, Id> {
    /// The stage this run holds as `id`, if it runs it.
    pub(crate) fn stage(&self, id: Id) -> Option<&dyn AnyStage<Id>> {
        self.stages.iter().find(|stage| stage.id() == id).copied()
    }

    /// Every stage before `dependencies` and they themselves, ordered by name (the order their
    /// parts take in a whole-dataset stage's keys): through this run's stages and, beyond them,
    /// the stages their state files say they read.
    pub(crate) fn ancestors(&self, dependencies: &[Id]) -> Vec<Id> {
        let mut found = BTreeSet::new();
        let mut queue: Vec<Id> = dependencies.to_vec();
        while let Some(id) = queue.pop() {
            if !found.insert(id) {
                continue;
            }
            match self.stage(id) {
                Some(stage) => queue.extend(stage.depends_on()),
                None => queue.extend(
                    self.peek(id)
                        .map(|state| state.dependencies::<Id>())
                        .unwrap_or_default(),
                ),
            }
        }
        let mut ancestors: Vec<Id> = found.into_iter().collect();
        ancestors.sort_by_key(|id| id.name());
        ancestors
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::pipeline::runner::Scrutiny;
    use crate::pipeline::state::{ItemRecord, StateStore};
    use crate::pipeline::{ItemError, Stage, StageContext};

    /// Declared in an order their names do not sort in.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    enum Step {
        Zip,
        Mark,
        Align,
        Train,
    }

    impl StageName for Step {
        fn name(self) -> &'static str {
            match self {
                Step::Zip => "zip",
                Step::Mark => "mark",
                Step::Align => "align",
                Step::Train => "train",
            }
        }

        fn from_name(name: &str) -> Option<Self> {
            [Step::Zip, Step::Mark, Step::Align, Step::Train]
                .into_iter()
                .find(|step| step.name() == name)
        }
    }

    struct Whole(Step, &'static [Step]);

    impl Stage for Whole {
        type Id = Step;

        fn id(&self) -> Step {
            self.0
        }

        fn depends_on(&self) -> &'static [Step] {
            self.1
        }

        fn params(&self) -> serde_json::Value {
            serde_json::Value::Null
        }

        fn run_item(&self, _: &StageContext, _: &str) -> Result<ItemRecord, ItemError> {
            unreachable!("the graph runs nothing")
        }
    }

    fn runner<'a>(
        stages: Vec<&'a dyn AnyStage<Step>>,
        data_dir: &'a std::path::Path,
        cancel: &'a AtomicBool,
    ) -> Runner<'a, Step> {
        Runner {
            stages,
            store: StateStore::new(data_dir, None),
            shard: None,
            context: StageContext {
                data_dir,
                reporter: &crate::progress::Silent,
                cancel,
                fingerprint: "",
                not_started: 0,
            },
            scrutiny: Scrutiny::Listing,
            before_per_video: None,
        }
    }

    /// A whole-dataset stage's key holds its ancestors' parts in the order of their names, as
    /// data directories written before the ids were typed have it: neither the ids' declared
    /// order nor the order the stages are listed in may change it.
    #[test]
    fn ancestors_come_in_the_order_of_their_names() {
        let stages = [
            Whole(Step::Zip, &[]),
            Whole(Step::Mark, &[Step::Zip]),
            Whole(Step::Align, &[Step::Mark]),
            Whole(Step::Train, &[Step::Align, Step::Zip]),
        ];
        let dir = tempfile::tempdir().unwrap();
        let cancel = AtomicBool::new(false);
        let listed: Vec<&dyn AnyStage<Step>> = stages.iter().map(|s| s as _).collect();
        let reversed: Vec<&dyn AnyStage<Step>> = listed.iter().rev().copied().collect();
        for order in [listed, reversed] {
            let ancestors = runner(order, dir.path(), &cancel).ancestors(&[Step::Align, Step::Zip]);
            assert_eq!(ancestors, [Step::Align, Step::Mark, Step::Zip]);
        }
    }
}
