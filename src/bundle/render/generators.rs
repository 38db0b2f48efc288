//! The generators, in upstream's order: ServiceAccounts, Roles/RoleBindings,
//! ClusterRoles/ClusterRoleBindings, CRDs, other manifests, the OperatorCondition with its Role and
//! RoleBinding (when asked), Deployments, validating and mutating webhook configurations, the
//! Services of webhook- and APIService-serving Deployments, owned APIServices with their
//! authentication bindings, the certificate provider's objects (cert-manager Issuers and
//! Certificates; none for OpenShift's service CA).
//!
//! Where upstream iterates a Go set (service accounts, cert-provider objects) its order is random;
//! here it is sorted by name, so output is deterministic.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, KeyToPath, PodSpec, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use olmv1_api::operator_condition::{self, ENV_OPERATOR_CONDITION_NAME};
use serde_json::{Map, Value, json};

use crate::bundle::csv::{
    ApiServiceDescription, PermissionRule, StrategyDeployment, StrategyPermissions, WEBHOOK_CONVERSION,
    WEBHOOK_MUTATING, WEBHOOK_VALIDATING, WebhookDescription,
};
use crate::bundle::registry_v1::RegistryV1Bundle;
use crate::bundle::render::config::DeploymentConfig;
use crate::bundle::render::names::{
    MAX_NAME_LENGTH, object_name_for_base_and_suffix, permission_object_name,
};
use crate::bundle::render::validators::supported_kind;

/// cert-manager's CA injection annotation.
pub const INJECT_CA_ANNOTATION: &str = "cert-manager.io/inject-ca-from";
/// OpenShift service CA: inject the CA bundle into this webhook configuration or CRD.
pub const SERVICE_CA_INJECT_CABUNDLE_ANNOTATION: &str = "service.beta.openshift.io/inject-cabundle";
/// OpenShift service CA: issue this Service's serving certificate into the named Secret.
pub const SERVICE_CA_SERVING_CERT_ANNOTATION: &str = "service.beta.openshift.io/serving-cert-secret-name";
/// Pod-template annotation listing the watched namespaces (empty for all).
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";
/// Pod-template annotation naming the install namespace.
pub const OPERATOR_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";

const RBAC_API_VERSION: &str = "rbac.authorization.k8s.io/v1";
const API_REGISTRATION_API_VERSION: &str = "apiregistration.k8s.io/v1";
/// Where the API server keeps the client CA and request-header settings an aggregated API server
/// reads (its `extension-apiserver-authentication` ConfigMap).
pub const KUBE_SYSTEM: &str = "kube-system";
/// The ClusterRole letting an aggregated API server review tokens and access (TokenReview,
/// SubjectAccessReview): delegated authentication and authorization.
pub const AUTH_DELEGATOR_CLUSTER_ROLE: &str = "system:auth-delegator";
/// The Role in `kube-system` letting an aggregated API server read the
/// `extension-apiserver-authentication` ConfigMap.
pub const AUTH_READER_ROLE: &str = "extension-apiserver-authentication-reader";
/// OLM classic's APIService priorities (upstream's generator keeps them).
const API_SERVICE_GROUP_PRIORITY_MINIMUM: i32 = 2000;
const API_SERVICE_VERSION_PRIORITY: i32 = 15;
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const ADMISSION_API_VERSION: &str = "admissionregistration.k8s.io/v1";
const CERT_MANAGER_API_VERSION: &str = "cert-manager.io/v1";
/// OLM v0 parity: two-year certificates renewed a day before expiry (Go duration strings).
const CERT_DURATION: &str = "17520h0m0s";
const CERT_RENEW_BEFORE: &str = "24h0m0s";

/// (volume name, mount path, file for tls.crt, file for tls.key) of a certificate volume given to
/// webhook- and APIService-serving deployments.
type CertVolume = (&'static str, &'static str, &'static str, &'static str);
const WEBHOOK_CERT_VOLUME: CertVolume = (
    "webhook-cert",
    "/tmp/k8s-webhook-server/serving-certs",
    "tls.crt",
    "tls.key",
);
const API_SERVICE_CERT_VOLUME: CertVolume = (
    "apiservice-cert",
    "/apiserver.local.config/certificates",
    "apiserver.crt",
    "apiserver.key",
);
/// Upstream's order (`ensureCorrectDeploymentCertVolumes`).
const CERT_VOLUMES: [CertVolume; 2] = [WEBHOOK_CERT_VOLUME, API_SERVICE_CERT_VOLUME];
/// OLM classic's order (`AddDefaultCertVolumeAndVolumeMounts`).
const CLASSIC_CERT_VOLUMES: [CertVolume; 2] = [API_SERVICE_CERT_VOLUME, WEBHOOK_CERT_VOLUME];

