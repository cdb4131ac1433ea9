//! The placeholder tables of the masked steps running in this process, so everything a
//! masked cloud role is given during its step is masked with the step's one table: its
//! prompt (by the step) and people's messages to its session (by [`crate::live::Live`]).
//! One table per step keeps the placeholders of a name the same in the pack, the request
//! and a message, so the step maps the role's answer back with the table that made them.
//!
//! A step registers its table while its turn runs ([`StepMasks::register`]); the
//! registration ends when the step drops it, however the turn ended. The table stays in
//! memory only: it is the map from placeholders to the project's names.

use gaffer_core::{StepId, TaskId};
use gaffer_index::Masker;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A step's placeholder table, shared by the step and its sessions' messages.
#[derive(Clone, Debug, Default)]
pub(crate) struct SharedMasker(Arc<Mutex<Masker>>);

impl SharedMasker {
    /// The table (masking adds to it). A panic while it was held leaves it usable: a
    /// table only ever gains entries, each whole.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Masker> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The tables of the masked steps running now, by task and step.
#[derive(Debug, Default)]
pub(crate) struct StepMasks(Mutex<HashMap<(TaskId, StepId), SharedMasker>>);

impl StepMasks {
    fn map(&self) -> MutexGuard<'_, HashMap<(TaskId, StepId), SharedMasker>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `masker` is step `step` of `task`'s table until the returned registration drops.
    pub(crate) fn register(
        self: &Arc<Self>,
        task: &TaskId,
        step: &StepId,
        masker: Masker,
    ) -> Registered {
        let key = (task.clone(), step.clone());
        let shared = SharedMasker(Arc::new(Mutex::new(masker)));
        self.map().insert(key.clone(), shared.clone());
        Registered {
            masks: self.clone(),
            key,
            masker: shared,
        }
    }

    /// Step `step` of `task`'s table, while the step has one registered.
    pub(crate) fn of(&self, task: &TaskId, step: &StepId) -> Option<SharedMasker> {
        self.map().get(&(task.clone(), step.clone())).cloned()
    }
}

/// A step's table, registered until this drops.
pub(crate) struct Registered {
    masks: Arc<StepMasks>,
    key: (TaskId, StepId),
    masker: SharedMasker,
}

impl Registered {
    /// The table, with whatever the step's messages added to it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Masker> {
        self.masker.lock()
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.masks.map().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_table_is_shared_and_gone_once_the_step_drops_it() {
        let masks = Arc::new(StepMasks::default());
        let (task, step) = (TaskId("t-1".into()), StepId("plan".into()));
        let mut masker = Masker::new();
        let in_prompt = masker.mask_prose("fix `settle_total`");
        let registered = masks.register(&task, &step, masker);
        assert!(masks.of(&task, &StepId("code/1".into())).is_none());
        let shared = masks.of(&task, &step).unwrap();
        // A message masked through the shared table reuses the prompt's placeholder
        // and adds its own, which the step's table then maps back.
        let in_message = shared.lock().mask_prose("`settle_total` via skip_refunds");
        assert_eq!(
            (in_prompt.as_str(), in_message.as_str()),
            ("fix `id1`", "`id1` via id2")
        );
        assert_eq!(registered.lock().unmask("id2"), "skip_refunds");
        drop(registered);
        assert!(masks.of(&task, &step).is_none());
    }
}
