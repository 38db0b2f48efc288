//! The preflights' I/O: reading installed CRDs, API discovery, and asking the API server with
//! SubjectAccessReview what the service account may do. The client used here is the caller's
//! (the controller's own identity): it needs `get` on customresourcedefinitions, `create` on
//! subjectaccessreviews, `get` on roles and clusterroles, and discovery.

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::permissions::{
    Access, AccessPlan, AccessPolicy, AccessTarget, ResourceTable, RoleRef, ServiceAccountRef,
    required_access,
};
use super::{CrdUpgradeError, PreflightError, check_crd_upgrade};
use crate::apply::lookups::ClusterLookups;
use crate::apply::revision::ObjectRef;

/// How many SubjectAccessReviews are in flight at once: enough to finish a typical bundle's
/// hundred reviews in a few round trips, few enough not to flood the API server.
pub const MAX_CONCURRENT_REVIEWS: usize = 16;

fn is_crd(obj: &Value) -> bool {
    obj.get("apiVersion").and_then(Value::as_str) == Some("apiextensions.k8s.io/v1")
        && obj.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
}

fn object_name(obj: &Value) -> String {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn decode_crd(obj: &Value) -> Result<CustomResourceDefinition, PreflightError> {
    serde_json::from_value(obj.clone()).map_err(|e| PreflightError::InvalidCrd {
        name: object_name(obj),
        reason: e.to_string(),
    })
}

/// CRD upgrade safety for every `apiextensions.k8s.io/v1` CustomResourceDefinition in `objects`
/// that already exists (read with `client`); a CRD not installed yet passes. All unsafe CRDs are
/// reported together ([`PreflightError::CrdUpgradeUnsafe`]).
pub async fn check_crd_upgrades(client: &Client, objects: &[Value]) -> Result<(), PreflightError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut unsafe_crds: Vec<CrdUpgradeError> = Vec::new();
    for obj in objects.iter().filter(|o| is_crd(o)) {
        let new = decode_crd(obj)?;
        let name = new.metadata.name.clone().unwrap_or_default();
        let installed = api
            .get_opt(&name)
            .await
            .map_err(|source| PreflightError::ReadExistingCrd {
                name: name.clone(),
                source,
            })?;
        let Some(old) = installed else { continue };
        if let Err(e) = check_crd_upgrade(&old, &new) {
            unsafe_crds.push(e);
        }
    }
    if unsafe_crds.is_empty() {
        Ok(())
    } else {
        Err(PreflightError::CrdUpgradeUnsafe(unsafe_crds))
    }
}

/// The kind -> resource table for `objects`: what the API server's discovery lists (aggregated
/// discovery, or the classic per-group walk when that is not served), plus the CRDs in `objects`
/// (their custom resources may be applied in the same go, before discovery knows them).
pub async fn discover_resources(
    client: &Client,
    lookups: &ClusterLookups,
    objects: &[Value],
) -> Result<ResourceTable, PreflightError> {
    let discovery = lookups
        .discovery(client)
        .await
        .map_err(PreflightError::Discovery)?;
    let mut table = ResourceTable::new();
    table.add_discovery(&discovery);
    for obj in objects.iter().filter(|o| is_crd(o)) {
        table.add_crd(&decode_crd(obj)?);
    }
    Ok(table)
}

/// The whole permission preflight: discovers resources, computes what applying `objects` and
/// pruning the rest of `previous` needs under `policy`, plus the requests in `also`, and reviews it
/// for `service_account`.
/// `Err(PreflightError::MissingPermissions)` lists everything missing.
pub async fn check_permissions(
    client: &Client,
    lookups: &ClusterLookups,
    service_account: &ServiceAccountRef,
    objects: &[Value],
    previous: &[ObjectRef],
    policy: &AccessPolicy,
    also: &[Access],
) -> Result<(), PreflightError> {
    let resources = discover_resources(client, lookups, objects).await?;
    let mut plan = required_access(objects, previous, &service_account.namespace, &resources, policy)?;
    for access in also {
        plan.require(access.clone());
    }
    review_access(client, lookups, service_account, &plan).await
}

/// Reviews a plan with SubjectAccessReview (at most [`MAX_CONCURRENT_REVIEWS`] at a time): first
/// every access and `escalate`/`bind`, then the rules of roles whose `escalate`/`bind` is denied
/// (reading roles the bundle does not define from the cluster).
pub async fn review_access(
    client: &Client,
    lookups: &ClusterLookups,
    service_account: &ServiceAccountRef,
    plan: &AccessPlan,
) -> Result<(), PreflightError> {
    let mut decisions = review_all(client, lookups, service_account, plan.first_round()).await?;
    let roles = fetch_roles(client, lookups, service_account, plan.roles_to_fetch(&decisions)).await?;
    let second: BTreeSet<Access> = plan
        .second_round(&decisions, &roles)
        .into_iter()
        .filter(|a| !decisions.contains_key(a))
        .collect();
    decisions.extend(review_all(client, lookups, service_account, second).await?);
    match plan.missing(service_account, &decisions, &roles) {
        Some(missing) => Err(missing.into()),
        None => Ok(()),
    }
}

fn review_error(service_account: &ServiceAccountRef) -> impl Fn(kube::Error) -> PreflightError + '_ {
    move |source| PreflightError::AccessReview {
        service_account: service_account.to_string(),
        source,
    }
}

