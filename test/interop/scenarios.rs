//! The scenarios of the differences table: one package (or catalog pair) each, so that they run
//! at once without sharing cluster-scoped objects, and the steps that bring each to its end state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::fixtures::{self, Bundle, Channel, Deprecated, Package};

/// A ClusterCatalog of the plan: its name, image and priority.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CatalogRef {
    pub name: String,
    pub image: String,
    pub priority: i32,
}

/// What `publish` pushed: the scenario catalogs and the real operator's two catalog images.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    pub catalogs: Vec<CatalogRef>,
    pub real_v1: String,
    pub real_v2: String,
}

/// What a step waits for before the next step (or the record) is taken.
#[derive(Clone, Debug)]
pub enum Expect {
    /// Installed=True at this bundle version.
    Installed(&'static str),
    /// The controller reported on this generation and has not installed it.
    Refused,
}

/// One change to the ClusterExtension: `spec.source.catalog` fields and `spec.config`.
#[derive(Clone, Debug)]
pub struct Step {
    pub catalog: Value,
    pub config: Option<Value>,
    pub expect: Expect,
}

impl Step {
    fn new(catalog: Value, expect: Expect) -> Self {
        Self {
            catalog,
            config: None,
            expect,
        }
    }
}

/// A row of the differences table: the ClusterExtension `name` in namespace `s-<name>`.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub package: String,
    pub steps: Vec<Step>,
}

impl Scenario {
    pub fn namespace(&self) -> String {
        format!("s-{}", self.name)
    }
}

/// 1.0.0; 1.1.0 replaces 1.0.0; 1.2.0 skips 1.1.0; 2.0.0 skipRange >=1.2.0 <2.0.0: from each
/// version exactly one kind of edge leads on. The upgrade scenarios pin the next version: with a
/// range, olmv1 walks on to the end of the chain at once while upstream stops after one hop until
/// its next reconcile (docs/upstream.md).
fn edges(package: &str) -> Package {
    let mut skips = Bundle::new("1.2.0");
    skips.skips = vec![fixtures::bundle_name(package, "1.1.0")];
    Package {
        name: package.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["1.0.0", "1.1.0", "1.2.0", "2.0.0"])],
        bundles: vec![
            Bundle::new("1.0.0"),
            Bundle::new("1.1.0").replaces("1.0.0", package),
            skips,
            Bundle::new("2.0.0").skip_range(">=1.2.0 <2.0.0"),
        ],
        deprecations: vec![],
    }
}

/// A chain 1.0.0 <- 1.1.0 <- 1.2.0 <- 2.0.0 (each replaces the previous one) in `stable`, and
/// `candidate` with one more version, 3.0.0.
fn chain(package: &str) -> Package {
    Package {
        name: package.into(),
        default_channel: "candidate".into(),
        channels: vec![
            Channel::new("stable", &["1.0.0", "1.1.0", "1.2.0", "2.0.0"]),
            Channel::new("candidate", &["1.0.0", "1.1.0", "1.2.0", "2.0.0", "3.0.0"]),
        ],
        bundles: vec![
            Bundle::new("1.0.0"),
            Bundle::new("1.1.0").replaces("1.0.0", package),
            Bundle::new("1.2.0").replaces("1.1.0", package),
            Bundle::new("2.0.0").replaces("1.2.0", package),
            Bundle::new("3.0.0").replaces("2.0.0", package),
        ],
        deprecations: vec![],
    }
}

fn one_version(package: &str, version: &str) -> Package {
    Package {
        name: package.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &[version])],
        bundles: vec![Bundle::new(version)],
        deprecations: vec![],
    }
}

fn installed(catalog: Value, version: &'static str) -> Step {
    Step::new(catalog, Expect::Installed(version))
}

fn refused(catalog: Value) -> Step {
    Step::new(catalog, Expect::Refused)
}

