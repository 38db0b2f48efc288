//! Cluster upgrade gating on the local control plane: the Upgradeable reconciler against the real
//! OpenShift ClusterVersion, ClusterOperator and OLM CRDs (../shared/openshift-api/), driven by
//! revision record Secrets as the controller writes them.

#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString, api::core::v1::Secret,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
};
use olmv1::{
    apply::{
        ownership::owner_labels,
        revision::{InstalledRevision, RECORD_KEY, RECORD_SECRET_TYPE},
    },
    catalog::Property,
    controller::upgradeable::{
        self, MajorMinor, UpgradeableConfig, UpgradeableMetrics, UpgradeableMode,
        reconciler::{
            CLUSTER_VERSION_NAME, OLM_OPERATOR_NAME, cluster_operator_resource, cluster_version_resource,
            olm_operator_resource,
        },
    },
};
use olmv1_api::v1::{
    CatalogFilter, ClusterExtension, ClusterExtensionSpec, ServiceAccountReference, SourceConfig, SourceType,
};
use prometheus_client::registry::Registry;
use serde_json::json;
use support::{DEFAULT_TIMEOUT, fresh_name, fresh_namespace, wait_for};

const TEST_MANAGER: &str = "olmv1-upgradeable-test";

/// Installs the OpenShift CRDs (idempotent) and waits until discovery serves both resources.
async fn install_openshift_crds(client: &Client) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for path in support::openshift_crd_files() {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
        let name = crd.metadata.name.clone().expect("CRD name");
        crds.patch(
            &name,
            &PatchParams::apply(TEST_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("install CRD {name}: {e}"));
    }
    for (group_version, plurals) in [
        (
            "config.openshift.io/v1",
            &["clusteroperators", "clusterversions"][..],
        ),
        ("operator.openshift.io/v1", &["olms"][..]),
    ] {
        wait_for(
            &format!("{group_version} to serve {plurals:?}"),
            DEFAULT_TIMEOUT,
            || async {
                let list = client
                    .list_api_group_resources(group_version)
                    .await
                    .map_err(|e| e.to_string())?;
                let names: Vec<&str> = list.resources.iter().map(|r| r.name.as_str()).collect();
                if plurals.iter().all(|p| names.contains(p)) {
                    Ok(())
                } else {
                    Err(format!("served: {names:?}"))
                }
            },
        )
        .await;
    }
}

/// Sets ClusterVersion `version`'s status.desired.version, creating the object if needed.
async fn set_cluster_version(client: &Client, version: &str) {
    let api = Api::<DynamicObject>::all_with(client.clone(), &cluster_version_resource());
    if api
        .get_opt(CLUSTER_VERSION_NAME)
        .await
        .expect("get ClusterVersion")
        .is_none()
    {
        let mut cv = DynamicObject::new(CLUSTER_VERSION_NAME, &cluster_version_resource());
        cv.data = json!({"spec": {"clusterID": "00000000-0000-0000-0000-000000000000"}});
        match api.create(&PostParams::default(), &cv).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => panic!("create ClusterVersion: {e}"),
        }
    }
    let patch = support::cluster_version_status(version);
    api.patch_status(
        CLUSTER_VERSION_NAME,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .unwrap_or_else(|e| panic!("set ClusterVersion to {version}: {e}"));
}

async fn create_cluster_extension(client: &Client, name: &str, namespace: &str) {
    let spec = ClusterExtensionSpec {
        namespace: namespace.to_owned(),
        service_account: Some(ServiceAccountReference {
            name: "installer".to_owned(),
        }),
        source: SourceConfig {
            source_type: SourceType::Catalog,
            catalog: Some(CatalogFilter {
                package_name: "upgradeable-test".to_owned(),
                ..CatalogFilter::default()
            }),
        },
        install: None,
        config: None,
        progress_deadline_minutes: None,
    };
    Api::<ClusterExtension>::all(client.clone())
        .create(&PostParams::default(), &ClusterExtension::new(name, spec))
        .await
        .unwrap_or_else(|e| panic!("create ClusterExtension {name}: {e}"));
}

