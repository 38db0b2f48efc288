//! Reads what `migrate check` judges: classic's objects, the ClusterCatalogs with their content,
//! the ClusterExtensions, and, for each Subscription whose bundle a catalog carries, whether
//! olmv1 renders its pod templates as they run now.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{apps::v1::Deployment, core::v1::Secret},
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, ObjectList},
};
use olmv1_api::v1::{ClusterCatalog, ClusterExtension};
use serde_json::{Value, json};

use super::{
    MigrateError, certificate,
    check::{
        CARRIED_CONFIG_KEYS, CatalogView, CertificateVerdict, CheckRow, ExtensionView,
        MIGRATED_FROM_ANNOTATION, PROPERTIES_ANNOTATION, PodRestart, SOURCE_ANNOTATION, Snapshot, check,
        differences, target_namespaces,
    },
    classic::{ClassicObject, Kind, Subscription, api_resource, key},
};
use crate::{
    admin::{
        cluster::{SourcedCatalog, cluster_catalogs},
        sources::CatalogSources,
    },
    bundle::{
        registry_v1::RegistryV1Bundle,
        render::{RenderOptions, render_with_options},
    },
    catalog::{PROPERTY_PACKAGE, Property, client::CatalogClient},
    controller::cluster_extension::operator_conditions,
    image::{PullOptions, pull_and_read},
    meter::Meter,
};

/// Objects asked for per list request: pages keep each answer, and our memory, bounded on
/// clusters with many objects of a kind.
pub const LIST_PAGE_SIZE: u32 = 500;

/// CSVs asked for per list request: a CSV carries its operator's description, icon and examples
/// (real ones run to hundreds of KB, and the API server takes up to 1.5 MiB), so a page of 50
/// is a few MB, and at most about 75 MiB.
pub const CSV_PAGE_SIZE: u32 = 50;

/// The label selector of the CSVs a migration reads: classic's copies of a CSV in the namespaces
/// its OperatorGroup targets (labelled `olm.copiedFrom`) are its bookkeeping, not installs, and
/// can be most of a cluster's CSVs; the API server leaves them out.
pub const NOT_COPIED: &str = "!olm.copiedFrom";

/// Differences named in one pod-restart reason: enough to act on, short enough to read.
pub const MAX_SHOWN_DIFFERENCES: usize = 3;

/// Lists every object of a classic kind (cluster-wide), read into `T` straight from each page
/// (only `T`'s fields are built; a page is dropped once read), CSVs without classic's copies.
/// Of each object's metadata, the server's field manager records are dropped, and a CSV keeps
/// only the annotation a migration reads ([`PROPERTIES_ANNOTATION`]). A cluster without
/// classic's CRDs has none.
pub async fn list_classic<T: ClassicObject>(client: &Client, kind: Kind) -> Result<Vec<T>, MigrateError> {
    let ar = api_resource(kind);
    let path = format!("/apis/{}/{}/{}", ar.group, ar.version, ar.plural);
    let mut out = Vec::new();
    let mut params = match kind {
        Kind::Csv => ListParams::default().limit(CSV_PAGE_SIZE).labels(NOT_COPIED),
        _ => ListParams::default().limit(LIST_PAGE_SIZE),
    };
    let failed = |source| MigrateError::Api {
        what: format!("listing {}s", ar.kind),
        source,
    };
    loop {
        let request = kube::core::Request::new(&path)
            .list(&params)
            .map_err(|e| failed(kube::Error::BuildRequest(e)))?;
        let page: ObjectList<T> = match client.request(request).await {
            Ok(page) => page,
            Err(kube::Error::Api(e)) if e.code == 404 && out.is_empty() => return Ok(Vec::new()),
            Err(source) => return Err(failed(source)),
        };
        for mut item in page.items {
            let meta = item.metadata_mut();
            meta.managed_fields = None;
            if kind == Kind::Csv
                && let Some(annotations) = meta.annotations.as_mut()
            {
                annotations.retain(|k, _| k == PROPERTIES_ANNOTATION);
            }
            out.push(item);
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(out),
        }
    }
}