/// Every scenario of the table, in order.
pub fn all() -> Vec<Scenario> {
    let s = |name: &'static str, package: &str, steps: Vec<Step>| Scenario {
        name,
        package: package.into(),
        steps,
    };
    let mut invalid_config = installed(json!({}), "1.0.0");
    invalid_config.config =
        Some(json!({"configType": "Inline", "inline": {"watchNamespace": "Not_A_Namespace"}}));
    invalid_config.expect = Expect::Refused;
    vec![
        s(
            "by-channel",
            "chan",
            vec![installed(json!({"channels": ["stable"]}), "2.0.0")],
        ),
        s("default-channel", "dflt", vec![installed(json!({}), "3.0.0")]),
        s(
            "pinned-version",
            "pin",
            vec![installed(json!({"version": "1.1.0"}), "1.1.0")],
        ),
        s(
            "version-range",
            "range",
            vec![installed(json!({"version": ">=1.0.0 <2.0.0"}), "1.2.0")],
        ),
        s(
            "upgrade-replaces",
            "up-replaces",
            vec![
                installed(json!({"version": "1.0.0"}), "1.0.0"),
                installed(json!({"version": "1.1.0"}), "1.1.0"),
            ],
        ),
        s(
            "upgrade-skips",
            "up-skips",
            vec![
                installed(json!({"version": "1.1.0"}), "1.1.0"),
                installed(json!({"version": "1.2.0"}), "1.2.0"),
            ],
        ),
        s(
            "upgrade-skiprange",
            "up-skiprange",
            vec![
                installed(json!({"version": "1.2.0"}), "1.2.0"),
                installed(json!({"version": "2.0.0"}), "2.0.0"),
            ],
        ),
        s(
            "upgrade-no-edge",
            "up-noedge",
            vec![
                installed(json!({"version": "1.0.0"}), "1.0.0"),
                refused(json!({"version": "2.0.0"})),
            ],
        ),
        s(
            "downgrade-selfcertified",
            "down",
            vec![
                installed(json!({"version": "2.0.0"}), "2.0.0"),
                installed(
                    json!({"version": "1.0.0", "upgradeConstraintPolicy": "SelfCertified"}),
                    "1.0.0",
                ),
            ],
        ),
        s("package-not-found", "no-such-package", vec![refused(json!({}))]),
        s(
            "version-not-found",
            "pin",
            vec![refused(json!({"version": "9.9.9"}))],
        ),
        s(
            "channel-not-found",
            "pin",
            vec![refused(json!({"channels": ["no-such-channel"]}))],
        ),
        s("catalogs-tie", "tie", vec![refused(json!({}))]),
        s("catalog-priority", "prio", vec![installed(json!({}), "1.0.0")]),
        s(
            "deprecated",
            "dep",
            vec![installed(
                json!({"version": "1.0.0", "channels": ["stable"]}),
                "1.0.0",
            )],
        ),
        s("refused-dependency", "deps", vec![refused(json!({}))]),
        s("refused-apiservice", "apisvc", vec![refused(json!({}))]),
        s("own-namespace-only", "ownns", vec![refused(json!({}))]),
        s("invalid-config", "cfg", vec![invalid_config]),
    ]
}

/// Publishes every package the scenarios use, one catalog each (two for the tie and the
/// priority), and the real operator's catalog before and after its upgrade.
pub async fn publish(registry: &str, real_catalog: &std::path::Path) -> Plan {
    let mut catalogs = Vec::new();
    let mut add = async |name: &str, priority: i32, package: Package| {
        let image = fixtures::publish_catalog(registry, &format!("interop/{name}"), "v1", &package).await;
        catalogs.push(CatalogRef {
            name: format!("interop-{name}"),
            image,
            priority,
        });
    };
    add("chan", 0, chain("chan")).await;
    add("dflt", 0, chain("dflt")).await;
    add("pin", 0, chain("pin")).await;
    add("range", 0, chain("range")).await;
    for package in ["up-replaces", "up-skips", "up-skiprange", "up-noedge", "down"] {
        add(package, 0, edges(package)).await;
    }
    add("tie-a", 0, one_version("tie", "1.0.0")).await;
    add("tie-b", 0, one_version("tie", "1.0.0")).await;
    add("prio-high", 1, one_version("prio", "1.0.0")).await;
    add("prio-low", 0, one_version("prio", "1.1.0")).await;
    let mut deprecated = one_version("dep", "1.0.0");
    deprecated.channels = vec![Channel::new("stable", &["1.0.0", "1.1.0"])];
    deprecated
        .bundles
        .push(Bundle::new("1.1.0").replaces("1.0.0", "dep"));
    deprecated.deprecations = vec![
        Deprecated::Package("package dep is end of life".into()),
        Deprecated::Channel("stable".into(), "channel stable is frozen".into()),
        Deprecated::Bundle("1.0.0".into(), "dep.v1.0.0 has a known bug".into()),
    ];
    add("dep", 0, deprecated).await;
    add("cfg", 0, one_version("cfg", "1.0.0")).await;
    for (name, change) in [
        ("deps", BundleChange::Dependency),
        ("apisvc", BundleChange::ApiService),
        ("ownns", BundleChange::OwnNamespaceOnly),
    ] {
        let image = publish_changed(registry, name, change).await;
        catalogs.push(CatalogRef {
            name: format!("interop-{name}"),
            image,
            priority: 0,
        });
    }
    let bundles = ["trident-operator.v26.2.0", "trident-operator.v26.2.1"];
    let real_v1 =
        fixtures::publish_real_package(registry, real_catalog, "trident-operator", &bundles[..1], "v1").await;
    let real_v2 =
        fixtures::publish_real_package(registry, real_catalog, "trident-operator", &bundles, "v2").await;
    Plan {
        catalogs,
        real_v1,
        real_v2,
    }
}

