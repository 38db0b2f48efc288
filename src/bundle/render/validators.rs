//! Bundle validators, in upstream's order (`render/registryv1/registryv1.go` `BundleValidator`)
//! and with its messages (`validators/validator.go`). Each returns its errors sorted as upstream.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::bundle::csv::{INSTALL_MODE_ALL_NAMESPACES, WEBHOOK_CONVERSION};
use crate::bundle::registry_v1::RegistryV1Bundle;

/// Kinds allowed among a bundle's other manifests, and whether each is namespaced
/// (operator-registry `pkg/lib/bundle/supported_resources.go`, including its choices).
pub const SUPPORTED_KINDS: [(&str, bool); 22] = [
    ("ClusterServiceVersion", true),
    ("CustomResourceDefinition", false),
    ("ClusterRole", false),
    ("ClusterRoleBinding", false),
    ("Service", true),
    ("ServiceAccount", true),
    ("Role", true),
    ("RoleBinding", true),
    ("PrometheusRule", true),
    ("ServiceMonitor", true),
    ("Secret", true),
    ("ConfigMap", true),
    ("PodDisruptionBudget", true),
    ("PriorityClass", false),
    ("VerticalPodAutoscaler", false),
    ("ConsoleYAMLSample", false),
    ("ConsoleQuickStart", false),
    ("ConsoleCLIDownload", false),
    ("ConsoleLink", false),
    ("ConsolePlugin", false),
    ("NetworkPolicy", true),
    ("PodMonitor", true),
];

/// `Some(namespaced)` for a supported kind, `None` otherwise.
pub fn supported_kind(kind: &str) -> Option<bool> {
    SUPPORTED_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, namespaced)| *namespaced)
}

/// Runs every validator; the messages of all failures, in upstream's order.
pub fn validate(bundle: &RegistryV1Bundle) -> Vec<String> {
    let checks: [fn(&RegistryV1Bundle) -> Vec<String>; 15] = [
        deployment_spec_uniqueness,
        deployment_name_is_dns1123_subdomain,
        crd_resource_uniqueness,
        owned_crd_existence,
        package_name_not_empty,
        conversion_webhook_support,
        webhook_deployment_referential_integrity,
        webhook_name_uniqueness,
        webhook_name_is_dns1123_subdomain,
        conversion_webhook_crd_reference_uniqueness,
        conversion_webhooks_reference_owned_crds,
        webhook_rules,
        object_support,
        api_service_deployment_referential_integrity,
        api_service_name_uniqueness,
    ];
    checks.iter().flat_map(|check| check(bundle)).collect()
}

fn crd_name(crd: &Value) -> &str {
    crd.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn duplicates<'a>(names: impl Iterator<Item = &'a str>) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut dups = BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            dups.insert(name);
        }
    }
    dups
}

fn deployment_spec_uniqueness(b: &RegistryV1Bundle) -> Vec<String> {
    duplicates(
        b.csv
            .spec
            .install
            .spec
            .deployments
            .iter()
            .map(|d| d.name.as_str()),
    )
    .into_iter()
    .map(|d| format!("cluster service version contains duplicate strategy deployment spec '{d}'"))
    .collect()
}

fn deployment_name_is_dns1123_subdomain(b: &RegistryV1Bundle) -> Vec<String> {
    let mut by_name = BTreeMap::new();
    for dep in &b.csv.spec.install.spec.deployments {
        let errs = dns1123_subdomain_errors(&dep.name);
        if !errs.is_empty() {
            by_name.insert(dep.name.as_str(), errs);
        }
    }
    by_name
        .into_iter()
        .map(|(name, errs)| {
            format!(
                "invalid cluster service version strategy deployment name '{name}': {}",
                errs.join(", ")
            )
        })
        .collect()
}

fn owned_crd_existence(b: &RegistryV1Bundle) -> Vec<String> {
    let present: BTreeSet<&str> = b.crds.iter().map(crd_name).collect();
    let missing: BTreeSet<&str> = b
        .csv
        .spec
        .customresourcedefinitions
        .owned
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| !present.contains(n))
        .collect();
    missing
        .into_iter()
        .map(|n| format!("cluster service definition references owned custom resource definition '{n}' not found in bundle"))
        .collect()
}

fn crd_resource_uniqueness(b: &RegistryV1Bundle) -> Vec<String> {
    duplicates(b.crds.iter().map(crd_name))
        .into_iter()
        .map(|n| format!("bundle contains duplicate custom resource definition '{n}'"))
        .collect()
}

fn package_name_not_empty(b: &RegistryV1Bundle) -> Vec<String> {
    if b.package_name.is_empty() {
        vec!["package name is empty".to_string()]
    } else {
        Vec::new()
    }
}

