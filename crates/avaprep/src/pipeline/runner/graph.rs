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