/// Who issues webhook serving certificates and injects their CA (upstream's certificate providers,
/// feature gates `WebhookProviderCertManager` and `WebhookProviderOpenshiftServiceCA`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WebhookProvider {
    /// cert-manager: a self-signed Issuer and a Certificate per webhook deployment, CA injected
    /// with `cert-manager.io/inject-ca-from`.
    #[default]
    CertManager,
    /// OpenShift's service CA operator: the webhook Service asks for a serving certificate
    /// (`service.beta.openshift.io/serving-cert-secret-name`) and webhook configurations and
    /// conversion CRDs for the CA bundle (`service.beta.openshift.io/inject-cabundle`).
    OpenshiftServiceCa,
}

impl WebhookProvider {
    /// The CA-injection annotation for a webhook configuration or conversion CRD served by the
    /// Service whose certificate is `names`.
    fn ca_injection(self, install_namespace: &str, names: &CertNames) -> (&'static str, String) {
        match self {
            WebhookProvider::CertManager => (
                INJECT_CA_ANNOTATION,
                format!("{install_namespace}/{}", names.cert),
            ),
            WebhookProvider::OpenshiftServiceCa => {
                (SERVICE_CA_INJECT_CABUNDLE_ANNOTATION, "true".to_string())
            }
        }
    }

    /// The annotation the webhook Service itself carries, if any.
    fn service_annotation(self, names: &CertNames) -> Option<(&'static str, String)> {
        match self {
            WebhookProvider::CertManager => None,
            WebhookProvider::OpenshiftServiceCa => {
                Some((SERVICE_CA_SERVING_CERT_ANNOTATION, names.cert.clone()))
            }
        }
    }
}

/// Everything the generators read.
pub struct RenderContext<'a> {
    /// The bundle.
    pub bundle: &'a RegistryV1Bundle,
    /// Namespace the operator is installed into.
    pub install_namespace: &'a str,
    /// Watched namespaces; `[""]` means all namespaces.
    pub target_namespaces: Vec<String>,
    /// Deployment customisations, if configured.
    pub deployment_config: Option<&'a DeploymentConfig>,
    /// Who provides webhook certificates.
    pub webhook_provider: WebhookProvider,
    /// Whether the bundle gets its OperatorCondition ([`operator_condition`]).
    pub operator_conditions: bool,
}

impl RenderContext<'_> {
    fn all_namespaces(&self) -> bool {
        self.target_namespaces.len() == 1 && self.target_namespaces[0].is_empty()
    }

    fn csv_name(&self) -> &str {
        self.bundle.csv.name()
    }

    fn webhooks(&self) -> &[WebhookDescription] {
        &self.bundle.csv.spec.webhookdefinitions
    }

    fn api_services(&self) -> &[ApiServiceDescription] {
        &self.bundle.csv.spec.apiservicedefinitions.owned
    }

    /// Deployments that serve an owned APIService.
    fn api_service_deployments(&self) -> BTreeSet<&str> {
        self.api_services()
            .iter()
            .map(|a| a.deployment_name.as_str())
            .collect()
    }

    /// Deployments that need a serving certificate: those serving webhooks or APIServices.
    fn certificate_deployments(&self) -> BTreeSet<&str> {
        let mut deployments = self.api_service_deployments();
        deployments.extend(self.webhooks().iter().map(|w| w.deployment_name.as_str()));
        deployments
    }
}

/// Names of the serving Service and certificate of one deployment (`render.CertProvisionerFor`);
/// OLM classic names them the same (`<deployment>-service`, `<service>-cert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertNames {
    /// `<deployment with . as ->-service`, cut to upstream's budget.
    pub service: String,
    /// `<service>-cert`: the certificate's Secret (and cert-manager Certificate).
    pub cert: String,
}

/// The Service and certificate names for `deployment`.
pub fn cert_names(deployment: &str) -> CertNames {
    let service = object_name_for_base_and_suffix(&deployment.replace('.', "-"), "service");
    let cert = object_name_for_base_and_suffix(&service, "cert");
    CertNames { service, cert }
}

/// The webhook Service name for `deployment`, refused when longer than a Service name may be
/// (upstream would render it and fail at apply time).
fn webhook_service_name(deployment: &str) -> Result<CertNames, String> {
    let names = cert_names(deployment);
    if names.service.len() > MAX_NAME_LENGTH {
        return Err(format!(
            "webhook service name {:?} for deployment {deployment:?} is longer than {MAX_NAME_LENGTH} characters",
            names.service
        ));
    }
    Ok(names)
}

/// Runs every generator in order.
pub fn generate(ctx: &RenderContext<'_>) -> Result<Vec<Value>, String> {
    let mut objects = service_accounts(ctx);
    objects.extend(permissions(ctx));
    objects.extend(cluster_permissions(ctx));
    objects.extend(crds(ctx)?);
    objects.extend(others(ctx));
    if ctx.operator_conditions {
        // Before the Deployments: the operator reads it as it starts.
        objects.extend(operator_condition(ctx));
    }
    objects.extend(deployments(ctx)?);
    objects.extend(webhook_configurations(ctx, WEBHOOK_VALIDATING)?);
    objects.extend(webhook_configurations(ctx, WEBHOOK_MUTATING)?);
    objects.extend(services(ctx)?);
    objects.extend(api_services(ctx)?);
    if ctx.webhook_provider == WebhookProvider::CertManager {
        objects.extend(cert_manager_objects(ctx)?);
    }
    Ok(objects)
}

