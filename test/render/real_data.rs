//! Every bundle of `../shared/catalogs/*-v4.16` that carries `olm.bundle.object`, rendered for
//! AllNamespaces (and OwnNamespace where its CSV allows): each renders to objects valid for their
//! kind or is refused with an upstream message. Snapshots pin a sample; counts are pinned too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use olmv1::admin::render::{OutputFormat, format_objects};
use olmv1::bundle::csv::{INSTALL_MODE_OWN_NAMESPACE, INSTALL_MODE_SINGLE_NAMESPACE};
use olmv1::bundle::registry_v1::RegistryV1Bundle;
use olmv1::bundle::render::{render, render_for_watch_namespace};
use serde_json::Value;

use crate::{
    common::str_at,
    support::{CatalogBundle, Snapshots},
};

/// Install namespace used for every real bundle.
pub const INSTALL_NS: &str = "operators";

/// The shared real catalogs; the test fails when they are missing.
pub fn catalogs_root() -> PathBuf {
    crate::support::shared_catalogs_root()
}

/// Every `olm.bundle` with at least one `olm.bundle.object` in the `*-v4.16` catalogs, read once
/// per test process with the project's FBC reader.
pub fn real_bundles() -> &'static [CatalogBundle] {
    static BUNDLES: std::sync::OnceLock<Vec<CatalogBundle>> = std::sync::OnceLock::new();
    BUNDLES.get_or_init(crate::support::read_v4_16_bundles)
}

/// The upstream refusal a message is, as a short label; `None` for a message upstream never gives.
pub fn refusal_reason(message: &str) -> Option<&'static str> {
    const KNOWN: [(&str, &str); 17] = [
        (
            "unsupported bundle: apiServiceDefintions are not supported",
            "owned APIServices",
        ),
        (
            "unsupported bundle: bundle must support at least one of",
            "no AllNamespaces/SingleNamespace/OwnNamespace",
        ),
        ("unsupported bundle: ", "unsupported bundle (other)"),
        (
            "invalid ClusterExtension configuration: invalid configuration: required field \"watchNamespace\" is missing",
            "watchNamespace required (no AllNamespaces)",
        ),
        (
            "invalid ClusterExtension configuration: ",
            "invalid configuration (other)",
        ),
        (
            "cluster service version contains duplicate strategy deployment spec",
            "duplicate deployment",
        ),
        (
            "invalid cluster service version strategy deployment name",
            "invalid deployment name",
        ),
        (
            "bundle contains duplicate custom resource definition",
            "duplicate CRD",
        ),
        (
            "cluster service definition references owned custom resource definition",
            "owned CRD missing",
        ),
        ("package name is empty", "empty package name"),
        (
            "bundle contains conversion webhook",
            "conversion webhook without AllNamespaces-only",
        ),
        ("webhook of type", "webhook deployment/name invalid"),
        ("duplicate webhook", "duplicate webhook"),
        ("conversion webhook", "conversion webhook CRD reference"),
        ("webhook \"", "forbidden webhook rule"),
        ("unsupported resource", "unsupported resource kind"),
        ("custom resource definition '", "conversion CRD invalid"),
    ];
    KNOWN
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map(|(_, label)| *label)
}