/// The ClusterCatalogs as the check sees them, their content read through catalogd.
pub fn catalog_views(catalogs: &[ClusterCatalog], sourced: Vec<SourcedCatalog>) -> Vec<CatalogView> {
    sourced
        .into_iter()
        .map(|s| {
            let spec = catalogs.iter().find(|c| c.name_any() == s.input.name);
            CatalogView {
                name: s.input.name.clone(),
                image: spec.and_then(|c| c.spec.source.image.as_ref().map(|i| i.reference.clone())),
                resolved: spec.and_then(|c| {
                    c.status
                        .as_ref()?
                        .resolved_source
                        .as_ref()
                        .map(|r| r.image.reference.clone())
                }),
                from_catalog_source: spec.and_then(|c| c.annotations().get(SOURCE_ANNOTATION).cloned()),
                index: s.content.as_ref().map(|_| s.input.index.clone()),
                problem: s.problem,
            }
        })
        .collect()
}

/// `migrate check`'s rows for the Subscriptions of `scope` (all namespaces, one namespace, or
/// one Subscription), bundle images and catalogs reached as `reach` says, with the command's
/// meter they were judged on (made once the cluster is read: [`crate::admin::command_meter`]);
/// when it ran out ([`Meter::exhausted`]), the rows it did not reach say so.
pub async fn check_cluster(
    client: &Client,
    reach: &CatalogSources,
    scope: Option<(&str, Option<&str>)>,
) -> Result<(Vec<CheckRow>, Meter), MigrateError> {
    let pull = reach.pull_options_checked()?;
    let http = reach.catalog_client()?;
    let snapshot = read_snapshot(client, &http, &pull, scope).await?;
    let mut meter = crate::admin::command_meter();
    let rows = check(&snapshot, scope, &mut meter);
    Ok((rows, meter))
}

/// Reads the snapshot `check` judges. Pod restarts are computed for the Subscriptions in
/// `scope` only (each needs its bundle image).
pub async fn read_snapshot(
    client: &Client,
    http: &CatalogClient,
    pull: &PullOptions,
    scope: Option<(&str, Option<&str>)>,
) -> Result<Snapshot, MigrateError> {
    let api_error = |what: &str| {
        let what = what.to_string();
        move |source| MigrateError::Api { what, source }
    };
    let catalogs = Api::<ClusterCatalog>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(api_error("listing ClusterCatalogs"))?
        .items;
    let sourced = cluster_catalogs(client, http)
        .await
        .map_err(|e| MigrateError::Catalogs(e.to_string()))?;
    let views = catalog_views(&catalogs, sourced);
    let extensions = Api::<ClusterExtension>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(api_error("listing ClusterExtensions"))?
        .items;
    let mut snapshot = Snapshot {
        subscriptions: list_classic(client, Kind::Subscription).await?,
        csvs: list_classic(client, Kind::Csv).await?,
        install_plans: list_classic(client, Kind::InstallPlan).await?,
        operator_groups: list_classic(client, Kind::OperatorGroup).await?,
        catalog_sources: list_classic(client, Kind::CatalogSource).await?,
        operator_conditions: list_classic(client, Kind::OperatorCondition).await?,
        operator_conditions_served: operator_conditions::served(client)
            .await
            .map_err(api_error("discovering operators.coreos.com/v2"))?,
        extensions: extensions.iter().map(|e| extension_view(e, &views)).collect(),
        catalogs: views,
        restarts: BTreeMap::new(),
        certificates: BTreeMap::new(),
    };
    let in_scope: Vec<Subscription> = snapshot
        .subscriptions
        .iter()
        .filter(|s| {
            let (ns, name) = key(&s.metadata);
            match scope {
                None => true,
                Some((s_ns, None)) => s_ns == ns,
                Some((s_ns, Some(s_name))) => s_ns == ns && s_name == name,
            }
        })
        .cloned()
        .collect();
    for sub in &in_scope {
        let (restart, certificates) = conversion_effects(client, pull, &snapshot, sub).await;
        snapshot.restarts.insert(key(&sub.metadata), restart);
        snapshot.certificates.insert(key(&sub.metadata), certificates);
    }
    Ok(snapshot)
}

