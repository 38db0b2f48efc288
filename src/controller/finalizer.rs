//! The finalizer step the ClusterExtension and ClusterCatalog reconcilers share:
//! `kube::runtime::finalizer`, with "already done" taken as done.
//!
//! A reconcile can run on a copy of its object older than the API server's: a trigger queued
//! while the previous reconcile removed the finalizer runs the cleanup again on the deleted
//! object's last cached state. Removing a finalizer from an object that is gone (404), or that
//! no longer carries it, and adding one that is already there, are successes, not failed
//! reconciles: an admin's alerts must not count a normal uninstall. A change made meanwhile
//! (the patch's test or resourceVersion no longer matches) is looked at afresh and the change
//! made again, a few times at most; only then does the reconcile fail.

use std::{error::Error as StdError, fmt::Debug, sync::Arc};

use futures::TryFuture;
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{
        controller::Action,
        finalizer::{self, Error, Event},
    },
};
use serde::{Serialize, de::DeserializeOwned};

/// How many times a finalizer change is made again on a fresh read after a concurrent change.
const ATTEMPTS: usize = 3;

/// [`kube::runtime::finalizer::finalizer`], except that adding or removing the finalizer
/// succeeds when the API server already has it so (see the module's comment). When the cleanup
/// ran and the finalizer was found already gone, the result is [`Action::await_change`].
pub async fn finalizer<K, ReconcileFut>(
    api: &Api<K>,
    finalizer_name: &str,
    object: Arc<K>,
    reconcile: impl FnOnce(Event<K>) -> ReconcileFut,
) -> Result<Action, Error<ReconcileFut::Error>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    ReconcileFut: TryFuture<Ok = Action>,
    ReconcileFut::Error: StdError + 'static,
{
    let (name, uid) = (object.name_any(), object.uid());
    let target = Target {
        api,
        name: &name,
        uid: uid.as_deref(),
        finalizer: finalizer_name,
    };
    match finalizer::finalizer(api, finalizer_name, object, reconcile).await {
        Err(Error::AddFinalizer(error)) => target
            .settle(Want::Present, error)
            .await
            .map(|()| Action::await_change())
            .map_err(Error::AddFinalizer),
        Err(Error::RemoveFinalizer(error)) => target
            .settle(Want::Absent, error)
            .await
            .map(|()| Action::await_change())
            .map_err(Error::RemoveFinalizer),
        other => other,
    }
}

/// Removes `finalizer_name` from `object`, a live object that must not keep it; success when it
/// is already gone, or the object is.
pub async fn remove<K>(api: &Api<K>, object: &K, finalizer_name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let (name, uid) = (object.name_any(), object.uid());
    Target {
        api,
        name: &name,
        uid: uid.as_deref(),
        finalizer: finalizer_name,
    }
    .make(Want::Absent, Some(object.clone()))
    .await
}

/// Whether the finalizer is wanted on the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Present,
    Absent,
}

/// One object's finalizer, as a reconcile saw the object.
struct Target<'a, K> {
    api: &'a Api<K>,
    name: &'a str,
    /// The object meant: one created again under the same name is another object.
    uid: Option<&'a str>,
    finalizer: &'a str,
}

impl<K> Target<'_, K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    /// After kube-runtime's change failed with `error`: done when the object is gone; after a
    /// concurrent change, the object is read again and the change made on what it is now.
    async fn settle(&self, want: Want, error: kube::Error) -> Result<(), kube::Error> {
        if is_not_found(&error) {
            return Ok(());
        }
        if !is_concurrent_change(&error) {
            return Err(error);
        }
        self.make(want, None).await
    }

    /// Makes the finalizer `want` on the object, from `current` (else from a fresh read), each
    /// write a compare-and-swap on the resourceVersion read.
    async fn make(&self, want: Want, mut current: Option<K>) -> Result<(), kube::Error> {
        let mut last_conflict = None;
        for _ in 0..ATTEMPTS {
            let object = match current.take() {
                Some(object) => object,
                None => match self.api.get_opt(self.name).await? {
                    Some(object) => object,
                    None => return Ok(()),
                },
            };
            let Some(finalizers) = wanted_finalizers(want, self.uid, self.finalizer, &object) else {
                return Ok(());
            };
            let patch = serde_json::json!({
                "metadata": {
                    "finalizers": finalizers,
                    "resourceVersion": object.resource_version(),
                }
            });
            match self
                .api
                .patch(self.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(error) if is_not_found(&error) => return Ok(()),
                Err(error) if is_concurrent_change(&error) => last_conflict = Some(error),
                Err(error) => return Err(error),
            }
        }
        Err(last_conflict.expect("every attempt conflicted"))
    }
}

/// The finalizers `object` should have, or `None` when it has them already (or it is not the
/// object `uid` names, or it is being deleted without the finalizer: none can be added then).
fn wanted_finalizers<K: Resource>(
    want: Want,
    uid: Option<&str>,
    finalizer: &str,
    object: &K,
) -> Option<Vec<String>> {
    if uid.is_some() && object.meta().uid.as_deref() != uid {
        return None;
    }
    let finalizers = object.finalizers();
    let has = finalizers.iter().any(|f| f == finalizer);
    match want {
        Want::Present if has || object.meta().deletion_timestamp.is_some() => None,
        Want::Present => Some(
            finalizers
                .iter()
                .cloned()
                .chain([finalizer.to_string()])
                .collect(),
        ),
        Want::Absent if !has => None,
        Want::Absent => Some(finalizers.iter().filter(|f| *f != finalizer).cloned().collect()),
    }
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_not_found())
}

/// A write refused because the object changed since it was read: a resourceVersion conflict
/// (409), or a JSON patch whose `test` no longer holds (422, kube-runtime's finalizer patches).
fn is_concurrent_change(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409 || status.code == 422)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        api::core::v1::ConfigMap,
        apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
        jiff::Timestamp,
    };

    use super::*;

    fn object(uid: &str, finalizers: &[&str], deleting: bool) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                uid: Some(uid.into()),
                finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
                deletion_timestamp: deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn change(want: Want, seen_uid: Option<&str>, now: &ConfigMap) -> Option<Vec<String>> {
        wanted_finalizers(want, seen_uid, "ours", now)
    }

    #[test]
    fn a_finalizer_already_as_wanted_needs_no_write() {
        assert_eq!(
            change(Want::Absent, Some("u"), &object("u", &["other"], true)),
            None
        );
        assert_eq!(
            change(Want::Present, Some("u"), &object("u", &["ours"], false)),
            None
        );
        // Being deleted: no finalizer can be added, and the cleanup is not ours to run.
        assert_eq!(change(Want::Present, Some("u"), &object("u", &[], true)), None);
    }

    #[test]
    fn another_object_of_the_same_name_is_left_alone() {
        assert_eq!(
            change(Want::Absent, Some("old"), &object("new", &["ours"], true)),
            None
        );
        assert_eq!(
            change(Want::Present, Some("old"), &object("new", &[], false)),
            None
        );
    }

    #[test]
    fn the_change_keeps_every_other_finalizer_in_order() {
        assert_eq!(
            change(Want::Absent, Some("u"), &object("u", &["a", "ours", "b"], true)),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(
            change(Want::Present, None, &object("u", &["a"], false)),
            Some(vec!["a".to_string(), "ours".to_string()])
        );
    }
}
