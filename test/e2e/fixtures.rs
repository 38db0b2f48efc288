//! Bundles and catalogs for end-to-end tests, built as files and published as images to the
//! local registry with the project's own `push_dir` (no Docker).

use std::path::{Path, PathBuf};

use olmv1::image::{PushOptions, RegistryConfig, push_dir};
use serde_json::{Value, json};

/// How a bundle's CRD looks: `Compatible` versions only add optional fields; `Breaking` changes
/// a field's type (the CRD upgrade safety preflight must refuse it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrdShape {
    Base,
    Compatible,
    Breaking,
}

/// One bundle of a test package.
#[derive(Clone, Debug)]
pub struct Bundle {
    pub version: String,
    pub replaces: Option<String>,
    pub skips: Vec<String>,
    pub skip_range: Option<String>,
    pub crd: CrdShape,
    /// Whether the bundle ships a ConfigMap `<package>-settings` (dropped ones are pruned).
    pub with_config_map: bool,
    /// `olm.maxOpenShiftVersion`, as a raw JSON value.
    pub max_openshift_version: Option<Value>,
    /// A hostile image: this manifest (a file name under `manifests/`) is replaced, in a second
    /// layer, by a symbolic link to this target.
    pub linked_manifest: Option<(String, PathBuf)>,
    /// Dependencies (`{type, value}`): in the image's `metadata/dependencies.yaml` and, as opm
    /// copies them, in the catalog entry's properties.
    pub dependencies: Vec<Value>,
    /// The operator's pods run only on Nodes labelled `olmv1.test/pool=<this>` (and tolerate
    /// their taint): until a test adds such a Node, the Deployment never rolls out.
    pub node_pool: Option<String>,
    /// The install modes the CSV supports; `None`: Own, Single and AllNamespaces.
    pub install_modes: Option<Vec<&'static str>>,
}

impl Bundle {
    /// A bundle of `version` with no upgrade edges, the base CRD and the ConfigMap.
    pub fn new(version: &str) -> Self {
        Self {
            version: version.into(),
            replaces: None,
            skips: vec![],
            skip_range: None,
            crd: CrdShape::Base,
            with_config_map: true,
            max_openshift_version: None,
            linked_manifest: None,
            dependencies: vec![],
            node_pool: None,
            install_modes: None,
        }
    }

    /// Declares a dependency: `olm.package.required`, `olm.gvk.required` or `olm.constraint`.
    pub fn requires(mut self, type_: &str, value: Value) -> Self {
        self.dependencies.push(json!({"type": type_, "value": value}));
        self
    }