fn extension_view(e: &ClusterExtension, catalogs: &[CatalogView]) -> ExtensionView {
    let package = e
        .spec
        .source
        .catalog
        .as_ref()
        .map(|c| c.package_name.clone())
        .unwrap_or_default();
    let installed = e
        .status
        .as_ref()
        .and_then(|s| s.install.as_ref())
        .map(|i| (i.bundle.name.clone(), i.bundle.version.clone()));
    // The installed bundle's properties as a catalog serves them; `olm.package` alone when no
    // catalog has the bundle any more (a package requirement can still be judged).
    let properties = installed
        .as_ref()
        .map(|(bundle, version)| {
            catalogs
                .iter()
                .find_map(|c| {
                    let p = c.index.as_ref()?.package(&package)?;
                    let b = p.bundles.iter().find(|b| *b.name == **bundle)?;
                    Some(b.properties.to_vec())
                })
                .unwrap_or_else(|| {
                    vec![Property::new(
                        PROPERTY_PACKAGE,
                        json!({"packageName": package, "version": version}).into(),
                    )]
                })
        })
        .unwrap_or_default();
    ExtensionView {
        name: e.name_any(),
        package,
        namespace: e.spec.namespace.clone(),
        migrated_from: e.annotations().get(MIGRATED_FROM_ANNOTATION).cloned(),
        installed,
        properties,
    }
}

/// The objects olmv1 renders for `sub`'s installed bundle, as `convert` installs it: the bundle
/// pulled from the image a ClusterCatalog names, the OperatorGroup's single target as
/// `watchNamespace`, the Subscription's carried config as `deploymentConfig`, its OperatorCondition
/// when the controller keeps them. Also returns the extension's inline config.
pub async fn render_installed(
    pull: &PullOptions,
    snapshot: &Snapshot,
    sub: &Subscription,
) -> Result<(Vec<Value>, serde_json::Map<String, Value>), String> {
    let (ns, _) = key(&sub.metadata);
    let Some(csv) = sub.status.installed_csv.as_deref() else {
        return Err("no installed CSV".into());
    };
    let image = snapshot.catalogs.iter().find_map(|c| {
        let p = c.index.as_ref()?.package(&sub.spec.name)?;
        p.bundles
            .iter()
            .find(|b| &*b.name == csv)
            .map(|b| b.image.to_string())
    });
    let Some(image) = image else {
        return Err(format!("bundle {csv} is in no ClusterCatalog"));
    };
    let config = inline_config(snapshot, sub)?;
    let bundle = match pull_and_read(&image, pull, RegistryV1Bundle::from_dir).await {
        Ok((_, Ok(bundle))) => bundle,
        Ok((_, Err(e))) => return Err(format!("bundle image {image}: {e}")),
        Err(e) => return Err(format!("pulling bundle image {image}: {e}")),
    };
    let value = Value::Object(config.clone());
    let options = RenderOptions {
        operator_conditions: snapshot.operator_conditions_served,
        ..RenderOptions::default()
    };
    let objects = render_with_options(&bundle, &ns, Some(&value), options)
        .map_err(|e| format!("rendering {csv}: {e}"))?;
    Ok((objects, config))
}