fn sa_name_or_default(name: &str) -> &str {
    if name.is_empty() { "default" } else { name }
}

/// One ServiceAccount per distinct account of permissions and clusterPermissions, except `default`.
pub fn service_accounts(ctx: &RenderContext<'_>) -> Vec<Value> {
    let spec = &ctx.bundle.csv.spec.install.spec;
    let names: BTreeSet<&str> = spec
        .permissions
        .iter()
        .chain(&spec.cluster_permissions)
        .map(|p| sa_name_or_default(&p.service_account_name))
        .filter(|n| *n != "default")
        .collect();
    names
        .into_iter()
        .map(|name| {
            json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": ctx.install_namespace},
            })
        })
        .collect()
}

/// Roles and RoleBindings in each target namespace; none in AllNamespaces mode (promoted instead).
pub fn permissions(ctx: &RenderContext<'_>) -> Vec<Value> {
    if ctx.all_namespaces() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for ns in &ctx.target_namespaces {
        for permission in &ctx.bundle.csv.spec.install.spec.permissions {
            let sa = sa_name_or_default(&permission.service_account_name);
            let name = permission_object_name(&format!("{}-{sa}", ctx.csv_name()), permission);
            out.push(json!({
                "apiVersion": RBAC_API_VERSION,
                "kind": "Role",
                "metadata": {"name": name, "namespace": ns},
                "rules": rules_json(permission),
            }));
            out.push(json!({
                "apiVersion": RBAC_API_VERSION,
                "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": ns},
                "subjects": [{"kind": "ServiceAccount", "namespace": ctx.install_namespace, "name": sa}],
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": name},
            }));
        }
    }
    out
}

/// ClusterRoles and ClusterRoleBindings for clusterPermissions, plus, in AllNamespaces mode, every
/// permission promoted with an extra rule to get/list/watch namespaces.
pub fn cluster_permissions(ctx: &RenderContext<'_>) -> Vec<Value> {
    let spec = &ctx.bundle.csv.spec.install.spec;
    let mut all: Vec<StrategyPermissions> = spec.cluster_permissions.clone();
    if ctx.all_namespaces() {
        for permission in &spec.permissions {
            let mut promoted = permission.clone();
            promoted.rules.get_or_insert_with(Vec::new).push(PermissionRule {
                verbs: Some(vec!["get".into(), "list".into(), "watch".into()]),
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["namespaces".into()]),
                ..Default::default()
            });
            all.push(promoted);
        }
    }
    let mut out = Vec::new();
    for permission in &all {
        let sa = sa_name_or_default(&permission.service_account_name);
        let name = permission_object_name(&format!("{}-{sa}", ctx.csv_name()), permission);
        out.push(json!({
            "apiVersion": RBAC_API_VERSION,
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules_json(permission),
        }));
        out.push(json!({
            "apiVersion": RBAC_API_VERSION,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "subjects": [{"kind": "ServiceAccount", "namespace": ctx.install_namespace, "name": sa}],
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
        }));
    }
    out
}

/// Rules as the API expects them: empty lists omitted, absent verbs written as `[]`.
fn rules_json(permission: &StrategyPermissions) -> Value {
    let rules: Vec<Value> = permission
        .rules
        .iter()
        .flatten()
        .map(|rule| {
            let mut obj = Map::new();
            obj.insert("verbs".into(), json!(rule.verbs.clone().unwrap_or_default()));
            let lists = [
                ("apiGroups", &rule.api_groups),
                ("resources", &rule.resources),
                ("resourceNames", &rule.resource_names),
                ("nonResourceURLs", &rule.non_resource_urls),
            ];
            for (key, list) in lists {
                if let Some(list) = list.as_ref().filter(|l| !l.is_empty()) {
                    obj.insert(key.into(), json!(list));
                }
            }
            Value::Object(obj)
        })
        .collect();
    Value::Array(rules)
}

/// The bundle's CRDs; those named by a conversion webhook get `spec.conversion` pointing at the
/// webhook Service and the provider's CA injection.
pub fn crds(ctx: &RenderContext<'_>) -> Result<Vec<Value>, String> {
    let mut conversion: BTreeMap<&str, &WebhookDescription> = BTreeMap::new();
    for wh in ctx.webhooks().iter().filter(|w| w.type_ == WEBHOOK_CONVERSION) {
        for crd in &wh.conversion_crds {
            if conversion.insert(crd, wh).is_some() {
                return Err(format!(
                    "custom resource definition '{crd}' is referenced by multiple conversion webhook definitions"
                ));
            }
        }
    }
    let mut out = Vec::new();
    for crd in &ctx.bundle.crds {
        let mut crd = crd.clone();
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Some(wh) = conversion.get(name.as_str()) {
            if crd
                .pointer("/spec/preserveUnknownFields")
                .and_then(Value::as_bool)
                == Some(true)
            {
                return Err(format!(
                    "custom resource definition '{name}' must have .spec.preserveUnknownFields set to false to let API \
                     Server call webhook to do the conversion"
                ));
            }
            let names = webhook_service_name(&wh.deployment_name)?;
            let mut webhook = Map::new();
            webhook.insert(
                "clientConfig".into(),
                json!({"service": {
                    "namespace": ctx.install_namespace,
                    "name": names.service,
                    "path": wh.webhook_path.as_deref().unwrap_or("/"),
                    "port": wh.container_port,
                }}),
            );
            if let Some(versions) = &wh.admission_review_versions {
                webhook.insert("conversionReviewVersions".into(), json!(versions));
            }
            if let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert(
                    "conversion".into(),
                    json!({"strategy": "Webhook", "webhook": webhook}),
                );
            }
            let (key, value) = ctx.webhook_provider.ca_injection(ctx.install_namespace, &names);
            add_annotation(&mut crd, key, &value);
        }
        out.push(crd);
    }
    Ok(out)
}

