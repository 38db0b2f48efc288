//! The drift check: the repair of the objects of kinds the controller does not watch (all but
//! CRDs and Deployments), at a fraction of a re-apply's requests. Every [`DRIFT_CHECK`], one
//! list of the revision records and one metadata-only list per kind, for every extension at
//! once, compared with what the apply that found each extension ready left (its ready mark's
//! uid and resourceVersion per object); kinds the controller may not list are read object by
//! object as the extension's installer. Only the extensions with an object changed, gone or
//! unreadable are applied again (their reconcile finds their last apply no longer trusted).
//! Before this check each installed extension was re-applied in full every 30 minutes, ~15
//! requests each (docs/benchmarks.md).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use futures::{Stream, StreamExt};
use kube::{
    Client, ResourceExt,
    runtime::reflector::{ObjectRef, Store},
};
use olmv1_api::v1::ClusterExtension;
use tracing::{debug, info, warn};

use super::Context;
use crate::apply::{
    ApplyError,
    objects::{self, is_watched_kind},
    revision::{self, AppliedObject, InstalledRevision},
};

/// How often the drift check runs (each period drawn in `[DRIFT_CHECK, 1.2 * DRIFT_CHECK)`).
pub const DRIFT_CHECK: Duration = Duration::from_secs(30 * 60);

/// An object as the cluster has it now: uid and resourceVersion, `None` when it is gone.
type Found = Option<(String, String)>;

/// The first of `expected` that is not as its apply left it, and how: gone, re-created (another
/// uid) or written since (another resourceVersion). `found` says what the cluster has of an
/// object (`None`: not known this time, which counts as a change).
pub fn drifted(
    expected: &[AppliedObject],
    found: impl Fn(&revision::ObjectRef) -> Option<Found>,
) -> Option<(&revision::ObjectRef, &'static str)> {
    expected.iter().find_map(|applied| {
        let how = match found(&applied.object) {
            Some(Some((uid, _))) if uid != applied.uid => "re-created",
            Some(Some((_, version))) if version != applied.resource_version => "written",
            Some(Some(_)) => return None,
            Some(None) => "gone",
            None => "not readable",
        };
        Some((&applied.object, how))
    })
}

/// What the check compares for one extension: the objects of unwatched kinds its ready mark
/// recorded, or `None` when the record cannot say (content not ready yet, being rolled out, or a
/// record written before marks kept them, while it has such objects).
pub fn expected_of(record: &InstalledRevision) -> Option<Option<&[AppliedObject]>> {
    if record.rollout.is_some() {
        // Applied and not ready yet: its reconciles poll the rollout meanwhile.
        return None;
    }
    let mark = record.ready.as_ref()?;
    let unwatched = record.objects.iter().filter(|o| !is_watched_kind(o)).count();
    if unwatched > 0 && mark.applied.is_empty() {
        return Some(None);
    }
    Some(Some(&mark.applied))
}

/// The extensions the drift check finds changed, every period from now on (each one marked in
/// [`super::LastApplies`] so that its reconcile applies in full).
pub fn checks(
    ctx: Arc<Context>,
    extensions: Store<ClusterExtension>,
    period: Duration,
) -> impl Stream<Item = ObjectRef<ClusterExtension>> + Send + 'static {
    futures::stream::unfold((ctx, extensions), move |(ctx, extensions)| async move {
        tokio::time::sleep(crate::watch::jittered(period)).await;
        let drifted = check(&ctx, &extensions).await;
        let refs: Vec<_> = drifted.iter().map(|name| ObjectRef::new(name)).collect();
        Some((futures::stream::iter(refs), (ctx, extensions)))
    })
    .flatten()
}

/// One drift check over every installed extension; returns those to apply again.
pub async fn check(ctx: &Context, extensions: &Store<ClusterExtension>) -> Vec<String> {
    ctx.metrics.drift_check();
    let records = match ctx.revisions.installed().await {
        Ok(records) => records,
        Err(e) => {
            warn!(error = %e, "drift check skipped: the revision records cannot be read");
            return Vec::new();
        }
    };
    let live: HashMap<String, Arc<ClusterExtension>> = extensions
        .state()
        .into_iter()
        .filter(|ext| ext.metadata.deletion_timestamp.is_none())
        .map(|ext| (ext.name_any(), ext))
        .collect();
    // Per extension, what its ready mark expects (`None`: no baseline, apply in full).
    let mut expected: BTreeMap<String, Option<Vec<AppliedObject>>> = BTreeMap::new();
    for (name, record) in &records {
        if !live.contains_key(name) {
            continue;
        }
        if let Some(objects) = expected_of(record) {
            expected.insert(name.clone(), objects.map(<[AppliedObject]>::to_vec));
        }
    }
    let kinds: BTreeSet<(String, String)> = expected
        .values()
        .flatten()
        .flatten()
        .map(|a| (a.object.api_version.clone(), a.object.kind.clone()))
        .collect();
    // One list per kind, as the controller. A kind it may not list is read per object as each
    // installer; a kind no longer served has no objects left.
    let mut listed: HashMap<(String, String), HashMap<revision::ObjectRef, (String, String)>> =
        HashMap::new();
    let mut unlistable: BTreeSet<(String, String)> = BTreeSet::new();
    for (api_version, kind) in kinds {
        match objects::list_owned(&ctx.client, &ctx.lookups, &api_version, &kind).await {
            Ok(found) => {
                listed.insert((api_version, kind), found);
            }
            Err(ApplyError::Discovery { .. }) => {
                listed.insert((api_version, kind), HashMap::new());
            }
            Err(ApplyError::Read {
                source: kube::Error::Api(status),
                ..
            }) if status.code == 403 => {
                unlistable.insert((api_version, kind));
            }
            Err(e) => {
                // Not known this time: objects of the kind count as changed below.
                warn!(%kind, error = %e, "drift check: cannot list the kind");
            }
        }
    }
    let mut drifted_extensions = Vec::new();
    for (name, expected) in expected {
        let changed = match expected {
            None => Some("no versions recorded".to_string()),
            Some(expected) => {
                let key = |o: &revision::ObjectRef| (o.api_version.clone(), o.kind.clone());
                let to_read: Vec<revision::ObjectRef> = expected
                    .iter()
                    .map(|a| &a.object)
                    .filter(|o| unlistable.contains(&key(o)))
                    .cloned()
                    .collect();
                let read = match to_read.is_empty() {
                    true => Some(HashMap::new()),
                    false => read_as_installer(ctx, &live[&name], &to_read).await,
                };
                drifted(&expected, |o| {
                    if let Some(found) = listed.get(&key(o)) {
                        return Some(found.get(o).cloned());
                    }
                    read.as_ref()?.get(o).cloned()
                })
                .map(|(object, how)| format!("{} {how}", objects::describe(object)))
            }
        };
        if let Some(change) = changed {
            info!(extension = %name, %change, "drift check: changed since its last apply; applying again");
            ctx.last_apply.drifted(&name);
            drifted_extensions.push(name);
        }
    }
    debug!(
        extensions = live.len(),
        drifted = drifted_extensions.len(),
        "drift check done"
    );
    ctx.metrics.drift_found(drifted_extensions.len());
    drifted_extensions
}

