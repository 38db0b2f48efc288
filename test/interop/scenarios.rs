//! The scenarios of the differences table: one package (or catalog pair) each, so that they run
//! at once without sharing cluster-scoped objects, the steps that bring each to its end state, and
//! the runs that record them (which controller, in which mode, with which YAML).

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

/// The label every scenario catalog carries and every scenario's ClusterExtension selects (the e2e
/// tests' label, with the value `interop`): catalogs other tests leave on a shared control plane,
/// or break on purpose, take no part in a scenario's resolution, under either controller.
pub const CATALOG_LABEL: (&str, &str) = ("olmv1.test/e2e-package", "interop");

/// A recording of every scenario: which controller, in which mode, with which YAML.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Run {
    /// olmv1's controller as it ships (`--dependencies check`, `--install-identity
    /// service-account`): each scenario names ServiceAccount `installer` (but
    /// `no-service-account`, which names none).
    Olmv1,
    /// olmv1's controller in upstream's model ([`Run::controller_args`]) with upstream v1.11's
    /// YAML: no `spec.serviceAccount`, no installer accounts.
    Olmv1UpstreamModel,
    /// Upstream's operator-controller with upstream v1.11's YAML.
    Upstream,
}

impl Run {
    /// What the run is called in tables and file names.
    pub fn label(self) -> &'static str {
        match self {
            Self::Olmv1 => "olmv1",
            Self::Olmv1UpstreamModel => "olmv1-upstream-model",
            Self::Upstream => "upstream",
        }
    }

    /// `olmv1 controller`'s flags for this run, on top of the environment's own (hack/interop.sh
    /// prints them with `interop controller-args`, the CI test passes them): upstream's model is
    /// the controller's identity for every install, dependencies refused and no OperatorConditions,
    /// as upstream does.
    pub fn controller_args(self) -> &'static [&'static str] {
        match self {
            Self::Olmv1 | Self::Upstream => &[],
            Self::Olmv1UpstreamModel => &[
                "--install-identity",
                "controller",
                "--dependencies",
                "refuse",
                "--operator-conditions",
                "off",
            ],
        }
    }

    /// Whether scenario's ClusterExtension names ServiceAccount `installer`.
    pub fn names_installer(self, scenario: &Scenario) -> bool {
        self == Self::Olmv1 && scenario.names_installer
    }
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
    /// What upstream reaches, and olmv1 in upstream's model.
    pub expect: Expect,
    /// What olmv1 as it ships reaches instead, where it differs on purpose (docs/upstream.md).
    pub olmv1_expect: Option<Expect>,
}

impl Step {
    fn new(catalog: Value, expect: Expect) -> Self {
        Self {
            catalog,
            config: None,
            expect,
            olmv1_expect: None,
        }
    }

    /// What this step waits for in `run`.
    pub fn expect_in(&self, run: Run) -> &Expect {
        match (run, &self.olmv1_expect) {
            (Run::Olmv1, Some(expect)) => expect,
            _ => &self.expect,
        }
    }

    /// The step, reaching `expect` under olmv1 as it ships.
    fn olmv1(mut self, expect: Expect) -> Self {
        self.olmv1_expect = Some(expect);
        self
    }
}

/// A row of the differences table: the ClusterExtension `name` in namespace `s-<name>`.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub package: String,
    pub steps: Vec<Step>,
    /// False: the ClusterExtension names no ServiceAccount in any run (upstream v1.11's YAML).
    pub names_installer: bool,
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
        names_installer: true,
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
        // olmv1 as it ships checks the dependency (package `chan`, which `by-channel` installs
        // meanwhile) and installs once it is met.
        s(
            "refused-dependency",
            "deps",
            vec![refused(json!({})).olmv1(Expect::Installed("1.0.0"))],
        ),
        s("refused-apiservice", "apisvc", vec![refused(json!({}))]),
        s("own-namespace-only", "ownns", vec![refused(json!({}))]),
        s("invalid-config", "cfg", vec![invalid_config]),
        // Upstream v1.11's YAML under olmv1 as it ships: blocked, naming how to give it an
        // installer.
        Scenario {
            names_installer: false,
            ..s(
                "no-service-account",
                "nosa",
                vec![installed(json!({}), "1.0.0").olmv1(Expect::Refused)],
            )
        },
    ]
}

/// Publishes every package the scenarios use, one catalog each (two for the tie and the
/// priority), and the real operator's catalog before and after its upgrade.
pub async fn publish(registry: &str, real_catalog: &std::path::Path) -> Plan {
    let catalogs = publish_scenarios(registry).await;
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

/// Publishes every package the scenarios use, one catalog each (two for the tie and the
/// priority); returns their ClusterCatalogs.
pub async fn publish_scenarios(registry: &str) -> Vec<CatalogRef> {
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
    add("nosa", 0, one_version("nosa", "1.0.0")).await;
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
    catalogs
}

/// A bundle upstream refuses, and why.
#[derive(Clone, Copy)]
enum BundleChange {
    /// An `olm.package.required` property in the catalog.
    Dependency,
    /// The CSV owns an APIService served by a Deployment it does not have.
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
            // Its Deployment is not in the bundle: upstream refuses every owned APIService,
            // olmv1 this one (rendered, it would be an APIService nothing serves, failing
            // discovery for every client of the shared cluster).
            csv["spec"]["apiservicedefinitions"] = json!({"owned": [{
                "group": format!("{package}.e2e.olmv1.io"), "version": "v1alpha1", "kind": "Gadget",
                "name": "gadgets", "displayName": "Gadget",
                "deploymentName": "gadget-server", "containerPort": 8443
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