/// The other manifests; namespaced kinds are moved into the install namespace.
pub fn others(ctx: &RenderContext<'_>) -> Vec<Value> {
    ctx.bundle
        .others
        .iter()
        .map(|object| {
            let mut object = object.clone();
            let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
            if supported_kind(kind) == Some(true) {
                metadata_mut(&mut object).insert("namespace".into(), json!(ctx.install_namespace));
            }
            object
        })
        .collect()
}

/// The CSV's deployments in the install namespace: CSV annotations merged into the pod template
/// (template wins), `olm.targetNamespaces` / `olm.operatorNamespace`, `revisionHistoryLimit: 1`,
/// the deployment configuration, and certificate volumes on webhook- and APIService-serving
/// deployments: as upstream lays them out (after the configuration, webhook-cert first), or, in a
/// bundle owning APIServices (which upstream does not install), as classic does (before the
/// configuration, apiservice-cert first, an existing one kept in its place), so that converting a
/// classic install keeps its pod template.
pub fn deployments(ctx: &RenderContext<'_>) -> Result<Vec<Value>, String> {
    let certificate_deployments = ctx.certificate_deployments();
    let classic_layout = !ctx.api_services().is_empty();
    let csv_annotations = ctx.bundle.csv.annotations();
    let mut out = Vec::new();
    for StrategyDeployment { name, spec, label } in &ctx.bundle.csv.spec.install.spec.deployments {
        let mut spec: DeploymentSpec = spec.clone();
        let template_meta = spec.template.metadata.get_or_insert_with(ObjectMeta::default);
        let mut annotations = csv_annotations.clone();
        annotations.extend(template_meta.annotations.take().unwrap_or_default());
        annotations.insert(
            TARGET_NAMESPACES_ANNOTATION.into(),
            ctx.target_namespaces.join(","),
        );
        annotations.insert(
            OPERATOR_NAMESPACE_ANNOTATION.into(),
            ctx.install_namespace.to_string(),
        );
        template_meta.annotations = Some(annotations);
        spec.revision_history_limit = Some(1);

        let serving_cert = if certificate_deployments.contains(name.as_str()) {
            Some(webhook_service_name(name)?.cert)
        } else {
            None
        };
        if classic_layout && let Some(secret) = &serving_cert {
            let pod = spec.template.spec.get_or_insert_with(PodSpec::default);
            add_cert_volumes_as_classic(pod, secret);
        }
        let mut deployment_annotations = BTreeMap::new();
        if let Some(config) = ctx.deployment_config {
            apply_deployment_config(&mut spec, &mut deployment_annotations, config);
        }
        if ctx.operator_conditions {
            // Classic sets it after the Subscription's config, in every container.
            let pod = spec.template.spec.get_or_insert_with(PodSpec::default);
            for container in &mut pod.containers {
                set_env(container, ENV_OPERATOR_CONDITION_NAME, ctx.csv_name());
            }
        }
        if !classic_layout && let Some(secret) = &serving_cert {
            let pod = spec.template.spec.get_or_insert_with(PodSpec::default);
            ensure_cert_volumes(pod, secret);
        }

        let mut metadata = json!({"name": name, "namespace": ctx.install_namespace});
        if let Some(labels) = label {
            metadata["labels"] = json!(labels);
        }
        if !deployment_annotations.is_empty() {
            metadata["annotations"] = json!(deployment_annotations);
        }
        let spec = serde_json::to_value(&spec).map_err(|e| format!("deployment {name:?}: {e}"))?;
        out.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}));
    }
    Ok(out)
}

/// `name=value` in `container`'s env: replaced where it is, else appended (classic's
/// `ensureEnvVarIsPresent`).
fn set_env(container: &mut Container, name: &str, value: &str) {
    let env = container.env.get_or_insert_with(Vec::new);
    let var = EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    };
    match env.iter_mut().find(|e| e.name == name) {
        Some(existing) => *existing = var,
        None => env.push(var),
    }
}