/// The ClusterExtension's inline config for `sub`: the OperatorGroup's single target as
/// `watchNamespace` (none for AllNamespaces), the carried `Subscription.spec.config` keys as
/// `deploymentConfig`.
pub fn inline_config(
    snapshot: &Snapshot,
    sub: &Subscription,
) -> Result<serde_json::Map<String, Value>, String> {
    let (ns, _) = key(&sub.metadata);
    let groups: Vec<_> = snapshot
        .operator_groups
        .iter()
        .filter(|og| og.metadata.namespace.as_deref() == Some(&ns))
        .collect();
    let [og] = groups.as_slice() else {
        return Err("not one OperatorGroup in the namespace".into());
    };
    let mut config = serde_json::Map::new();
    match target_namespaces(og).as_slice() {
        [] => {}
        [one] => {
            config.insert("watchNamespace".into(), json!(one));
        }
        _ => return Err("the OperatorGroup targets several namespaces".into()),
    }
    let carried: serde_json::Map<String, Value> = sub
        .spec
        .config
        .iter()
        .flatten()
        .filter(|(k, _)| CARRIED_CONFIG_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !carried.is_empty() {
        config.insert("deploymentConfig".into(), Value::Object(carried));
    }
    Ok(config)
}

/// What converting `sub` does to its running pods: its installed bundle rendered as `convert`
/// would ([`render_installed`]), each Deployment's pod template compared with the one running
/// (whether pods restart), and each serving certificate classic issued judged (whether
/// cert-manager keeps it).
async fn conversion_effects(
    client: &Client,
    pull: &PullOptions,
    snapshot: &Snapshot,
    sub: &Subscription,
) -> (PodRestart, Vec<CertificateVerdict>) {
    let objects = match render_installed(pull, snapshot, sub).await {
        Ok((objects, _)) => objects,
        Err(e) => return (PodRestart::Unknown(e), Vec::new()),
    };
    let (ns, _) = key(&sub.metadata);
    let certificates = match certificate_verdicts(client, &ns, &objects).await {
        Ok(verdicts) => verdicts,
        Err(e) => return (PodRestart::Unknown(e), Vec::new()),
    };
    (pod_restart(client, &ns, &objects).await, certificates)
}

/// For each cert-manager Certificate of `objects`, whether cert-manager keeps the Secret it
/// writes to as it is now.
async fn certificate_verdicts(
    client: &Client,
    ns: &str,
    objects: &[Value],
) -> Result<Vec<CertificateVerdict>, String> {
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    let mut verdicts = Vec::new();
    for certificate in objects.iter().filter(|o| is_cert_manager_certificate(o)) {
        let secret_name = certificate["spec"]["secretName"].as_str().unwrap_or_default();
        let secret = secrets
            .get_opt(secret_name)
            .await
            .map_err(|e| format!("reading Secret {ns}/{secret_name}: {e}"))?;
        let deployment = secret_name
            .strip_suffix("-service-cert")
            .unwrap_or(secret_name)
            .to_string();
        verdicts.push(CertificateVerdict {
            deployment,
            secret: format!("{ns}/{secret_name}"),
            replaced: certificate::kept_by_cert_manager(certificate, secret.as_ref(), Timestamp::now()).err(),
        });
    }
    Ok(verdicts)
}

/// Whether `object` is a cert-manager Certificate.
pub fn is_cert_manager_certificate(object: &Value) -> bool {
    object["kind"] == "Certificate" && object["apiVersion"] == "cert-manager.io/v1"
}

/// Whether the pod templates of `objects` differ from those running in `ns` (a rolling update).
async fn pod_restart(client: &Client, ns: &str, objects: &[Value]) -> PodRestart {
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns);
    let mut found = Vec::new();
    for d in objects.iter().filter(|o| o["kind"] == "Deployment") {
        let name = d["metadata"]["name"].as_str().unwrap_or_default();
        let live = match deployments.get_opt(name).await {
            Ok(Some(live)) => live,
            Ok(None) => {
                found.push(format!("Deployment {name} does not exist and is created"));
                continue;
            }
            Err(e) => return PodRestart::Unknown(format!("reading Deployment {ns}/{name}: {e}")),
        };
        let live = serde_json::to_value(&live).unwrap_or_default();
        found.extend(differences(
            &d["spec"]["template"],
            &live["spec"]["template"],
            &format!("Deployment {name} template"),
            MAX_SHOWN_DIFFERENCES,
        ));
    }
    match found.as_slice() {
        [] => PodRestart::No,
        _ => {
            found.truncate(MAX_SHOWN_DIFFERENCES);
            PodRestart::Rolling(found.join("; "))
        }
    }
}