    /// The CSV supports only these install modes (e.g. `["SingleNamespace"]`).
    pub fn supporting_only(mut self, modes: &[&'static str]) -> Self {
        self.install_modes = Some(modes.to_vec());
        self
    }

    /// Pods only on the Nodes of `pool` (see [`Bundle::node_pool`]).
    pub fn on_node_pool(mut self, pool: &str) -> Self {
        self.node_pool = Some(pool.into());
        self
    }

    pub fn replaces(mut self, version: &str, package: &str) -> Self {
        self.replaces = Some(bundle_name(package, version));
        self
    }

    pub fn skip_range(mut self, range: &str) -> Self {
        self.skip_range = Some(range.into());
        self
    }

    pub fn crd(mut self, shape: CrdShape) -> Self {
        self.crd = shape;
        self
    }

    pub fn without_config_map(mut self) -> Self {
        self.with_config_map = false;
        self
    }

    pub fn max_openshift_version(mut self, value: Value) -> Self {
        self.max_openshift_version = Some(value);
        self
    }

    /// Makes the image hostile: `manifests/<manifest>` becomes a link to `target` (on the host).
    pub fn manifest_linked_to(mut self, manifest: &str, target: &Path) -> Self {
        self.linked_manifest = Some((manifest.into(), target.into()));
        self
    }
}

/// `<package>.v<version>`.
pub fn bundle_name(package: &str, version: &str) -> String {
    format!("{package}.v{version}")
}

/// The API group of a package's CRD: unique per package so tests do not share CRDs.
pub fn crd_group(package: &str) -> String {
    format!("{package}.e2e.olmv1.io")
}

/// The CRD's name.
pub fn crd_name(package: &str) -> String {
    format!("widgets.{}", crd_group(package))
}

/// The operator Deployment's name.
pub fn deployment_name(package: &str) -> String {
    format!("{package}-operator")
}

/// Writes a registry+v1 bundle directory.
pub fn write_bundle(dir: &Path, package: &str, bundle: &Bundle) {
    let manifests = dir.join("manifests");
    let metadata = dir.join("metadata");
    std::fs::create_dir_all(&manifests).unwrap();
    write_annotations(dir, package);
    if let Some(max) = &bundle.max_openshift_version {
        let properties = json!({"properties": [{"type": "olm.maxOpenShiftVersion", "value": max}]});
        std::fs::write(metadata.join("properties.yaml"), properties.to_string()).unwrap();
    }
    if !bundle.dependencies.is_empty() {
        // dependencies.yaml spells requirements as opm reads them: `olm.package` with a
        // `version` range, `olm.gvk`, `olm.constraint`.
        let entries: Vec<Value> = bundle
            .dependencies
            .iter()
            .map(|d| match d["type"].as_str() {
                Some("olm.package.required") => json!({"type": "olm.package", "value": {
                    "packageName": d["value"]["packageName"], "version": d["value"]["versionRange"]
                }}),
                Some("olm.gvk.required") => json!({"type": "olm.gvk", "value": d["value"]}),
                _ => d.clone(),
            })
            .collect();
        let dependencies = json!({"dependencies": entries});
        std::fs::write(metadata.join("dependencies.yaml"), dependencies.to_string()).unwrap();
    }
    let write_json = |name: &str, value: &Value| {
        std::fs::write(manifests.join(name), serde_json::to_string_pretty(value).unwrap()).unwrap()
    };
    write_json(
        &format!("{package}.clusterserviceversion.yaml"),
        &csv(package, bundle),
    );
    write_json("widgets.crd.yaml", &crd(package, bundle.crd));
    if bundle.with_config_map {
        write_json(
            "settings.configmap.yaml",
            &json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{package}-settings")},
                "data": {"version": bundle.version}
            }),
        );
    }
}

/// `metadata/annotations.yaml` of a registry+v1 bundle of `package`.
fn write_annotations(dir: &Path, package: &str) {
    std::fs::create_dir_all(dir.join("metadata")).unwrap();
    std::fs::write(
        dir.join("metadata/annotations.yaml"),
        format!(
            "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  \
             operators.operatorframework.io.bundle.manifests.v1: manifests/\n  \
             operators.operatorframework.io.bundle.metadata.v1: metadata/\n  \
             operators.operatorframework.io.bundle.package.v1: {package}\n"
        ),
    )
    .unwrap();
}

/// The label (and taint) key of the Nodes of a [`Bundle::node_pool`].
pub const NODE_POOL_KEY: &str = "olmv1.test/pool";

fn csv(package: &str, bundle: &Bundle) -> Value {
    let operator = deployment_name(package);
    let group = crd_group(package);
    let mut pod_spec = json!({
        "serviceAccountName": operator,
        "containers": [{
            "name": "manager",
            "image": format!("registry.invalid/{package}/manager:v{}", bundle.version)
        }]
    });
    if let Some(pool) = &bundle.node_pool {
        pod_spec["nodeSelector"] = json!({NODE_POOL_KEY: pool});
        pod_spec["tolerations"] =
            json!([{"key": NODE_POOL_KEY, "operator": "Equal", "value": pool, "effect": "NoSchedule"}]);
    }
    let supported = |mode: &str| match &bundle.install_modes {
        Some(modes) => modes.contains(&mode),
        None => mode != "MultiNamespace",
    };
    let install_modes: Vec<Value> = [
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
        "AllNamespaces",
    ]
    .into_iter()
    .map(|mode| json!({"type": mode, "supported": supported(mode)}))
    .collect();
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": bundle_name(package, &bundle.version),
            "annotations": {"capabilities": "Basic Install"}
        },
        "spec": {
            "displayName": format!("{package} operator"),
            "version": bundle.version,
            "installModes": install_modes,
            "customresourcedefinitions": {"owned": [
                {"name": crd_name(package), "version": "v1", "kind": "Widget", "displayName": "Widget"}
            ]},
            "install": {"strategy": "deployment", "spec": {
                "clusterPermissions": [{
                    "serviceAccountName": operator,
                    "rules": [{"apiGroups": [group], "resources": ["widgets", "widgets/status"], "verbs": ["*"]}]
                }],
                "permissions": [{
                    "serviceAccountName": operator,
                    "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
                }],
                "deployments": [{
                    "name": operator,
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {"app": operator}},
                        "template": {
                            "metadata": {"labels": {"app": operator}},
                            "spec": pod_spec
                        }
                    }
                }]
            }}
        }
    })
}