/// The name of the Role and RoleBinding granting the operators of `package` their
/// OperatorCondition. Not classic's (the OperatorCondition's, `<csv>`): where classic's
/// OperatorCondition controller runs, it keeps a Role and RoleBinding of that name owned by the
/// OperatorCondition, and would take olmv1's over. The package's, not the CSV's: the same across
/// upgrades, so that the installer's grant on them (by name) still holds after one.
pub fn operator_condition_role_name(package: &str) -> String {
    format!("{package}-operator-condition")
}

/// The OperatorCondition OLM classic keeps for the bundle, named as classic names it (the CSV's
/// name) and listing what classic lists: the CSV's Deployments, and the ServiceAccounts of its
/// clusterPermissions then permissions (`default` when none); and what classic grants those
/// accounts: get, update and patch on that one object.
pub fn operator_condition(ctx: &RenderContext<'_>) -> Vec<Value> {
    let spec = &ctx.bundle.csv.spec.install.spec;
    let name = ctx.csv_name();
    let deployments: Vec<&str> = spec
        .deployments
        .iter()
        .map(|d| d.name.as_str())
        .filter(|n| !n.is_empty())
        .collect();
    let mut accounts: Vec<&str> = spec
        .cluster_permissions
        .iter()
        .chain(&spec.permissions)
        .map(|p| p.service_account_name.as_str())
        .filter(|n| !n.is_empty())
        .collect();
    if accounts.is_empty() {
        accounts.push("default");
    }
    let subjects: Vec<Value> = accounts
        .iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|sa| json!({"kind": "ServiceAccount", "name": sa, "namespace": ctx.install_namespace}))
        .collect();
    let role = operator_condition_role_name(&ctx.bundle.package_name);
    vec![
        json!({
            "apiVersion": operator_condition::API_VERSION,
            "kind": operator_condition::KIND,
            "metadata": {"name": name, "namespace": ctx.install_namespace},
            "spec": {"deployments": deployments, "serviceAccounts": accounts},
        }),
        json!({
            "apiVersion": RBAC_API_VERSION,
            "kind": "Role",
            "metadata": {"name": role, "namespace": ctx.install_namespace},
            "rules": [{
                "apiGroups": [operator_condition::GROUP],
                "resources": [operator_condition::PLURAL],
                "resourceNames": [name],
                "verbs": ["get", "update", "patch"],
            }],
        }),
        json!({
            "apiVersion": RBAC_API_VERSION,
            "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": ctx.install_namespace},
            "subjects": subjects,
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": role},
        }),
    ]
}

/// Replaces the certificate volumes and mounts (by name or by protected mount path) with the
/// webhook-cert and apiservice-cert Secret volumes (`ensureCorrectDeploymentCertVolumes`).
fn ensure_cert_volumes(pod: &mut PodSpec, secret_name: &str) {
    let mut remove: BTreeSet<String> = CERT_VOLUMES.iter().map(|(n, ..)| (*n).to_string()).collect();
    let protected: BTreeSet<&str> = CERT_VOLUMES.iter().map(|(_, p, ..)| *p).collect();
    for container in &pod.containers {
        for mount in container.volume_mounts.iter().flatten() {
            if protected.contains(mount.mount_path.as_str()) {
                remove.insert(mount.name.clone());
            }
        }
    }
    let mut volumes: Vec<Volume> = pod
        .volumes
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter(|v| !remove.contains(&v.name))
        .collect();
    for cert_volume in CERT_VOLUMES {
        volumes.push(secret_volume(cert_volume, secret_name));
    }
    pod.volumes = Some(volumes);
    for container in &mut pod.containers {
        let mut mounts: Vec<VolumeMount> = container
            .volume_mounts
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter(|m| !remove.contains(&m.name))
            .collect();
        for (name, path, ..) in CERT_VOLUMES {
            mounts.push(VolumeMount {
                name: name.into(),
                mount_path: path.into(),
                ..Default::default()
            });
        }
        container.volume_mounts = Some(mounts);
    }
}

/// Adds the apiservice-cert then the webhook-cert Secret volume and mount as OLM classic does
/// (`addCertVolumeAndVolumeMount`): a volume of the same name is replaced where it is, else
/// appended; in each container, a mount of the same name is kept as it is, one at the same path
/// replaced where it is, else the mount appended.
fn add_cert_volumes_as_classic(pod: &mut PodSpec, secret_name: &str) {
    for cert_volume @ (name, path, ..) in CLASSIC_CERT_VOLUMES {
        let volume = secret_volume(cert_volume, secret_name);
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        match volumes.iter_mut().find(|v| v.name == name) {
            Some(existing) => *existing = volume,
            None => volumes.push(volume),
        }
        for container in &mut pod.containers {
            let mount = VolumeMount {
                name: name.into(),
                mount_path: path.into(),
                ..Default::default()
            };
            let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
            match mounts.iter_mut().find(|m| m.name == name || m.mount_path == path) {
                Some(existing) if existing.name == name => {}
                Some(existing) => *existing = mount,
                None => mounts.push(mount),
            }
        }
    }
}