/// A bundle upstream refuses, and why.
#[derive(Clone, Copy)]
enum BundleChange {
    /// An `olm.package.required` property in the catalog.
    Dependency,
    /// The CSV owns an APIService.
    ApiService,
    /// The CSV supports only the OwnNamespace install mode.
    OwnNamespaceOnly,
}

/// Publishes a one-bundle package whose bundle is changed as `change` says; returns the catalog.
async fn publish_changed(registry: &str, package: &str, change: BundleChange) -> String {
    let bundle = Bundle::new("1.0.0");
    let dir = tempfile::tempdir().unwrap();
    fixtures::write_bundle(dir.path(), package, &bundle);
    let csv_path = dir
        .path()
        .join(format!("manifests/{package}.clusterserviceversion.yaml"));
    let mut csv: Value = serde_json::from_slice(&std::fs::read(&csv_path).unwrap()).unwrap();
    match change {
        BundleChange::Dependency => {}
        BundleChange::ApiService => {
            csv["spec"]["apiservicedefinitions"] = json!({"owned": [{
                "group": format!("{package}.e2e.olmv1.io"), "version": "v1alpha1", "kind": "Gadget",
                "name": "gadgets", "displayName": "Gadget",
                "deploymentName": fixtures::deployment_name(package), "containerPort": 8443
            }]});
        }
        BundleChange::OwnNamespaceOnly => {
            for mode in csv["spec"]["installModes"].as_array_mut().unwrap() {
                mode["supported"] = json!(mode["type"] == "OwnNamespace");
            }
        }
    }
    std::fs::write(&csv_path, serde_json::to_vec_pretty(&csv).unwrap()).unwrap();
    let image = fixtures::push(
        dir.path(),
        &format!("{registry}/interop/{package}-bundle:v1.0.0"),
        "/",
        &[(
            "operators.operatorframework.io.bundle.mediatype.v1",
            "registry+v1",
        )],
    )
    .await;
    let name = fixtures::bundle_name(package, "1.0.0");
    let mut properties =
        vec![json!({"type": "olm.package", "value": {"packageName": package, "version": "1.0.0"}})];
    if let BundleChange::Dependency = change {
        properties.push(json!({"type": "olm.package.required", "value": {"packageName": "chan", "versionRange": ">=1.0.0"}}));
    }
    let objects = [
        json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": [{"name": name}]}),
        json!({"schema": "olm.bundle", "name": name, "package": package, "image": image, "properties": properties}),
    ];
    let lines: Vec<String> = objects.iter().map(Value::to_string).collect();
    fixtures::push_catalog(&format!("{registry}/interop/{package}:v1"), package, &lines).await
}

/// The six conditions' (status, reason, message) of a ClusterExtension, `status.install` and its
/// applied objects (`Kind namespace/name`), as recorded for the table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub conditions: BTreeMap<String, Option<[String; 3]>>,
    pub install: Value,
    pub objects: Vec<String>,
}

/// The condition types upstream always reports.
pub const CONDITION_TYPES: [&str; 6] = [
    "Installed",
    "Progressing",
    "Deprecated",
    "PackageDeprecated",
    "ChannelDeprecated",
    "BundleDeprecated",
];