fn crd(package: &str, shape: CrdShape) -> Value {
    let mut spec_properties = json!({"size": {"type": "integer"}});
    match shape {
        CrdShape::Base => {}
        CrdShape::Compatible => spec_properties["color"] = json!({"type": "string"}),
        CrdShape::Breaking => spec_properties["size"] = json!({"type": "string"}),
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name(package)},
        "spec": {
            "group": crd_group(package),
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": spec_properties}
                }}}
            }]
        }
    })
}

/// A channel: its name and entries (bundle versions, in order, with their edges from the bundles).
#[derive(Clone, Debug)]
pub struct Channel {
    pub name: String,
    pub versions: Vec<String>,
}

impl Channel {
    pub fn new(name: &str, versions: &[&str]) -> Self {
        Self {
            name: name.into(),
            versions: versions.iter().map(|v| v.to_string()).collect(),
        }
    }
}

/// A deprecation entry of the package.
#[derive(Clone, Debug)]
pub enum Deprecated {
    Package(String),
    Channel(String, String),
    Bundle(String, String),
}

/// A test package in a catalog.
#[derive(Clone, Debug)]
pub struct Package {
    pub name: String,
    pub default_channel: String,
    pub channels: Vec<Channel>,
    pub bundles: Vec<Bundle>,
    pub deprecations: Vec<Deprecated>,
}

/// Publishes every bundle of `package` and a catalog image holding it; returns the catalog's
/// tag reference.
pub async fn publish_catalog(registry: &str, repository: &str, tag: &str, package: &Package) -> String {
    publish_catalog_named(registry, registry, repository, tag, package).await
}

/// [`publish_catalog`] with the images pushed under `registry` (`host:port[/path]`) but named
/// under `name` in the catalog and in the returned reference: a name that resolves nowhere,
/// pulled through a registries.conf mirror at `registry`.
pub async fn publish_catalog_named(
    registry: &str,
    name: &str,
    repository: &str,
    tag: &str,
    package: &Package,
) -> String {
    publish_catalogs_named(registry, name, repository, tag, std::slice::from_ref(package)).await
}

/// Publishes every bundle of `packages` and one catalog image holding them all; returns the
/// catalog's tag reference.
pub async fn publish_catalog_of(registry: &str, repository: &str, tag: &str, packages: &[Package]) -> String {
    publish_catalogs_named(registry, registry, repository, tag, packages).await
}

/// [`publish_catalog_of`] with the images named under `name` (see [`publish_catalog_named`]).
async fn publish_catalogs_named(
    registry: &str,
    name: &str,
    repository: &str,
    tag: &str,
    packages: &[Package],
) -> String {
    let mut lines = Vec::new();
    for package in packages {
        lines.extend(package_metas(registry, name, package).await);
    }
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    push_catalog(
        &format!("{registry}/{repository}:{tag}"),
        &packages[0].name,
        &text,
    )
    .await;
    format!("{name}/{repository}:{tag}")
}