/// Writes the revision record of EXTENSION as the controller does: bundle BUNDLE with
/// `olm.maxOpenShiftVersion` MAX (none when `None`).
async fn write_record(
    client: &Client,
    namespace: &str,
    extension: &str,
    bundle: &str,
    max: Option<serde_json::Value>,
) {
    let record = InstalledRevision {
        revision: 1,
        package: "upgradeable-test".to_owned(),
        bundle_name: bundle.to_owned(),
        bundle_version: "1.0.0".to_owned(),
        image: "registry.example/bundle@sha256:0000".to_owned(),
        properties: max
            .into_iter()
            .map(|value| Property::new("olm.maxOpenShiftVersion", value.into()))
            .collect(),
        ..InstalledRevision::default()
    };
    let mut secret = Secret::default();
    let name = format!("{extension}-revision");
    secret.metadata.name = Some(name.clone());
    secret.metadata.namespace = Some(namespace.to_owned());
    secret.metadata.labels = Some(owner_labels(extension));
    secret.type_ = Some(RECORD_SECRET_TYPE.to_owned());
    let json = serde_json::to_vec(&record).expect("record serializes");
    secret.data = Some(BTreeMap::from([(RECORD_KEY.to_owned(), ByteString(json))]));
    Api::<Secret>::namespaced(client.clone(), namespace)
        .patch(
            &name,
            &PatchParams::apply(TEST_MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await
        .unwrap_or_else(|e| panic!("write record {namespace}/{name}: {e}"));
}

/// Writes a record whose JSON is not a record at all.
async fn write_broken_record(client: &Client, namespace: &str, extension: &str) {
    let name = format!("{extension}-revision");
    let patch = json!({"data": {RECORD_KEY: "bm90IGpzb24="}}); // "not json"
    Api::<Secret>::namespaced(client.clone(), namespace)
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("break record {namespace}/{name}: {e}"));
}

/// The ClusterOperator's conditions, as JSON.
async fn conditions(client: &Client, name: &str) -> Result<Vec<serde_json::Value>, String> {
    let api = Api::<DynamicObject>::all_with(client.clone(), &cluster_operator_resource());
    let co = api
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no ClusterOperator yet")?;
    Ok(co
        .data
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default())
}

/// `(status, reason, message)` of the Upgradeable condition.
#[derive(Debug)]
struct Upgradeable {
    status: String,
    reason: String,
    message: String,
}

/// Waits until the Upgradeable condition satisfies CHECK and returns it.
async fn wait_upgradeable(
    client: &Client,
    co: &str,
    what: &str,
    check: impl Fn(&Upgradeable) -> bool,
) -> Upgradeable {
    wait_for(what, DEFAULT_TIMEOUT, || async {
        let conditions = conditions(client, co).await?;
        let c = conditions
            .iter()
            .find(|c| c["type"] == "Upgradeable")
            .ok_or("no Upgradeable condition")?;
        let field = |name: &str| c[name].as_str().unwrap_or_default().to_owned();
        let seen = Upgradeable {
            status: field("status"),
            reason: field("reason"),
            message: field("message"),
        };
        if check(&seen) {
            Ok(seen)
        } else {
            Err(format!("{seen:?}"))
        }
    })
    .await
}

fn is_true(u: &Upgradeable) -> bool {
    u.status == "True" && u.reason == "AsExpected"
}

fn metrics_text(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("metrics encode");
    text
}

/// Aborts the reconciler when the test ends, however it ends.
struct Running(tokio::task::JoinHandle<()>);
impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn start(client: &Client, config: UpgradeableConfig, metrics: UpgradeableMetrics) -> Running {
    // No watch follows the APIs here: the OpenShift CRDs are installed before it starts.
    let api_changes = tokio::sync::watch::channel(0).1;
    Running(tokio::spawn(upgradeable::run(
        client.clone(),
        config,
        metrics,
        api_changes,
    )))
}

#[tokio::test]
async fn upgradeable_follows_installed_bundles_and_the_cluster_version() {
    let client = support::client().await;
    install_openshift_crds(&client).await;
    set_cluster_version(&client, "4.18.3").await;
    let system_namespace = fresh_namespace(&client, "upgradeable").await;
    let co = fresh_name("olm");

    // A ClusterOperator of that name already carries a condition the cluster-version operator
    // added and a stale version: olmv1 takes the status over and keeps foreign conditions.
    let co_api = Api::<DynamicObject>::all_with(client.clone(), &cluster_operator_resource());
    let mut object = DynamicObject::new(&co, &cluster_operator_resource());
    object.data = json!({"spec": {}});
    co_api
        .create(&PostParams::default(), &object)
        .await
        .expect("create ClusterOperator");
    let others = json!([
        {"type": "EvaluationConditionsDetected", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "NoData", "message": "ok"},
        {"type": "Available", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "Stale"},
    ]);
    let status =
        json!({"status": {"conditions": others, "versions": [{"name": "operator", "version": "4.18.3"}]}});
    co_api
        .patch_status(&co, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("seed status");

    let extension = fresh_name("fusion");
    create_cluster_extension(&client, &extension, &system_namespace).await;
    write_record(
        &client,
        &system_namespace,
        &extension,
        "fusion.v1.0.1",
        Some(json!("4.18")),
    )
    .await;

    let mut registry = Registry::default();
    let metrics = UpgradeableMetrics::register(&mut registry);
    let mut config = UpgradeableConfig::new(system_namespace.clone());
    config.cluster_operator_name = co.clone();
    let _running = start(&client, config, metrics);

    // 4.18 max on a 4.18 cluster: the upgrade to 4.19 is blocked, naming the extension.
    let blocked = wait_upgradeable(&client, &co, "Upgradeable=False naming the extension", |u| {
        u.status == "False" && u.reason == "IncompatibleOperatorsInstalled"
    })
    .await;
    assert_eq!(
        blocked.message,
        format!(
            "Found ClusterExtensions that require upgrades prior to upgrading cluster to version 4.19: \
             bundle \"fusion.v1.0.1\" for ClusterExtension \"{extension}\"."
        )
    );
    let text = metrics_text(&registry);
    assert!(text.contains("olmv1_upgradeable_blocking_extensions 1"), "{text}");
    assert!(
        text.contains(&format!("cluster_extension=\"{extension}\"")),
        "{text}"
    );

    // Foreign conditions are kept; olmv1 owns the rest of the status.
    let now = conditions(&client, &co).await.expect("conditions");
    let types: Vec<&str> = now.iter().filter_map(|c| c["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "EvaluationConditionsDetected",
            "Available",
            "Progressing",
            "Degraded",
            "Upgradeable"
        ]
    );
    assert_eq!(now[0], others[0], "a foreign condition is kept as it is");
    for (i, (status, reason)) in [
        ("True", "AsExpected"),
        ("False", "AsExpected"),
        ("False", "AsExpected"),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(
            (now[i + 1]["status"].as_str(), now[i + 1]["reason"].as_str()),
            (Some(status), Some(reason))
        );
        assert!(now[i + 1]["lastTransitionTime"].is_string(), "{now:?}");
    }
    let fetched = co_api.get(&co).await.expect("get ClusterOperator");
    assert_eq!(
        fetched.data["status"]["versions"],
        json!([{"name": "operator", "version": env!("CARGO_PKG_VERSION")}])
    );
    assert_eq!(
        fetched.data["status"]["relatedObjects"],
        json!([
            {"group": "", "resource": "namespaces", "name": system_namespace},
            {"group": "olm.operatorframework.io", "resource": "clusterextensions", "name": ""},
            {"group": "olm.operatorframework.io", "resource": "clustercatalogs", "name": ""},
        ])
    );

    // Upgraded to a bundle declaring 4.19: nothing blocks.
    write_record(
        &client,
        &system_namespace,
        &extension,
        "fusion.v1.1.0",
        Some(json!("4.19")),
    )
    .await;
    wait_upgradeable(&client, &co, "Upgradeable=True after the upgrade", is_true).await;

    // Back to 4.18 (a JSON number this time), then the record goes away (uninstalled): True.
    write_record(
        &client,
        &system_namespace,
        &extension,
        "fusion.v1.0.1",
        Some(json!(4.18)),
    )
    .await;
    wait_upgradeable(&client, &co, "Upgradeable=False again", |u| u.status == "False").await;
    Api::<Secret>::namespaced(client.clone(), &system_namespace)
        .delete(&format!("{extension}-revision"), &DeleteParams::default())
        .await
        .expect("delete record");
    wait_upgradeable(
        &client,
        &co,
        "Upgradeable=True after the record is deleted",
        is_true,
    )
    .await;

    // A garbage value: the metadata cannot be read.
    write_record(
        &client,
        &system_namespace,
        &extension,
        "fusion.v9",
        Some(json!("abcd")),
    )
    .await;
    let failed = wait_upgradeable(
        &client,
        &co,
        "Upgradeable=False/FailureGettingExtensionMetadata",
        |u| u.status == "False" && u.reason == "FailureGettingExtensionMetadata",
    )
    .await;
    assert_eq!(
        failed.message,
        format!(
            "error(s) with cluster extension {extension}: error in bundle fusion.v9: error converting to \
             semver for version \"abcd\": failed to parse \"abcd\" as semver: expected <major>.<minor>"
        )
    );
    assert!(metrics_text(&registry).contains("olmv1_upgradeable_metadata_errors 1"));

    // A record that is not JSON: also a metadata failure for that extension.
    write_broken_record(&client, &system_namespace, &extension).await;
    wait_upgradeable(&client, &co, "a broken record reported", |u| {
        u.reason == "FailureGettingExtensionMetadata"
            && u.message.contains("the revision record of ClusterExtension")
    })
    .await;

    // 4.18 max again, then the cluster goes back to 4.17: 4.18 is its next minor, so True.
    write_record(
        &client,
        &system_namespace,
        &extension,
        "fusion.v1.0.1",
        Some(json!("4.18")),
    )
    .await;
    wait_upgradeable(&client, &co, "Upgradeable=False on 4.18", |u| {
        u.reason == "IncompatibleOperatorsInstalled"
    })
    .await;
    set_cluster_version(&client, "4.17.0").await;
    wait_upgradeable(&client, &co, "Upgradeable=True on a 4.17 cluster", is_true).await;

    // Someone else rewrites the conditions without ours: they come back, theirs stay.
    let mut replaced = vec![others[0].clone()];
    replaced.push(
        json!({"type": "Progressing", "status": "False", "lastTransitionTime": "2024-01-02T00:00:00Z"}),
    );
    let status = json!({"status": {"conditions": replaced}});
    co_api
        .patch_status(&co, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("rewrite status");
    wait_upgradeable(&client, &co, "Upgradeable restored", is_true).await;
    let now = conditions(&client, &co).await.expect("conditions");
    let types: Vec<&str> = now.iter().filter_map(|c| c["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "EvaluationConditionsDetected",
            "Progressing",
            "Available",
            "Degraded",
            "Upgradeable"
        ]
    );
    assert_eq!(now[0], others[0]);
    assert_eq!(now[1]["reason"], "AsExpected", "olmv1 owns Progressing: {now:?}");
}

#[tokio::test]
async fn creates_the_cluster_operator_and_honours_the_cluster_version_flag() {
    let client = support::client().await;
    install_openshift_crds(&client).await;
    let system_namespace = fresh_namespace(&client, "upgradeable-flag").await;
    let co = fresh_name("olm");

    // Two installed extensions (one blocking), one created but not installed yet (no record),
    // and a record left behind by an extension that no longer exists.
    let (old, new, pending) = (fresh_name("old"), fresh_name("new"), fresh_name("pending"));
    for name in [&old, &new, &pending] {
        create_cluster_extension(&client, name, &system_namespace).await;
    }
    write_record(&client, &system_namespace, &old, "old.v1", Some(json!("4.20"))).await;
    write_record(&client, &system_namespace, &new, "new.v2", Some(json!("4.21"))).await;
    write_record(
        &client,
        &system_namespace,
        &fresh_name("gone"),
        "gone.v1",
        Some(json!("4.1")),
    )
    .await;

    let mut config = UpgradeableConfig::new(system_namespace.clone());
    config.cluster_operator_name = co.clone();
    config.cluster_version = Some(MajorMinor::new(4, 20)); // --cluster-version 4.20.x
    let mut registry = Registry::default();
    let _running = start(&client, config, UpgradeableMetrics::register(&mut registry));

    let blocked = wait_upgradeable(
        &client,
        &co,
        "the ClusterOperator created with Upgradeable=False",
        |u| u.status == "False",
    )
    .await;
    assert_eq!(blocked.reason, "IncompatibleOperatorsInstalled");
    assert_eq!(
        blocked.message,
        format!(
            "Found ClusterExtensions that require upgrades prior to upgrading cluster to version 4.21: \
             bundle \"old.v1\" for ClusterExtension \"{old}\"."
        )
    );

    // Deleting the blocking ClusterExtension clears the block (its leftover record is ignored).
    Api::<ClusterExtension>::all(client.clone())
        .delete(&old, &DeleteParams::default())
        .await
        .expect("delete");
    wait_upgradeable(&client, &co, "Upgradeable=True once the blocker is gone", is_true).await;
    let text = metrics_text(&registry);
    assert!(text.contains("olmv1_upgradeable_blocking_extensions 0"), "{text}");
    assert!(text.contains("olmv1_upgradeable 1"), "{text}");
}

/// The `InstalledOLMOperatorsUpgradeable` condition of OLM `cluster`, once it satisfies CHECK.
async fn wait_olm_condition(
    client: &Client,
    what: &str,
    check: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let api = Api::<DynamicObject>::all_with(client.clone(), &olm_operator_resource());
    wait_for(what, DEFAULT_TIMEOUT, || async {
        let olm = api.get(OLM_OPERATOR_NAME).await.map_err(|e| e.to_string())?;
        let condition = olm.data["status"]["conditions"]
            .as_array()
            .and_then(|c| {
                c.iter()
                    .find(|c| c["type"] == "InstalledOLMOperatorsUpgradeable")
                    .cloned()
            })
            .ok_or("no InstalledOLMOperatorsUpgradeable condition")?;
        if check(&condition) {
            Ok(condition)
        } else {
            Err(condition.to_string())
        }
    })
    .await
}

#[tokio::test]
async fn integrated_mode_writes_installed_olm_operators_upgradeable_on_the_olm_object() {
    let client = support::client().await;
    install_openshift_crds(&client).await;
    let system_namespace = fresh_namespace(&client, "upgradeable-olm").await;

    // OLM `cluster` as cluster-olm-operator keeps it, with one of its own conditions.
    let olm_api = Api::<DynamicObject>::all_with(client.clone(), &olm_operator_resource());
    if olm_api
        .get_opt(OLM_OPERATOR_NAME)
        .await
        .expect("get OLM")
        .is_none()
    {
        let mut olm = DynamicObject::new(OLM_OPERATOR_NAME, &olm_operator_resource());
        olm.data = json!({"spec": {"managementState": "Managed"}});
        olm_api
            .create(&PostParams::default(), &olm)
            .await
            .expect("create OLM cluster");
    }
    let theirs = json!({"type": "CatalogdDeploymentAvailable", "status": "True",
        "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "AsExpected"});
    let seed = json!({"status": {"conditions": [theirs.clone()]}});
    olm_api
        .patch_status(OLM_OPERATOR_NAME, &PatchParams::default(), &Patch::Merge(&seed))
        .await
        .expect("seed OLM status");

    let extension = fresh_name("fusion");
    create_cluster_extension(&client, &extension, &system_namespace).await;
    write_record(
        &client,
        &system_namespace,
        &extension,
        "fusion.v1.0.1",
        Some(json!("4.18")),
    )
    .await;

    let co = fresh_name("unused");
    let mut config = UpgradeableConfig::new(system_namespace.clone());
    config.mode = UpgradeableMode::Integrated;
    config.cluster_operator_name = co.clone();
    config.cluster_version = Some(MajorMinor::new(4, 18));
    let _running = start(&client, config, UpgradeableMetrics::default());

    let blocked = wait_olm_condition(&client, "InstalledOLMOperatorsUpgradeable=False", |c| {
        c["status"] == "False" && c["message"].as_str().unwrap_or_default().contains(&extension)
    })
    .await;
    assert_eq!(blocked["reason"], "IncompatibleOperatorsInstalled");
    assert_eq!(
        blocked["message"],
        format!(
            "Found ClusterExtensions that require upgrades prior to upgrading cluster to version 4.19: \
             bundle \"fusion.v1.0.1\" for ClusterExtension \"{extension}\"."
        )
    );
    let olm = olm_api.get(OLM_OPERATOR_NAME).await.expect("get OLM");
    assert_eq!(
        olm.data["status"]["conditions"][0], theirs,
        "cluster-olm-operator's condition kept"
    );

    // Compatible: True with neither reason nor message, as cluster-olm-operator writes it.
    write_record(
        &client,
        &system_namespace,
        &extension,
        "fusion.v1.1.0",
        Some(json!("4.19")),
    )
    .await;
    let fine = wait_olm_condition(&client, "InstalledOLMOperatorsUpgradeable=True", |c| {
        c["status"] == "True"
    })
    .await;
    let keys: Vec<&String> = fine.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["lastTransitionTime", "status", "type"], "{fine}");

    // cluster-olm-operator rewrites its conditions without ours: ours comes back.
    olm_api
        .patch_status(OLM_OPERATOR_NAME, &PatchParams::default(), &Patch::Merge(&seed))
        .await
        .expect("rewrite OLM status");
    wait_olm_condition(&client, "the condition restored", |c| c["status"] == "True").await;

    // Unreadable metadata: FailureGettingExtensionMetadata with upstream's message.
    write_record(
        &client,
        &system_namespace,
        &extension,
        "fusion.v9",
        Some(json!("abcd")),
    )
    .await;
    let failed = wait_olm_condition(&client, "FailureGettingExtensionMetadata", |c| {
        c["reason"] == "FailureGettingExtensionMetadata"
    })
    .await;
    assert_eq!(failed["status"], "False");
    assert!(
        failed["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!(
                "error(s) with cluster extension {extension}: error in bundle fusion.v9: "
            )),
        "{failed}"
    );

    // Integrated mode never creates a ClusterOperator of its own.
    let co_api = Api::<DynamicObject>::all_with(client.clone(), &cluster_operator_resource());
    assert!(co_api.get_opt(&co).await.expect("get").is_none());
    Api::<ClusterExtension>::all(client.clone())
        .delete(&extension, &DeleteParams::default())
        .await
        .expect("delete");
}