/// The certificate Secret `secret_name` as one of the certificate volumes.
fn secret_volume((name, _, crt, key): CertVolume, secret_name: &str) -> Volume {
    Volume {
        name: name.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret_name.into()),
            items: Some(vec![
                KeyToPath {
                    key: "tls.crt".into(),
                    path: crt.into(),
                    mode: None,
                },
                KeyToPath {
                    key: "tls.key".into(),
                    path: key.into(),
                    mode: None,
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Applies `deploymentConfig` as upstream (OLM v0 `inject` package semantics).
fn apply_deployment_config(
    spec: &mut DeploymentSpec,
    deployment_annotations: &mut BTreeMap<String, String>,
    config: &DeploymentConfig,
) {
    let pod = spec.template.spec.get_or_insert_with(PodSpec::default);
    for container in &mut pod.containers {
        for var in &config.env {
            let env = container.env.get_or_insert_with(Vec::new);
            match env.iter_mut().find(|e| e.name == var.name) {
                Some(existing) => *existing = var.clone(),
                None => env.push(var.clone()),
            }
        }
        for source in &config.env_from {
            let env_from = container.env_from.get_or_insert_with(Vec::new);
            if !env_from.contains(source) {
                env_from.push(source.clone());
            }
        }
    }
    for volume in &config.volumes {
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        match volumes.iter_mut().find(|v| v.name == volume.name) {
            Some(existing) => *existing = volume.clone(),
            None => volumes.push(volume.clone()),
        }
    }
    for container in &mut pod.containers {
        for mount in &config.volume_mounts {
            let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
            match mounts.iter_mut().find(|m| m.name == mount.name) {
                Some(existing) => *existing = mount.clone(),
                None => mounts.push(mount.clone()),
            }
        }
    }
    for toleration in &config.tolerations {
        let tolerations = pod.tolerations.get_or_insert_with(Vec::new);
        if !tolerations.contains(toleration) {
            tolerations.push(toleration.clone());
        }
    }
    if let Some(resources) = &config.resources {
        for container in &mut pod.containers {
            container.resources = Some(resources.clone());
        }
    }
    if let Some(selector) = &config.node_selector {
        pod.node_selector = Some(selector.clone());
    }
    if let Some(affinity) = &config.affinity {
        apply_affinity(pod, affinity);
    }
    if !config.annotations.is_empty() {
        for (k, v) in &config.annotations {
            deployment_annotations
                .entry(k.clone())
                .or_insert_with(|| v.clone());
        }
        let template_meta = spec.template.metadata.get_or_insert_with(ObjectMeta::default);
        let template_annotations = template_meta.annotations.get_or_insert_with(BTreeMap::new);
        for (k, v) in &config.annotations {
            template_annotations.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// OLM v0 affinity merge: `{}` erases; each set part replaces (an empty part erases it).
fn apply_affinity(pod: &mut PodSpec, config: &k8s_openapi::api::core::v1::Affinity) {
    use k8s_openapi::api::core::v1::Affinity;
    if config.node_affinity.is_none() && config.pod_affinity.is_none() && config.pod_anti_affinity.is_none() {
        pod.affinity = None;
        return;
    }
    let affinity = pod.affinity.get_or_insert_with(Affinity::default);
    if let Some(node) = &config.node_affinity {
        let required_empty = node
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .is_none_or(|r| r.node_selector_terms.is_empty());
        let preferred_empty = node
            .preferred_during_scheduling_ignored_during_execution
            .as_ref()
            .is_none_or(Vec::is_empty);
        affinity.node_affinity = if required_empty && preferred_empty {
            None
        } else {
            Some(node.clone())
        };
    }
    if let Some(pa) = &config.pod_affinity {
        let empty = pa
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .is_none_or(Vec::is_empty)
            && pa
                .preferred_during_scheduling_ignored_during_execution
                .as_ref()
                .is_none_or(Vec::is_empty);
        affinity.pod_affinity = if empty { None } else { Some(pa.clone()) };
    }
    if let Some(paa) = &config.pod_anti_affinity {
        let empty = paa
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .is_none_or(Vec::is_empty)
            && paa
                .preferred_during_scheduling_ignored_during_execution
                .as_ref()
                .is_none_or(Vec::is_empty);
        affinity.pod_anti_affinity = if empty { None } else { Some(paa.clone()) };
    }
    if affinity.node_affinity.is_none()
        && affinity.pod_affinity.is_none()
        && affinity.pod_anti_affinity.is_none()
    {
        pod.affinity = None;
    }
}

/// Validating or mutating webhook configurations, one per webhook definition of `type_`.
pub fn webhook_configurations(ctx: &RenderContext<'_>, type_: &str) -> Result<Vec<Value>, String> {
    let kind = if type_ == WEBHOOK_VALIDATING {
        "ValidatingWebhookConfiguration"
    } else {
        "MutatingWebhookConfiguration"
    };
    let mut out = Vec::new();
    for wh in ctx.webhooks().iter().filter(|w| w.type_ == type_) {
        let name = wh.generate_name.strip_suffix('-').unwrap_or(&wh.generate_name);
        let names = webhook_service_name(&wh.deployment_name)?;
        let mut service = Map::new();
        service.insert("namespace".into(), json!(ctx.install_namespace));
        service.insert("name".into(), json!(names.service));
        if let Some(path) = &wh.webhook_path {
            service.insert("path".into(), json!(path));
        }
        service.insert("port".into(), json!(wh.container_port));

        let mut webhook = Map::new();
        webhook.insert("name".into(), json!(name));
        insert_some(&mut webhook, "rules", &wh.rules);
        insert_some(&mut webhook, "failurePolicy", &wh.failure_policy);
        insert_some(&mut webhook, "matchPolicy", &wh.match_policy);
        insert_some(&mut webhook, "objectSelector", &wh.object_selector);
        insert_some(&mut webhook, "sideEffects", &wh.side_effects);
        insert_some(&mut webhook, "timeoutSeconds", &wh.timeout_seconds);
        insert_some(
            &mut webhook,
            "admissionReviewVersions",
            &wh.admission_review_versions,
        );
        webhook.insert("clientConfig".into(), json!({"service": service}));
        if type_ == WEBHOOK_MUTATING {
            insert_some(&mut webhook, "reinvocationPolicy", &wh.reinvocation_policy);
        }
        if !ctx.target_namespaces.is_empty() && !ctx.target_namespaces.iter().any(String::is_empty) {
            webhook.insert(
                "namespaceSelector".into(),
                json!({"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name",
                    "operator": "In",
                    "values": ctx.target_namespaces,
                }]}),
            );
        }
        let (key, value) = ctx.webhook_provider.ca_injection(ctx.install_namespace, &names);
        out.push(json!({
            "apiVersion": ADMISSION_API_VERSION,
            "kind": kind,
            "metadata": {"name": name, "annotations": {key: value}},
            "webhooks": [webhook],
        }));
    }
    Ok(out)
}

/// One Service per webhook- or APIService-serving deployment (in CSV deployment order), ports
/// deduplicated and sorted by port then target port, selecting the deployment's `matchLabels`.
/// An APIService's port is its `containerPort` (443 when unset), behind the same port.
pub fn services(ctx: &RenderContext<'_>) -> Result<Vec<Value>, String> {
    let mut ports_by_deployment: BTreeMap<&str, Vec<(i32, IntOrString)>> = BTreeMap::new();
    for wh in ctx.webhooks() {
        let port = if wh.container_port > 0 {
            wh.container_port
        } else {
            443
        };
        let target = wh.target_port.clone().unwrap_or(IntOrString::Int(port));
        let ports = ports_by_deployment.entry(&wh.deployment_name).or_default();
        if !ports.contains(&(port, target.clone())) {
            ports.push((port, target));
        }
    }
    for api in ctx.api_services() {
        let port = api.port();
        let ports = ports_by_deployment.entry(&api.deployment_name).or_default();
        if !ports.contains(&(port, IntOrString::Int(port))) {
            ports.push((port, IntOrString::Int(port)));
        }
    }
    let mut out = Vec::new();
    for deployment in &ctx.bundle.csv.spec.install.spec.deployments {
        let Some(ports) = ports_by_deployment.get_mut(deployment.name.as_str()) else {
            continue;
        };
        // intstr.IntValue: a string target counts as its number, or 0.
        let int_value = |t: &IntOrString| match t {
            IntOrString::Int(i) => *i,
            IntOrString::String(s) => s.parse().unwrap_or(0),
        };
        ports.sort_by(|a, b| a.0.cmp(&b.0).then(int_value(&a.1).cmp(&int_value(&b.1))));
        let names = webhook_service_name(&deployment.name)?;
        let ports: Vec<Value> = ports
            .iter()
            .map(|(port, target)| json!({"name": port.to_string(), "port": port, "targetPort": target}))
            .collect();
        let mut spec = Map::new();
        spec.insert("ports".into(), json!(ports));
        if let Some(labels) = deployment.spec.selector.match_labels.as_ref() {
            spec.insert("selector".into(), json!(labels));
        }
        let mut service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": names.service, "namespace": ctx.install_namespace},
            "spec": spec,
        });
        if let Some((key, value)) = ctx.webhook_provider.service_annotation(&names) {
            add_annotation(&mut service, key, &value);
        }
        out.push(service);
    }
    Ok(out)
}

/// A self-signed cert-manager Issuer and a Certificate per webhook- or APIService-serving
/// deployment. The certificate of a deployment serving an APIService has an ECDSA P-256 key, the
/// key OLM classic generates for it: cert-manager keeps a certificate classic issued (same names,
/// same key type) when `olmv1 migrate convert` takes it over, instead of replacing it under the
/// running server.
pub fn cert_manager_objects(ctx: &RenderContext<'_>) -> Result<Vec<Value>, String> {
    let api_service_deployments = ctx.api_service_deployments();
    let mut out = Vec::new();
    for deployment in ctx.certificate_deployments() {
        let names = webhook_service_name(deployment)?;
        let issuer = object_name_for_base_and_suffix(&names.cert, "selfsigned-issuer");
        let ns = ctx.install_namespace;
        out.push(json!({
            "apiVersion": CERT_MANAGER_API_VERSION,
            "kind": "Issuer",
            "metadata": {"name": issuer, "namespace": ns},
            "spec": {"selfSigned": {}},
        }));
        let host = format!("{}.{ns}", names.service);
        let mut certificate = json!({
            "apiVersion": CERT_MANAGER_API_VERSION,
            "kind": "Certificate",
            "metadata": {"name": names.cert, "namespace": ns},
            "spec": {
                "secretName": names.cert,
                "commonName": host,
                "usages": ["server auth"],
                "dnsNames": [host.clone(), format!("{host}.svc"), format!("{host}.svc.cluster.local")],
                "issuerRef": {"name": issuer},
                "duration": CERT_DURATION,
                "renewBefore": CERT_RENEW_BEFORE,
            },
        });
        if api_service_deployments.contains(deployment) {
            certificate["spec"]["privateKey"] = json!({"algorithm": "ECDSA", "size": 256});
        }
        out.push(certificate);
    }
    Ok(out)
}

/// Per owned APIService (in CSV order) the APIService `<version>.<group>` served by the
/// deployment's Service, its CA injected by the certificate provider; and, once per serving
/// deployment, what an aggregated API server needs to authenticate and authorize the requests the
/// API server proxies (OLM classic's names): ClusterRoleBinding
/// `<service>-system:auth-delegator` to `system:auth-delegator` and RoleBinding
/// `kube-system/<service>-auth-reader` to `extension-apiserver-authentication-reader`, both for
/// the deployment's service account. (Upstream's generator emits the bindings once per APIService,
/// twice when one deployment serves two.)
pub fn api_services(ctx: &RenderContext<'_>) -> Result<Vec<Value>, String> {
    let accounts: BTreeMap<&str, &str> = ctx
        .bundle
        .csv
        .spec
        .install
        .spec
        .deployments
        .iter()
        .map(|d| {
            let account = d
                .spec
                .template
                .spec
                .as_ref()
                .and_then(|p| p.service_account_name.as_deref())
                .unwrap_or_default();
            (d.name.as_str(), sa_name_or_default(account))
        })
        .collect();
    let ns = ctx.install_namespace;
    let mut bound = BTreeSet::new();
    let mut out = Vec::new();
    for api in ctx.api_services() {
        let names = webhook_service_name(&api.deployment_name)?;
        let (key, value) = ctx.webhook_provider.ca_injection(ns, &names);
        out.push(json!({
            "apiVersion": API_REGISTRATION_API_VERSION,
            "kind": "APIService",
            "metadata": {"name": api.api_service_name(), "annotations": {key: value}},
            "spec": {
                "group": api.group,
                "version": api.version,
                "groupPriorityMinimum": API_SERVICE_GROUP_PRIORITY_MINIMUM,
                "versionPriority": API_SERVICE_VERSION_PRIORITY,
                "service": {"namespace": ns, "name": names.service, "port": api.port()},
            },
        }));
        if !bound.insert(names.service.clone()) {
            continue;
        }
        let account = accounts
            .get(api.deployment_name.as_str())
            .copied()
            .unwrap_or("default");
        let subjects = json!([{"kind": "ServiceAccount", "name": account, "namespace": ns}]);
        out.push(json!({
            "apiVersion": RBAC_API_VERSION,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": auth_delegator_binding_name(&names.service)},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": AUTH_DELEGATOR_CLUSTER_ROLE},
            "subjects": subjects,
        }));
        out.push(json!({
            "apiVersion": RBAC_API_VERSION,
            "kind": "RoleBinding",
            "metadata": {"name": auth_reader_binding_name(&names.service), "namespace": KUBE_SYSTEM},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": AUTH_READER_ROLE},
            "subjects": subjects,
        }));
    }
    Ok(out)
}

/// `<service>-system:auth-delegator` (OLM classic's `AuthDelegatorClusterRoleBindingName`).
pub fn auth_delegator_binding_name(service: &str) -> String {
    format!("{service}-{AUTH_DELEGATOR_CLUSTER_ROLE}")
}

/// `<service>-auth-reader` (OLM classic's `AuthReaderRoleBindingName`).
pub fn auth_reader_binding_name(service: &str) -> String {
    format!("{service}-auth-reader")
}

fn insert_some<T: serde::Serialize>(map: &mut Map<String, Value>, key: &str, value: &Option<T>) {
    if let Some(v) = value {
        map.insert(key.into(), serde_json::to_value(v).unwrap_or(Value::Null));
    }
}

fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    match object.get_mut("metadata") {
        Some(Value::Object(map)) => map,
        _ => unreachable!("metadata was just made an object"),
    }
}

fn add_annotation(object: &mut Value, key: &str, value: &str) {
    let metadata = metadata_mut(object);
    if !metadata.get("annotations").is_some_and(Value::is_object) {
        metadata.insert("annotations".into(), json!({}));
    }
    if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
        annotations.insert(key.into(), json!(value));
    }
}
