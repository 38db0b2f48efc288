//! Cluster upgrade gating through the whole product: a bundle's `olm.maxOpenShiftVersion`, as
//! installed by the controller, sets `Upgradeable` on the ClusterOperator olmv1 owns (`olmv1`),
//! against the real OpenShift CRDs.

use kube::{
    Api,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use olmv1_api::v1::ClusterExtension;
use serde_json::{Value, json};

use crate::{
    Scenario, components,
    fixtures::{Bundle, Channel, Package},
    support,
};

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("config.openshift.io", "v1", kind), plural)
}

async fn set_cluster_version(client: &kube::Client, version: &str) {
    let api = Api::<DynamicObject>::all_with(client.clone(), &resource("ClusterVersion", "clusterversions"));
    if api.get_opt("version").await.unwrap().is_none() {
        let mut cv = DynamicObject::new("version", &resource("ClusterVersion", "clusterversions"));
        cv.data = json!({"spec": {"clusterID": "00000000-0000-0000-0000-000000000000"}});
        match api.create(&PostParams::default(), &cv).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create ClusterVersion: {e}"),
        }
    }
    let patch = support::cluster_version_status(version);
    api.patch_status("version", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn wait_upgradeable(client: &kube::Client, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let api =
        Api::<DynamicObject>::all_with(client.clone(), &resource("ClusterOperator", "clusteroperators"));
    support::wait_for(what, components::INSTALL_TIMEOUT, || async {
        let operator = api.get("olmv1").await.map_err(|e| e.to_string())?;
        let condition = operator.data["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Upgradeable").cloned())
            .ok_or("no Upgradeable condition")?;
        if check(&condition) {
            Ok(condition)
        } else {
            Err(condition.to_string())
        }
    })
    .await
}

#[tokio::test]
async fn an_installed_bundle_with_an_old_max_openshift_version_blocks_the_next_minor() {
    let package = |p: &str| Package {
        name: p.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["1.0.0", "1.1.0"])],
        bundles: vec![
            Bundle::new("1.0.0").max_openshift_version(json!("4.18")),
            Bundle::new("1.1.0")
                .replaces("1.0.0", p)
                .max_openshift_version(json!("4.19")),
        ],
        deprecations: vec![],
    };
    // Exclusive: the cluster version and the `olmv1` ClusterOperator are cluster-wide.
    let s = Scenario::new_exclusive("gating", package).await;
    set_cluster_version(&s.client, "4.18.3").await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    let expected = format!(
        "bundle \"{}.v1.0.0\" for ClusterExtension \"{}\"",
        s.package, s.extension
    );
    let blocked = wait_upgradeable(&s.client, "Upgradeable=False naming the extension", |c| {
        c["status"] == "False" && c["message"].as_str().unwrap_or_default().contains(&expected)
    })
    .await;
    assert_eq!(blocked["reason"], "IncompatibleOperatorsInstalled");
    // The ClusterOperator olmv1 created carries what a ClusterOperator is expected to.
    let operator =
        Api::<DynamicObject>::all_with(s.client.clone(), &resource("ClusterOperator", "clusteroperators"))
            .get("olmv1")
            .await
            .unwrap();
    let status = &operator.data["status"];
    assert_eq!(status["versions"][0]["name"], "operator", "{status}");
    assert_eq!(
        status["versions"][0]["version"],
        env!("CARGO_PKG_VERSION"),
        "{status}"
    );
    assert_eq!(
        status["relatedObjects"][0],
        json!({"group": "", "resource": "namespaces", "name": components::SYSTEM_NAMESPACE}),
        "{status}"
    );
    let available = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(available["status"], "True", "{status}");
    assert!(
        blocked["message"].as_str().unwrap().starts_with(
            "Found ClusterExtensions that require upgrades prior to upgrading cluster to version 4.19:"
        ),
        "{blocked}"
    );

    // Upgrading to a bundle that supports 4.19 unblocks.
    s.apply_extension(json!({"version": "1.1.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    wait_upgradeable(&s.client, "Upgradeable=True after the upgrade", |c| {
        c["status"] == "True"
    })
    .await;

    // Back to 1.0.0 blocks again; deleting the extension unblocks.
    s.roll_back_to("1.0.0").await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    wait_upgradeable(&s.client, "Upgradeable=False after the rollback", |c| {
        c["status"] == "False"
    })
    .await;
    Api::<ClusterExtension>::all(s.client.clone())
        .delete(&s.extension, &DeleteParams::default())
        .await
        .unwrap();
    wait_upgradeable(&s.client, "Upgradeable=True after the delete", |c| {
        c["status"] == "True"
    })
    .await;
}