/// Checks that `object` is valid for its kind: typed kinds deserialise into their k8s-openapi
/// type; every object has apiVersion, kind and a name.
pub fn check_object(object: &Value) -> Result<(), String> {
    fn typed<T: serde::de::DeserializeOwned>(object: &Value) -> Result<(), String> {
        serde_json::from_value::<T>(object.clone())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    let kind = str_at(object, "/kind");
    let api_version = str_at(object, "/apiVersion");
    if kind.is_empty() || api_version.is_empty() || str_at(object, "/metadata/name").is_empty() {
        return Err("missing apiVersion, kind or metadata.name".to_string());
    }
    match (api_version, kind) {
        ("v1", "ServiceAccount") => typed::<ServiceAccount>(object),
        ("v1", "Service") => typed::<Service>(object),
        ("v1", "ConfigMap") => typed::<ConfigMap>(object),
        ("v1", "Secret") => typed::<Secret>(object),
        ("apps/v1", "Deployment") => typed::<Deployment>(object),
        ("rbac.authorization.k8s.io/v1", "Role") => typed::<Role>(object),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => typed::<RoleBinding>(object),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => typed::<ClusterRole>(object),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => typed::<ClusterRoleBinding>(object),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => typed::<CustomResourceDefinition>(object),
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            typed::<ValidatingWebhookConfiguration>(object)
        }
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
            typed::<MutatingWebhookConfiguration>(object)
        }
        ("scheduling.k8s.io/v1", "PriorityClass") => typed::<PriorityClass>(object),
        ("networking.k8s.io/v1", "NetworkPolicy") => typed::<NetworkPolicy>(object),
        ("policy/v1", "PodDisruptionBudget") => typed::<PodDisruptionBudget>(object),
        (_, "Deployment" | "Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding" | "Service") => Err(
            format!("generated {kind} has unexpected apiVersion {api_version}"),
        ),
        // Custom resources (ServiceMonitor, Issuer, ConsolePlugin, ...) and older API versions
        // of bundled manifests are applied as written.
        _ => Ok(()),
    }
}

/// Outcome counts of the whole run.
#[derive(Default, Debug)]
pub struct Tally {
    pub bundles: usize,
    pub all_namespaces_rendered: usize,
    pub own_namespace_rendered: usize,
    pub own_namespace_attempted: usize,
    pub single_namespace_rendered: usize,
    pub single_namespace_attempted: usize,
    pub objects: usize,
    pub refused: BTreeMap<String, usize>,
    pub load_errors: Vec<String>,
}

fn record(
    tally: &mut Tally,
    bundle: &str,
    mode: &str,
    result: Result<Vec<Value>, String>,
) -> Option<Vec<Value>> {
    match result {
        Ok(objects) => {
            for object in &objects {
                if let Err(e) = check_object(object) {
                    panic!(
                        "bundle {bundle} ({mode}): {} {:?} is not valid: {e}",
                        str_at(object, "/kind"),
                        str_at(object, "/metadata/name")
                    );
                }
            }
            tally.objects += objects.len();
            Some(objects)
        }
        Err(message) => {
            let reason = refusal_reason(&message).unwrap_or_else(|| {
                panic!("bundle {bundle} ({mode}) refused with a non-upstream message: {message}")
            });
            *tally.refused.entry(format!("{mode}: {reason}")).or_default() += 1;
            None
        }
    }
}

/// Bundles whose rendering is pinned in `test/snapshots/render/<name>.yaml`.
/// AllNamespaces renderings go to `<catalog>__<bundle>.yaml`, OwnNamespace ones to
/// `<catalog>__<bundle>.own-namespace.yaml`.
const SNAPSHOT_BUNDLES: [&str; 6] = [
    "community-operators-v4.16/kube-green.v0.7.1",
    "community-operators-v4.16/apicurio-registry-3.v3.3.1",
    "community-operators-v4.16/trident-operator.v25.10.0",
    "certified-operators-v4.16/zookeeper-operator.v25.11.0",
    "certified-operators-v4.16/hulft.v10.3.0",
    "certified-operators-v4.16/nvidia-network-operator.v24.7.0",
];

fn snapshot_path(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test/snapshots/render")
        .join(format!("{}.yaml", id.replace('/', "__")))
}

#[test]
fn real_catalog_bundles_render_or_are_refused_as_upstream() {
    render_every_real_bundle(Snapshots::Compare);
}

