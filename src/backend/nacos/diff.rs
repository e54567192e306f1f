//! Nacos pushes whole instance lists; the seam follows an app as resets, upserts and
//! removals. [`Pushes`] keeps the last list a follow passed on and turns each new one into
//! the changes between them. Pure: no I/O.

use std::collections::BTreeMap;

use crate::backend::{InstanceChange, InstanceList, Instances};

/// The last list of one followed app. See the module docs.
#[derive(Debug, Default)]
pub struct Pushes {
    instances: Instances,
    skipped: BTreeMap<String, String>,
}

impl Pushes {
    /// Starts from the list the follow's reset carried.
    pub fn new(first: &InstanceList) -> Self {
        Pushes {
            instances: first.instances.clone(),
            skipped: first.skipped.iter().cloned().collect(),
        }
    }

    /// The changes from the last list to `next`, in address order: upserts of new or
    /// changed records, removals of records gone, skips of records newly unusable (a record
    /// that became unusable is also a removal of its usable form). Empty when nothing
    /// changed.
    pub fn apply(&mut self, next: InstanceList) -> Vec<InstanceChange> {
        let mut changes = Vec::new();
        let skipped: BTreeMap<String, String> = next.skipped.into_iter().collect();
        for address in self.instances.keys() {
            if !next.instances.contains_key(address) && !skipped.contains_key(address) {
                changes.push(InstanceChange::Removed(address.clone()));
            }
        }
        for (address, reason) in &skipped {
            if self.skipped.get(address) != Some(reason) {
                changes.push(InstanceChange::Skipped {
                    address: address.clone(),
                    reason: reason.clone(),
                });
            }
        }
        for (address, instance) in &next.instances {
            if self.instances.get(address) != Some(instance) {
                changes.push(InstanceChange::Upsert(instance.clone()));
            }
        }
        self.instances = next.instances;
        self.skipped = skipped;
        changes
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::ServiceInstance;

    fn list(ports: &[(u16, &str)]) -> InstanceList {
        let mut list = InstanceList::default();
        for (port, revision) in ports {
            let mut i = ServiceInstance::new("shop", "h", *port);
            i.metadata
                .insert("dubbo.metadata.revision".into(), (*revision).into());
            list.instances.insert(i.key_address(), Arc::new(i));
        }
        list
    }

    fn names(changes: &[InstanceChange]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                InstanceChange::Upsert(i) => format!("+{}@{}", i.key_address(), i.revision()),
                InstanceChange::Removed(a) => format!("-{a}"),
                InstanceChange::Skipped { address, .. } => format!("!{address}"),
            })
            .collect()
    }

    #[test]
    fn whole_lists_become_changes() {
        let mut pushes = Pushes::new(&list(&[(1, "a"), (2, "a")]));
        assert!(pushes.apply(list(&[(1, "a"), (2, "a")])).is_empty());
        assert_eq!(
            names(&pushes.apply(list(&[(1, "a"), (2, "b"), (3, "a")]))),
            ["+h:2@b", "+h:3@a"]
        );
        assert_eq!(names(&pushes.apply(list(&[(3, "a")]))), ["-h:1", "-h:2"]);
        let mut broken = list(&[]);
        broken.skipped.push(("h:3".into(), "bad".into()));
        assert_eq!(names(&pushes.apply(broken.clone())), ["!h:3"]);
        assert!(pushes.apply(broken).is_empty(), "a skip is reported once");
        assert_eq!(names(&pushes.apply(list(&[(3, "a")]))), ["+h:3@a"]);
        assert_eq!(names(&pushes.apply(list(&[]))), ["-h:3"]);
    }
}