/// `objects` as the cluster has them, read as `ext`'s installer; `None` when they cannot be read
/// (the extension is then applied again, which reports what fails).
async fn read_as_installer(
    ctx: &Context,
    ext: &ClusterExtension,
    objects: &[revision::ObjectRef],
) -> Option<HashMap<revision::ObjectRef, Found>> {
    let client: Client = match ctx.identities.installer_of(ext) {
        Ok(installer) => ctx.identities.client_for(&installer).await.ok()?,
        Err(_) => return None,
    };
    match objects::read_applied(&client, &ctx.lookups, objects).await {
        Ok(found) => Some(objects.iter().cloned().zip(found).collect()),
        Err(e) => {
            debug!(extension = %ext.name_any(), error = %e, "drift check: cannot read as the installer");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::revision::{ObjectRef, ReadyMark, RolloutStart};

    fn object(kind: &str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn applied(kind: &str, name: &str, uid: &str, version: &str) -> AppliedObject {
        AppliedObject {
            object: object(kind, name),
            uid: uid.into(),
            resource_version: version.into(),
        }
    }

    #[test]
    fn only_an_object_written_replaced_or_gone_since_its_apply_is_drift() {
        let expected = [
            applied("ServiceAccount", "sa", "u1", "10"),
            applied("Service", "svc", "u2", "11"),
        ];
        let cluster = |sa: Found, svc: Found| {
            move |o: &ObjectRef| {
                Some(if o.kind == "ServiceAccount" {
                    sa.clone()
                } else {
                    svc.clone()
                })
            }
        };
        let as_applied = || Some(("u1".to_string(), "10".to_string()));
        let svc = || Some(("u2".to_string(), "11".to_string()));
        let how = |found: Option<(&ObjectRef, &'static str)>| found.map(|(o, how)| (o.kind.clone(), how));
        assert_eq!(how(drifted(&expected, cluster(as_applied(), svc()))), None);
        assert_eq!(
            how(drifted(
                &expected,
                cluster(Some(("u1".into(), "12".into())), svc())
            )),
            Some(("ServiceAccount".into(), "written"))
        );
        assert_eq!(
            how(drifted(
                &expected,
                cluster(Some(("u9".into(), "10".into())), svc())
            )),
            Some(("ServiceAccount".into(), "re-created"))
        );
        assert_eq!(
            how(drifted(&expected, cluster(as_applied(), None))),
            Some(("Service".into(), "gone"))
        );
        assert_eq!(
            how(drifted(&expected, |_| None)),
            Some(("ServiceAccount".into(), "not readable"))
        );
        assert_eq!(how(drifted(&[], |_| None)), None, "nothing to compare");
    }

    #[test]
    fn only_ready_content_with_a_baseline_is_compared() {
        let deployment = ObjectRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("ns".into()),
            name: "op".into(),
        };
        let mark = |applied: Vec<AppliedObject>| ReadyMark {
            fingerprint: "f".into(),
            watched: vec![],
            applied,
        };
        let mut record = InstalledRevision {
            objects: vec![deployment, object("ServiceAccount", "sa")],
            ..InstalledRevision::default()
        };
        assert_eq!(expected_of(&record), None, "never ready");
        record.ready = Some(mark(vec![]));
        assert_eq!(
            expected_of(&record),
            Some(None),
            "ready, no baseline for its ServiceAccount"
        );
        let baseline = vec![applied("ServiceAccount", "sa", "u", "1")];
        record.ready = Some(mark(baseline.clone()));
        assert_eq!(expected_of(&record), Some(Some(baseline.as_slice())));
        record.rollout = Some(RolloutStart {
            fingerprint: "g".into(),
            started_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        });
        assert_eq!(expected_of(&record), None, "new content rolling out");
        // Only watched kinds: nothing to compare, and no baseline needed.
        let only_watched = InstalledRevision {
            objects: vec![],
            ready: Some(mark(vec![])),
            ..InstalledRevision::default()
        };
        assert_eq!(expected_of(&only_watched), Some(Some(&[][..])));
    }
}