/// The FBC objects of `package`, its bundles published under `registry` and named under `name`.
async fn package_metas(registry: &str, name: &str, package: &Package) -> Vec<Value> {
    let mut lines = vec![
        json!({"schema": "olm.package", "name": package.name, "defaultChannel": package.default_channel}),
    ];
    for channel in &package.channels {
        let entries: Vec<Value> = channel
            .versions
            .iter()
            .map(|version| {
                let bundle = package
                    .bundles
                    .iter()
                    .find(|b| &b.version == version)
                    .expect("channel names a bundle");
                let mut entry = json!({"name": bundle_name(&package.name, version)});
                if let Some(replaces) = &bundle.replaces {
                    entry["replaces"] = json!(replaces);
                }
                if !bundle.skips.is_empty() {
                    entry["skips"] = json!(bundle.skips);
                }
                if let Some(range) = &bundle.skip_range {
                    entry["skipRange"] = json!(range);
                }
                entry
            })
            .collect();
        lines.push(json!({"schema": "olm.channel", "package": package.name, "name": channel.name, "entries": entries}));
    }
    for bundle in &package.bundles {
        let image = publish_bundle(registry, &package.name, bundle)
            .await
            .replacen(registry, name, 1);
        // What opm derives: the package, the owned CRD's API, the dependencies.
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": package.name, "version": bundle.version}}),
            json!({"type": "olm.gvk", "value": {"group": crd_group(&package.name), "version": "v1", "kind": "Widget"}}),
        ];
        properties.extend(bundle.dependencies.iter().cloned());
        if let Some(max) = &bundle.max_openshift_version {
            properties.push(json!({"type": "olm.maxOpenShiftVersion", "value": max}));
        }
        lines.push(json!({
            "schema": "olm.bundle", "name": bundle_name(&package.name, &bundle.version),
            "package": package.name, "image": image, "properties": properties
        }));
    }
    if !package.deprecations.is_empty() {
        let entries: Vec<Value> = package
            .deprecations
            .iter()
            .map(|d| match d {
                Deprecated::Package(message) => {
                    json!({"reference": {"schema": "olm.package"}, "message": message})
                }
                Deprecated::Channel(name, message) => {
                    json!({"reference": {"schema": "olm.channel", "name": name}, "message": message})
                }
                Deprecated::Bundle(version, message) => json!({
                    "reference": {"schema": "olm.bundle", "name": bundle_name(&package.name, version)},
                    "message": message
                }),
            })
            .collect();
        lines.push(json!({"schema": "olm.deprecations", "package": package.name, "entries": entries}));
    }
    lines
}

/// Pushes a catalog image holding one package's FBC objects (one JSON object per line) under
/// `/configs`, labelled as catalogd expects; returns `reference`.
pub async fn push_catalog(reference: &str, package: &str, objects: &[String]) -> String {
    let work = tempfile::tempdir().unwrap();
    let configs = work.path().join(package);
    std::fs::create_dir_all(&configs).unwrap();
    std::fs::write(configs.join("catalog.json"), objects.join("\n")).unwrap();
    push(
        work.path(),
        reference,
        "/configs",
        &[("operators.operatorframework.io.index.configs.v1", "/configs")],
    )
    .await;
    reference.to_string()
}

/// Publishes one bundle image; returns its digest reference.
pub async fn publish_bundle(registry: &str, package: &str, bundle: &Bundle) -> String {
    let dir = tempfile::tempdir().unwrap();
    write_bundle(dir.path(), package, bundle);
    let reference = format!("{registry}/e2e/{package}-bundle:v{}", bundle.version);
    let labels = [(
        "operators.operatorframework.io.bundle.mediatype.v1",
        "registry+v1",
    )];
    match &bundle.linked_manifest {
        None => push(dir.path(), &reference, "/", &labels).await,
        Some((manifest, target)) => push_with_link(dir.path(), &reference, manifest, target, &labels).await,
    }
}