/// Go's `%v` of a sorted `[]InstallModeType`.
pub(crate) fn supported_modes_text(b: &RegistryV1Bundle) -> String {
    let modes: BTreeSet<&str> = b
        .csv
        .spec
        .install_modes
        .iter()
        .filter(|m| m.supported)
        .map(|m| m.type_.as_str())
        .collect();
    format!("[{}]", modes.into_iter().collect::<Vec<_>>().join(" "))
}

fn conversion_webhook_support(b: &RegistryV1Bundle) -> Vec<String> {
    let names: Vec<&str> = b
        .csv
        .spec
        .webhookdefinitions
        .iter()
        .filter(|w| w.type_ == WEBHOOK_CONVERSION)
        .map(|w| w.generate_name.as_str())
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    let modes: BTreeSet<&str> = b
        .csv
        .spec
        .install_modes
        .iter()
        .filter(|m| m.supported)
        .map(|m| m.type_.as_str())
        .collect();
    if modes.len() == 1 && modes.contains(INSTALL_MODE_ALL_NAMESPACES) {
        return Vec::new();
    }
    let modes_text = supported_modes_text(b);
    names
        .into_iter()
        .map(|n| {
            format!(
                "bundle contains conversion webhook {n:?} and supports install modes {modes_text} - conversion webhooks \
                 are only supported for bundles that only support AllNamespaces install mode"
            )
        })
        .collect()
}

fn webhook_deployment_referential_integrity(b: &RegistryV1Bundle) -> Vec<String> {
    let deployments: BTreeSet<&str> = b
        .csv
        .spec
        .install
        .spec
        .deployments
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    let mut dangling: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for wh in &b.csv.spec.webhookdefinitions {
        if !deployments.contains(wh.deployment_name.as_str()) {
            dangling
                .entry(&wh.deployment_name)
                .or_default()
                .push((&wh.type_, &wh.generate_name));
        }
    }
    let mut errs = Vec::new();
    for (deployment, mut webhooks) in dangling {
        webhooks.sort();
        for (type_, name) in webhooks {
            errs.push(format!(
                "webhook of type '{type_}' with name '{name}' references non-existent deployment '{deployment}'"
            ));
        }
    }
    errs
}

fn webhook_name_uniqueness(b: &RegistryV1Bundle) -> Vec<String> {
    let mut seen: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut dups: BTreeSet<(&str, &str)> = BTreeSet::new();
    for wh in &b.csv.spec.webhookdefinitions {
        let key = (wh.type_.as_str(), wh.generate_name.as_str());
        if !seen.insert(key) {
            dups.insert(key);
        }
    }
    dups.into_iter()
        .map(|(t, n)| format!("duplicate webhook '{n}' of type '{t}'"))
        .collect()
}

fn webhook_name_is_dns1123_subdomain(b: &RegistryV1Bundle) -> Vec<String> {
    let mut invalid: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for wh in &b.csv.spec.webhookdefinitions {
        let errs = dns1123_subdomain_errors(&wh.generate_name);
        if !errs.is_empty() {
            invalid.insert((&wh.type_, &wh.generate_name), errs);
        }
    }
    invalid
        .into_iter()
        .map(|((t, n), errs)| format!("webhook of type '{t}' has invalid name '{n}': {}", errs.join(",")))
        .collect()
}

fn conversion_webhook_crd_reference_uniqueness(b: &RegistryV1Bundle) -> Vec<String> {
    let mut by_crd: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for wh in b
        .csv
        .spec
        .webhookdefinitions
        .iter()
        .filter(|w| w.type_ == WEBHOOK_CONVERSION)
    {
        for crd in &wh.conversion_crds {
            by_crd.entry(crd).or_default().push(&wh.generate_name);
        }
    }
    by_crd
        .into_iter()
        .filter(|(_, whs)| whs.len() > 1)
        .map(|(crd, mut whs)| {
            whs.sort();
            format!(
                "conversion webhooks [{}] reference same custom resource definition '{crd}'",
                whs.join(",")
            )
        })
        .collect()
}

fn conversion_webhooks_reference_owned_crds(b: &RegistryV1Bundle) -> Vec<String> {
    let mut webhooks: Vec<_> = b
        .csv
        .spec
        .webhookdefinitions
        .iter()
        .filter(|w| w.type_ == WEBHOOK_CONVERSION)
        .collect();
    if webhooks.is_empty() {
        return Vec::new();
    }
    let owned: BTreeSet<&str> = b
        .csv
        .spec
        .customresourcedefinitions
        .owned
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    webhooks.sort_by(|a, c| a.generate_name.cmp(&c.generate_name));
    let mut errs = Vec::new();
    for wh in webhooks {
        let mut crds: Vec<&str> = wh.conversion_crds.iter().map(String::as_str).collect();
        crds.sort();
        for crd in crds.into_iter().filter(|c| !owned.contains(c)) {
            errs.push(format!(
                "conversion webhook '{}' references custom resource definition '{crd}' not owned bundle",
                wh.generate_name
            ));
        }
    }
    errs
}

