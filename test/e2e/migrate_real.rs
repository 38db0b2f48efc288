//! A real operator of `../shared/catalogs` (trident-operator 26.2.0) as classic leaves it
//! (`classic::RealBundle`), moved to olmv1 by `olmv1 migrate`: its catalog made a
//! ClusterCatalog, judged Eligible with no pod restart, converted in place with its pods,
//! ReplicaSets and Deployment generation unchanged.

use k8s_openapi::{
    api::{apps::v1::Deployment, core::v1::ServiceAccount, rbac::v1::Role},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, ListParams},
};
use olmv1_api::v1::{ClusterCatalog, ClusterExtension};

use crate::{
    classic::{self, Classic, RealBundle},
    components::{self, olmv1},
    migrate::{check_row, json_out, workload},
    support,
};

const CATALOG: &str = "../shared/catalogs/community-operators-v4.16";
const PACKAGE: &str = "trident-operator";
const BUNDLE: &str = "trident-operator.v26.2.0";
const CRD: &str = "tridentorchestrators.trident.netapp.io";

/// Tests that install trident-operator take turns: its CRD is cluster-wide, and an install
/// (classic's or an extension's) refuses a CRD another one owns. Each removes its own before
/// letting go.
pub static TRIDENT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Uninstalls extension `name` (its CRD with it) and deletes ClusterCatalog `catalog`, so that
/// the next holder of [`TRIDENT`] starts without either.
pub async fn remove_trident(client: &Client, name: &str, catalog: &str) {
    Api::<ClusterExtension>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    support::wait_for(
        &format!("{CRD} uninstalled with {name}"),
        components::INSTALL_TIMEOUT,
        || async {
            match crds.get_opt(CRD).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("still there".to_string()),
            }
        },
    )
    .await;
    Api::<ClusterCatalog>::all(client.clone())
        .delete(catalog, &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_real_operator_laid_down_by_classic_is_converted_with_its_pods() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let client = support::client().await;
    let _trident = TRIDENT.lock().await;
    let real = RealBundle {
        catalog_dir: support::repo_root().join(CATALOG),
        package: PACKAGE.into(),
        published: vec![BUNDLE.into()],
        installed: BUNDLE.into(),
        tag: "classic".into(),
    };
    let subscription = support::fresh_name("trident");
    let started = std::time::Instant::now();
    let install = classic::lay_down(&client, &Classic::real(real).subscription(&subscription)).await;
    eprintln!("classic's footprint laid down in {:?}", started.elapsed());
    let ns = install.namespace.as_str();

    // The footprint, from the CSV: its one deployment with classic's pod-template annotations
    // and injected env next to the bundle's own, its ServiceAccount and Role owned by the CSV,
    // its CRD labelled, the CSV Succeeded, the InstallPlan Complete with the bundle image.
    assert_eq!(install.csv, BUNDLE);
    assert_eq!(install.deployments, ["trident-operator"]);
    let deployment = classic::wait_available(&client, ns, "trident-operator").await;
    let template = deployment.spec.as_ref().unwrap().template.clone();
    let annotations = template.metadata.as_ref().unwrap().annotations.clone().unwrap();
    assert_eq!(annotations["olm.operatorGroup"], install.operator_group);
    assert_eq!(annotations["olm.operatorNamespace"], ns);
    assert_eq!(annotations["olm.targetNamespaces"], "");
    assert_eq!(annotations["capabilities"], "Seamless Upgrades");
    assert!(annotations["operatorframework.io/properties"].contains("\"packageName\":\"trident-operator\""));
    let env: Vec<String> = template.spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(env, ["POD_NAME", "OPERATOR_NAME", "OPERATOR_CONDITION_NAME"]);
    let labels = deployment.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["olm.owner"], BUNDLE);
    assert_eq!(
        deployment.metadata.owner_references.as_ref().unwrap()[0].uid,
        install.csv_uid
    );
    let sa = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .get("trident-operator")
        .await
        .unwrap();
    assert_eq!(sa.metadata.owner_references.unwrap()[0].name, BUNDLE);
    let roles = Api::<Role>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("olm.owner={BUNDLE}")))
        .await
        .unwrap();
    assert_eq!(roles.items.len(), 1, "one Role for the CSV's one permission");
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(CRD)
        .await
        .unwrap();
    let crd_labels = crd.metadata.labels.unwrap();
    assert_eq!(crd_labels["olm.managed"], "true");
    assert!(crd_labels.contains_key(&classic::component_label(PACKAGE, ns)));
    assert!(
        crd.metadata
            .annotations
            .unwrap()
            .values()
            .any(|v| *v == format!("{ns}/{BUNDLE}"))
    );
    let og: DynamicObject = Api::namespaced_with(client.clone(), ns, &classic::operator_groups())
        .get(&install.operator_group)
        .await
        .unwrap();
    assert_eq!(
        og.metadata.annotations.unwrap()["olm.providedAPIs"],
        "TridentOrchestrator.v1.trident.netapp.io"
    );
    let plan: DynamicObject = Api::namespaced_with(client.clone(), ns, &classic::install_plans())
        .get(&install.install_plan)
        .await
        .unwrap();
    assert_eq!(plan.data["status"]["phase"], "Complete");
    assert_eq!(
        plan.data["status"]["bundleLookups"][0]["path"],
        install.bundle_image.as_str()
    );

    // Its CatalogSource, and it alone, made a ClusterCatalog.
    let lines = json_out(olmv1(&[
        "migrate",
        "catalogs",
        &install.catalog_source,
        "-n",
        &install.catalog_namespace,
        "-o",
        "json",
    ]));
    let lines = lines.as_array().unwrap();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["action"], "create", "{lines:#?}");
    let catalog = lines[0]["clusterCatalog"].as_str().unwrap().to_string();
    components::wait_catalog_serving(&client, &catalog).await;

    // Eligible, and olmv1 renders the pod template as classic left it.
    let row = check_row(&install);
    assert_eq!(row["verdict"], "Eligible", "{row:#}");
    assert_eq!(row["podsRestart"], "no", "{row:#}");
    assert_eq!(row["clusterCatalog"], catalog.as_str());
    assert_eq!(row["installedCSV"], BUNDLE);
    assert_eq!(row["version"], "26.2.0");

    // Converted in place: the extension Installed at 26.2.0, the workload as it was.
    let before = workload(&client, &install).await;
    assert!(!before.pods.is_empty(), "{before:?}");
    let started = std::time::Instant::now();
    let out = olmv1(&["migrate", "convert", &subscription, "-n", ns, "--yes"]).ok();
    eprintln!("{out}\nconverted in {:?}", started.elapsed());
    assert!(
        out.contains(&format!(
            "clusterextension/{subscription} Installed: {BUNDLE} 26.2.0"
        )),
        "{out}"
    );
    components::wait_installed(&client, &subscription, "26.2.0").await;
    assert_eq!(workload(&client, &install).await, before);
    let row = check_row(&install);
    assert_eq!(row["verdict"], "Migrated", "{row:#}");
    // Classic is detached: its Subscription and CSV gone, nothing adopted refers to the CSV.
    for (ar, name) in [
        (classic::subscriptions(), subscription.as_str()),
        (classic::csvs(), BUNDLE),
    ] {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar);
        assert!(api.get_opt(name).await.unwrap().is_none(), "{} {name}", ar.kind);
    }
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns)
        .get("trident-operator")
        .await
        .unwrap();
    let labels = deployment.metadata.labels.unwrap();
    assert_eq!(labels["olm.operatorframework.io/owner-name"], subscription);
    assert!(!labels.contains_key("olm.owner"), "{labels:?}");
    let sa = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .get("trident-operator")
        .await
        .unwrap();
    for refs in [deployment.metadata.owner_references, sa.metadata.owner_references] {
        assert!(
            refs.iter().flatten().all(|r| r.kind != "ClusterServiceVersion"),
            "{refs:?}"
        );
    }
    // The CRD is the extension's now.
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(CRD)
        .await
        .unwrap();
    assert_eq!(
        crd.metadata.labels.unwrap()["olm.operatorframework.io/owner-name"],
        subscription
    );

    remove_trident(&client, &subscription, &catalog).await;
}