/// Pushes the bundle directory as a first layer and, as a second, `manifests/<manifest>` made a
/// symbolic link to `target` through a chain of links that each stay inside the image when read
/// alone (`b/c1 -> ..`, `b/c2 -> c1/..`, ... `b/c25` is `/`): what an attacker's image looks like.
async fn push_with_link(
    dir: &Path,
    reference: &str,
    manifest: &str,
    target: &Path,
    labels: &[(&str, &str)],
) -> String {
    let mut files = tar::Builder::new(Vec::new());
    for top in ["manifests", "metadata"] {
        files.append_dir_all(top, dir.join(top)).unwrap();
    }
    let mut link = tar::Builder::new(Vec::new());
    let mut append_link = |name: String, to: String| {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        header.set_mode(0o777);
        link.append_link(&mut header, name, to).unwrap();
    };
    append_link("b/c1".into(), "..".into());
    for hop in 2..=25 {
        append_link(format!("b/c{hop}"), format!("c{}/..", hop - 1));
    }
    let through_chain = format!(
        "../b/c25/{}",
        target.display().to_string().trim_start_matches('/')
    );
    append_link(format!("manifests/{manifest}"), through_chain);
    let options = PushOptions {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    olmv1::image::push_layers(
        reference,
        vec![files.into_inner().unwrap(), link.into_inner().unwrap()],
        &options,
    )
    .await
    .unwrap_or_else(|e| panic!("cannot push {reference}: {e}"))
    .digest_ref
}

pub async fn push(dir: &Path, reference: &str, prefix: &str, labels: &[(&str, &str)]) -> String {
    // Test registries speak plain HTTP, on loopback or (the proxy test's) not.
    let registry = RegistryConfig {
        insecure_registries: reference
            .split('/')
            .next()
            .map(str::to_string)
            .into_iter()
            .collect(),
        ..RegistryConfig::default()
    };
    // The authenticating registry takes pushes with its credentials only.
    let (auth_host, user, password) = crate::support::auth_registry();
    if reference.starts_with(&format!("{auth_host}/")) {
        registry.credentials.insert(
            auth_host,
            olmv1::image::Credential {
                username: user,
                password,
            },
        );
    }
    let options = PushOptions {
        registry,
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        prefix: prefix.into(),
        ..Default::default()
    };
    push_dir(dir, reference, &options)
        .await
        .unwrap_or_else(|e| panic!("cannot push {reference}: {e}"))
        .digest_ref
}

/// A scratch directory kept for the whole test process.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olmv1-e2e-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Rebuilds some bundles of a real package of a shared catalog as images in the local registry
/// (from their `olm.bundle.object` properties, which hold every manifest), and publishes a catalog
/// with that package reduced to those bundles, their image references rewritten to the registry.
/// Returns the catalog's reference.
pub async fn publish_real_package(
    registry: &str,
    catalog_dir: &Path,
    package: &str,
    bundles: &[&str],
    tag: &str,
) -> String {
    let mut lines = Vec::new();
    let mut found = Vec::new();
    let mut metas = Vec::new();
    olmv1::catalog::for_each_dir_meta(&catalog_dir.join(package), |meta| {
        metas.push(meta);
        Ok(())
    })
    .unwrap();
    for meta in metas {
        let mut object: Value = serde_json::from_slice(&meta.blob).unwrap();
        match &*meta.schema {
            "olm.channel" => {
                let entries = object["entries"].as_array().unwrap();
                let kept: Vec<Value> = entries
                    .iter()
                    .filter(|e| bundles.contains(&e["name"].as_str().unwrap()))
                    .cloned()
                    .collect();
                if kept.is_empty() {
                    continue;
                }
                object["entries"] = json!(kept);
            }
            "olm.bundle" => {
                let name = object["name"].as_str().unwrap().to_string();
                if !bundles.contains(&name.as_str()) {
                    continue;
                }
                let bundle: olmv1::catalog::Bundle = serde_json::from_value(object.clone()).unwrap();
                let dir = tempfile::tempdir().unwrap();
                crate::support::CatalogBundle {
                    catalog: String::new(),
                    package: package.to_string(),
                    name: name.clone(),
                    properties: bundle.properties,
                }
                .write_dir(dir.path());
                let reference = format!("{registry}/real/{name}:bundle");
                let image = push(dir.path(), &reference, "/", &[]).await;
                object["image"] = json!(image);
                found.push(name);
            }
            _ => {}
        }
        lines.push(object.to_string());
    }
    assert_eq!(
        found.len(),
        bundles.len(),
        "every bundle is in the shared catalog: found {found:?}"
    );
    push_catalog(
        &format!("{registry}/real/{package}-catalog:{tag}"),
        package,
        &lines,
    )
    .await
}
