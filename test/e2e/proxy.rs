//! Egress proxies: with `HTTPS_PROXY`/`HTTP_PROXY` on both components, catalogd's catalog image
//! pull, the controller's bundle pull and its catalog fetch go through a forward proxy the test
//! starts (plain HTTP forwarded, HTTPS tunnelled with CONNECT); with their host in `NO_PROXY`,
//! none does. The API server is reached through a proxy only when the kubeconfig names one.
//!
//! The registry and catalogd listen on this machine's non-loopback address
//! ([`support::host_address`]): loopback is never proxied (Go's rule, kept), so a test on
//! 127.0.0.1 could not tell a proxied request from a direct one.

use serde_json::json;

use crate::{
    components::{self, PACKAGE_LABEL, Replica},
    fixtures,
    support::{self, RegistryOptions, TestTls, proxy::ForwardProxy},
};

/// The components of one phase, their proxies and what they installed.
struct Phase {
    catalogd_proxy: ForwardProxy,
    controller_proxy: ForwardProxy,
    /// `host:port` of the phase's catalogd.
    catalogd: String,
    catalog: String,
    extension: String,
    replicas: [Replica; 2],
}

impl Phase {
    /// Uninstalls the extension and deletes the catalog while the phase's components run (the
    /// shared ones, started again after the test, cannot reach the test's registry).
    async fn clean_up(self) {
        let client = support::client().await;
        let extensions = kube::Api::<olmv1_api::v1::ClusterExtension>::all(client.clone());
        let catalogs = kube::Api::<olmv1_api::v1::ClusterCatalog>::all(client);
        extensions
            .delete(&self.extension, &Default::default())
            .await
            .unwrap();
        catalogs.delete(&self.catalog, &Default::default()).await.unwrap();
        support::wait_for(
            "the proxy test's extension and catalog to go",
            components::INSTALL_TIMEOUT,
            || async {
                let left = (
                    extensions
                        .get_opt(&self.extension)
                        .await
                        .map_err(|e| e.to_string())?,
                    catalogs.get_opt(&self.catalog).await.map_err(|e| e.to_string())?,
                );
                match left {
                    (None, None) => Ok(()),
                    _ => Err(format!(
                        "still there; logs:\n{}\n---\n{}",
                        self.replicas[0].log(),
                        self.replicas[1].log()
                    )),
                }
            },
        )
        .await;
    }
}

/// Starts catalogd and the controller with the proxy settings (plus `NO_PROXY=no_proxy`), and
/// installs a fresh package published to `registry` through them.
async fn install_through(
    prefix: &str,
    registry: &str,
    tls: &TestTls,
    host: &str,
    no_proxy: &str,
    catalogd_kubeconfig_proxy: bool,
) -> Phase {
    let client = support::client().await;
    let package = support::fresh_name(prefix);
    let catalog = format!("{package}-catalog");
    let image = fixtures::publish_catalog(
        registry,
        &format!("e2e/{catalog}"),
        "v1",
        &crate::one_version(&package),
    )
    .await;

    let (catalogd_proxy, controller_proxy) = (ForwardProxy::start(), ForwardProxy::start());
    let catalogd = format!("{host}:{}", support::free_port());
    let catalogd_name = format!("{package}-catalogd");
    let (cert, key, ca) = (
        tls.serving.cert.to_str().unwrap(),
        tls.serving.key.to_str().unwrap(),
        tls.ca_cert.to_str().unwrap(),
    );
    let cache = fixtures::scratch_dir(&catalogd_name);
    let selector = format!("{PACKAGE_LABEL}={package}");
    let vars = |proxy: &ForwardProxy| {
        [
            ("HTTPS_PROXY", proxy.url.clone()),
            ("http_proxy", proxy.url.clone()),
            ("NO_PROXY", no_proxy.to_string()),
        ]
    };
    let catalogd_vars = vars(&catalogd_proxy);
    let catalogd_child = components::spawn_with(
        "catalogd",
        &catalogd_name,
        &[
            "catalogd",
            "--catalogs-server-addr",
            &catalogd,
            "--external-address",
            &catalogd,
            "--cache-dir",
            cache.to_str().unwrap(),
            "--selector",
            &selector,
            "--tls-cert",
            cert,
            "--tls-key",
            key,
            "--insecure-registry",
            registry,
            // Nothing reads their metrics and probes.
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-probe-bind-address",
            "127.0.0.1:0",
        ],
        &catalogd_vars
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect::<Vec<_>>(),
        |kubeconfig| {
            if catalogd_kubeconfig_proxy {
                kubeconfig["clusters"][0]["cluster"]["proxy-url"] = json!(catalogd_proxy.url);
            }
        },
    );
    let controller_name = format!("{package}-controller");
    let args = components::controller_args(
        &controller_name,
        &components::Operations::unread(),
        tls,
        &["--ca-file", ca, "--insecure-registry", registry],
    );
    let controller_vars = vars(&controller_proxy);
    let controller_child = components::spawn_with(
        "controller",
        &controller_name,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &controller_vars
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect::<Vec<_>>(),
        |_| {},
    );
    let replicas = [
        Replica {
            name: catalogd_name,
            child: catalogd_child,
            address: catalogd.clone(),
        },
        Replica {
            name: controller_name,
            child: controller_child,
            address: String::new(),
        },
    ];

    let namespace = components::namespace_with_admin_installer(&client, &package).await;
    components::apply_catalog(&client, &catalog, &image, 0, &package).await;
    support::wait_for(
        &format!("ClusterCatalog {catalog} served by the proxy test's catalogd"),
        components::INSTALL_TIMEOUT,
        || async {
            let api = kube::Api::<olmv1_api::v1::ClusterCatalog>::all(client.clone());
            let status = api.get(&catalog).await.map_err(|e| e.to_string())?.status;
            let base = status
                .as_ref()
                .and_then(|s| s.urls.as_ref())
                .map(|u| u.base.clone());
            match base {
                Some(base) if base.starts_with(&format!("https://{catalogd}/")) => Ok(()),
                _ => Err(format!("{status:?}\n{}", replicas[0].log())),
            }
        },
    )
    .await;
    let extension = format!("{package}-ext");
    components::apply_extension(
        &client,
        components::extension(&extension, &namespace, &package, json!({})),
    )
    .await;
    components::wait_extension(&client, &extension, "Installed=True with 1.0.0", |ext| {
        components::condition(ext, "Installed").is_some_and(|c| c.status == "True")
            && components::installed_version(ext) == Some("1.0.0")
    })
    .await;
    Phase {
        catalogd_proxy,
        controller_proxy,
        catalogd,
        catalog,
        extension,
        replicas,
    }
}