fn webhook_rules(b: &RegistryV1Bundle) -> Vec<String> {
    const FORBIDDEN_GROUPS: [&str; 2] = ["olm.operatorframework.io", "*"];
    const FORBIDDEN_ADMISSION_RESOURCES: [&str; 5] = [
        "*",
        "mutatingwebhookconfiguration",
        "mutatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        "validatingwebhookconfigurations",
    ];
    let mut errs = Vec::new();
    for wh in b
        .csv
        .spec
        .webhookdefinitions
        .iter()
        .filter(|w| w.type_ != WEBHOOK_CONVERSION)
    {
        for rule in wh.rules.iter().flatten() {
            for group in rule.api_groups.iter().flatten() {
                if FORBIDDEN_GROUPS.contains(&group.as_str()) {
                    errs.push(format!(
                        "webhook {:?} contains forbidden rule: admission webhook rules cannot reference API group {group:?}",
                        wh.generate_name
                    ));
                }
                if group == "admissionregistration.k8s.io" {
                    for resource in rule.resources.iter().flatten() {
                        if FORBIDDEN_ADMISSION_RESOURCES.contains(&resource.to_lowercase().as_str()) {
                            errs.push(format!(
                                "webhook {:?} contains forbidden rule: admission webhook rules cannot reference resource \
                                 {resource:?} for API group {group:?}",
                                wh.generate_name
                            ));
                        }
                    }
                }
            }
        }
    }
    errs
}

fn object_support(b: &RegistryV1Bundle) -> Vec<String> {
    b.others
        .iter()
        .filter_map(|o| {
            let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
            let name = o
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            supported_kind(kind)
                .is_none()
                .then(|| format!("unsupported resource {name:?} with kind {kind:?}"))
        })
        .collect()
}

/// Each owned APIService names a Deployment of the install strategy (upstream's
/// `CheckAPIServiceDeploymentReferentialIntegrity`, its message; an APIService naming none, which
/// upstream lets through to a Service named `-service`, is refused too: nothing would serve it).
fn api_service_deployment_referential_integrity(b: &RegistryV1Bundle) -> Vec<String> {
    let deployments: BTreeSet<&str> = b
        .csv
        .spec
        .install
        .spec
        .deployments
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    b.csv
        .spec
        .apiservicedefinitions
        .owned
        .iter()
        .filter(|a| !deployments.contains(a.deployment_name.as_str()))
        .map(|a| {
            let name = a.api_service_name();
            if a.deployment_name.is_empty() {
                format!("owned apiservice {name:?} names no deployment: deploymentName must name a deployment of the CSV install spec")
            } else {
                format!(
                    "owned apiservice {name:?} references deployment {:?} which does not exist in the CSV install spec",
                    a.deployment_name
                )
            }
        })
        .collect()
}

/// Each owned APIService (`<version>.<group>`) is a valid object name and is owned once.
fn api_service_name_uniqueness(b: &RegistryV1Bundle) -> Vec<String> {
    let owned = &b.csv.spec.apiservicedefinitions.owned;
    let mut errs: Vec<String> = owned
        .iter()
        .filter(|a| !crate::bundle::render::config::is_dns1123_label_chars(&a.version) || !is_dns1123_subdomain_chars(&a.group))
        .map(|a| {
            format!(
                "owned apiservice {:?} is not a valid APIService: version must be a DNS-1123 label and group a DNS-1123 subdomain",
                a.api_service_name()
            )
        })
        .collect();
    let names: Vec<String> = owned.iter().map(|a| a.api_service_name()).collect();
    errs.extend(
        duplicates(names.iter().map(String::as_str))
            .into_iter()
            .map(|n| format!("owned apiservice {n:?} is listed more than once")),
    );
    errs
}

/// Kubernetes' `validation.IsDNS1123Subdomain`, messages sorted as the validators sort them.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !is_dns1123_subdomain_chars(value) {
        errs.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must \
             start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                .to_string(),
        );
    }
    errs.sort();
    errs
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`.
pub fn is_dns1123_subdomain_chars(value: &str) -> bool {
    !value.is_empty()
        && value
            .split('.')
            .all(crate::bundle::render::config::is_dns1123_label_chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1123_subdomains() {
        assert!(is_dns1123_subdomain_chars("a.b-c.d9"));
        assert!(!is_dns1123_subdomain_chars("a..b"));
        assert!(!is_dns1123_subdomain_chars("-a"));
        assert!(!is_dns1123_subdomain_chars("A"));
        assert!(!is_dns1123_subdomain_chars(""));
        let errs = dns1123_subdomain_errors(&"-".repeat(254));
        assert_eq!(errs.len(), 2);
        assert!(errs[0].starts_with("a lowercase RFC 1123 subdomain"));
        assert_eq!(errs[1], "must be no more than 253 characters");
    }
}