/// Answers every access: allowed ones kept by `lookups` without a request, the rest reviewed.
async fn review_all(
    client: &Client,
    lookups: &ClusterLookups,
    service_account: &ServiceAccountRef,
    accesses: BTreeSet<Access>,
) -> Result<BTreeMap<Access, bool>, PreflightError> {
    let generation = lookups.rbac_generation();
    let (kept, to_ask): (BTreeSet<Access>, BTreeSet<Access>) = accesses
        .into_iter()
        .partition(|access| lookups.allowed(service_account, access));
    let mut decisions: BTreeMap<Access, bool> = kept.into_iter().map(|access| (access, true)).collect();
    let asked = ask_reviews(client, service_account, to_ask).await?;
    lookups.remember_reviews(service_account, &asked, generation);
    decisions.extend(asked);
    Ok(decisions)
}

async fn ask_reviews(
    client: &Client,
    service_account: &ServiceAccountRef,
    accesses: BTreeSet<Access>,
) -> Result<BTreeMap<Access, bool>, PreflightError> {
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let api = &api;
    stream::iter(accesses)
        .map(|access| async move {
            let review = subject_access_review(service_account, &access);
            let answer = api.create(&PostParams::default(), &review).await?;
            let allowed = answer.status.is_some_and(|s| s.allowed);
            Ok::<_, kube::Error>((access, allowed))
        })
        .buffer_unordered(MAX_CONCURRENT_REVIEWS)
        .try_collect()
        .await
        .map_err(review_error(service_account))
}

/// The SubjectAccessReview asking whether `service_account` may make request `access`.
fn subject_access_review(service_account: &ServiceAccountRef, access: &Access) -> SubjectAccessReview {
    let mut spec = SubjectAccessReviewSpec {
        user: Some(service_account.user_name()),
        groups: Some(service_account.groups()),
        ..Default::default()
    };
    match &access.target {
        AccessTarget::Resource {
            namespace,
            group,
            resource,
            subresource,
            name,
        } => {
            spec.resource_attributes = Some(ResourceAttributes {
                namespace: namespace.clone(),
                verb: Some(access.verb.clone()),
                group: Some(group.clone()),
                resource: Some(resource.clone()),
                subresource: subresource.clone(),
                name: name.clone(),
                ..Default::default()
            });
        }
        AccessTarget::NonResource { path } => {
            spec.non_resource_attributes = Some(NonResourceAttributes {
                path: Some(path.clone()),
                verb: Some(access.verb.clone()),
            });
        }
    }
    SubjectAccessReview {
        metadata: Default::default(),
        spec,
        status: None,
    }
}

async fn fetch_roles(
    client: &Client,
    lookups: &ClusterLookups,
    service_account: &ServiceAccountRef,
    roles: BTreeSet<RoleRef>,
) -> Result<BTreeMap<RoleRef, Vec<PolicyRule>>, PreflightError> {
    let mut out = BTreeMap::new();
    let generation = lookups.rbac_generation();
    for role in roles {
        if let Some(rules) = lookups.role_rules(&role) {
            out.insert(role, rules);
            continue;
        }
        let rules = match &role.namespace {
            Some(ns) if role.kind == "Role" => {
                let api: Api<Role> = Api::namespaced(client.clone(), ns);
                api.get_opt(&role.name)
                    .await
                    .map_err(review_error(service_account))?
                    .map(|r| r.rules.unwrap_or_default())
            }
            _ => {
                let api: Api<ClusterRole> = Api::all(client.clone());
                api.get_opt(&role.name)
                    .await
                    .map_err(review_error(service_account))?
                    .map(|r| r.rules.unwrap_or_default())
            }
        };
        // A role that does not exist stays out of the map: binding it needs `bind`.
        if let Some(rules) = rules {
            lookups.remember_role(&role, &rules, generation);
            out.insert(role, rules);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_asks_as_the_service_account_with_its_groups() {
        let sa = ServiceAccountRef::new("ops", "installer");
        let access = Access::resource("patch", "apps", "deployments", Some("x"), Some("op"));
        let review = subject_access_review(&sa, &access);
        assert_eq!(
            review.spec.user.as_deref(),
            Some("system:serviceaccount:ops:installer")
        );
        assert_eq!(
            review.spec.groups.unwrap(),
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ops",
                "system:authenticated"
            ]
        );
        let attrs = review.spec.resource_attributes.unwrap();
        assert_eq!(attrs.verb.as_deref(), Some("patch"));
        assert_eq!(attrs.group.as_deref(), Some("apps"));
        assert_eq!(attrs.resource.as_deref(), Some("deployments"));
        assert_eq!(attrs.namespace.as_deref(), Some("x"));
        assert_eq!(attrs.name.as_deref(), Some("op"));
        assert!(review.spec.non_resource_attributes.is_none());

        let review = subject_access_review(&sa, &Access::non_resource("get", "/metrics"));
        let attrs = review.spec.non_resource_attributes.unwrap();
        assert_eq!(
            (attrs.path.as_deref(), attrs.verb.as_deref()),
            (Some("/metrics"), Some("get"))
        );
        assert!(review.spec.resource_attributes.is_none());
    }
}