/// Renders every real bundle; the snapshot bundles' renderings are compared (or written).
pub fn render_every_real_bundle(snapshots: Snapshots) {
    let started = std::time::Instant::now();
    let bundles = real_bundles();
    let mut tally = Tally {
        bundles: bundles.len(),
        ..Default::default()
    };
    let mut snapshots_seen = Vec::new();
    for b in bundles {
        let id = format!("{}/{}", b.catalog, b.name);
        let bundle = match RegistryV1Bundle::from_catalog_bundle(&b.package, &b.name, &b.properties) {
            Ok(bundle) => bundle,
            Err(e) => {
                tally.load_errors.push(format!("{id}: {e}"));
                continue;
            }
        };
        let all_ns = record(
            &mut tally,
            &id,
            "AllNamespaces",
            render(&bundle, INSTALL_NS, None).map_err(|e| e.to_string()),
        );
        let snapshot = SNAPSHOT_BUNDLES.contains(&id.as_str());
        if let Some(objects) = &all_ns {
            tally.all_namespaces_rendered += 1;
            if snapshot {
                check_snapshot(snapshots, &id, objects);
                snapshots_seen.push(id.clone());
            }
        }
        // Bundles that support neither AllNamespaces nor OwnNamespace get a SingleNamespace try,
        // so every bundle is rendered in at least one mode it supports.
        if all_ns.is_none()
            && !bundle.csv.supports(INSTALL_MODE_OWN_NAMESPACE)
            && bundle.csv.supports(INSTALL_MODE_SINGLE_NAMESPACE)
        {
            tally.single_namespace_attempted += 1;
            let single =
                render_for_watch_namespace(&bundle, INSTALL_NS, Some("watched")).map_err(|e| e.to_string());
            if record(&mut tally, &id, "SingleNamespace", single).is_some() {
                tally.single_namespace_rendered += 1;
            }
        }
        if bundle.csv.supports(INSTALL_MODE_OWN_NAMESPACE) {
            tally.own_namespace_attempted += 1;
            let own =
                render_for_watch_namespace(&bundle, INSTALL_NS, Some(INSTALL_NS)).map_err(|e| e.to_string());
            if let Some(objects) = record(&mut tally, &id, "OwnNamespace", own) {
                tally.own_namespace_rendered += 1;
                if snapshot {
                    check_snapshot(snapshots, &format!("{id}.own-namespace"), &objects);
                    snapshots_seen.push(id.clone());
                }
            }
        }
    }
    println!("real-data render tally ({:.1?}): {tally:#?}", started.elapsed());
    assert!(
        tally.load_errors.is_empty(),
        "bundles that failed to load: {:#?}",
        tally.load_errors
    );
    snapshots_seen.sort();
    snapshots_seen.dedup();
    let mut expected: Vec<String> = SNAPSHOT_BUNDLES.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(
        snapshots_seen, expected,
        "every snapshot bundle must exist and render"
    );
    // Pinned: the catalogs are fixed data, so any change here is a behaviour change.
    assert_eq!(
        (
            tally.bundles,
            tally.all_namespaces_rendered,
            tally.own_namespace_attempted,
            tally.own_namespace_rendered,
            tally.single_namespace_attempted,
            tally.single_namespace_rendered,
        ),
        EXPECTED_COUNTS,
        "counts changed: {tally:#?}"
    );
}

/// (bundles, rendered for AllNamespaces, OwnNamespace attempted, rendered for OwnNamespace,
/// SingleNamespace attempted (neither All nor Own supported), rendered for SingleNamespace).
const EXPECTED_COUNTS: (usize, usize, usize, usize, usize, usize) = (600, 458, 319, 319, 0, 0);

/// Compares (or writes) the YAML of `objects` with `test/snapshots/render/<name>.yaml`.
pub fn check_snapshot(snapshots: Snapshots, name: &str, objects: &[Value]) {
    let text = format_objects(objects, OutputFormat::Yaml).expect("formats");
    if let Err(e) = snapshots.check(&snapshot_path(name), &text) {
        panic!("rendering of {name}: {e}");
    }
}