#[tokio::test]
async fn registries_and_catalog_servers_go_through_the_egress_proxy_unless_no_proxy_names_them() {
    let share = components::exclusive_cluster().await;
    components::ensure_running();
    let _stopped = components::stop_shared_components(&share);
    let host = support::host_address();
    let registry = support::start_registry(&RegistryOptions {
        host: Some(host.clone()),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let tls = TestTls::generate_for(dir.path(), &[&host]);
    let api_server = support::env()
        .api_server
        .trim_start_matches("https://")
        .to_string();

    // NO_PROXY names other hosts only (as a cluster's does: its service network and domains).
    let phase = install_through(
        "proxied",
        &registry.host_port,
        &tls,
        &host,
        "10.96.0.0/12,.svc,.cluster.local",
        true,
    )
    .await;
    let catalogd_pulls = phase.catalogd_proxy.seen_for(&registry.host_port);
    assert!(
        catalogd_pulls.iter().any(|r| r.starts_with("GET http://")),
        "catalogd pulled the catalog image through its proxy: {:?}",
        phase.catalogd_proxy.seen()
    );
    let controller_pulls = phase.controller_proxy.seen_for(&registry.host_port);
    assert!(
        controller_pulls.iter().any(|r| r.starts_with("GET http://")),
        "the controller pulled the bundle through its proxy: {:?}",
        phase.controller_proxy.seen()
    );
    assert!(
        phase
            .controller_proxy
            .seen()
            .contains(&format!("CONNECT {}", phase.catalogd)),
        "the controller fetched the catalog through its proxy (tunnelled HTTPS): {:?}",
        phase.controller_proxy.seen()
    );
    // The API server: not through HTTPS_PROXY; through the kubeconfig's proxy-url (catalogd's).
    assert!(
        phase.controller_proxy.seen_for(&api_server).is_empty(),
        "the controller reached the API server directly: {:?}",
        phase.controller_proxy.seen()
    );
    assert!(
        phase
            .catalogd_proxy
            .seen()
            .contains(&format!("CONNECT {api_server}")),
        "catalogd reached the API server through its kubeconfig's proxy-url: {:?}",
        phase.catalogd_proxy.seen()
    );
    phase.clean_up().await;

    // The same with the registry's and catalogd's host in NO_PROXY: nothing goes through.
    let phase = install_through(
        "unproxied",
        &registry.host_port,
        &tls,
        &host,
        &format!(".svc,{host}"),
        false,
    )
    .await;
    assert_eq!(phase.catalogd_proxy.seen(), Vec::<String>::new());
    assert_eq!(phase.controller_proxy.seen(), Vec::<String>::new());
    phase.clean_up().await;
}
