//! The admin's command line against the local control plane: `olmv1 install|upgrade|uninstall`
//! write the ClusterExtension, and what `olmv1 explain` and `olmv1 upgrades` answer from the
//! cluster's ClusterCatalogs (read through catalogd's HTTP API) is what the controller then
//! installs, or refuses with the same message.

use serde_json::Value;

use crate::components::olmv1;
use crate::{
    Scenario, components,
    fixtures::{Bundle, Channel, Package},
    support,
};

/// 1.0.0 <- 1.1.0 <- 2.0.0 along `replaces`, and 3.0.0 with no edge at all.
fn chain(package: &str) -> Package {
    Package {
        name: package.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["1.0.0", "1.1.0", "2.0.0", "3.0.0"])],
        bundles: vec![
            Bundle::new("1.0.0"),
            Bundle::new("1.1.0").replaces("1.0.0", package),
            Bundle::new("2.0.0").replaces("1.1.0", package),
            Bundle::new("3.0.0"),
        ],
        deprecations: vec![],
    }
}

fn json(out: support::CmdOutput) -> Value {
    let text = out.ok();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn versions(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|t| t["version"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn explain_and_upgrades_predict_what_the_controller_installs() {
    let s = Scenario::new("cli", chain).await;
    let label = format!("{}={}", components::PACKAGE_LABEL, s.package);

    // install --dry-run resolves against the cluster's catalogs and writes nothing.
    let install = |extra: &[&str]| {
        let mut args = vec![
            "install",
            &s.package,
            "--name",
            &s.extension,
            "-n",
            &s.namespace,
            "--service-account",
            "installer",
            "--catalog-label",
            &label,
            "--version",
            "1.0.0",
        ];
        args.extend_from_slice(extra);
        olmv1(&args)
    };
    let dry = install(&["--dry-run"]).ok();
    assert!(dry.contains("packageName: "), "{dry}");
    assert!(
        dry.contains(&format!(
            "# dry run: would install {}.v1.0.0 1.0.0 from catalog {}",
            s.package, s.catalog
        )),
        "{dry}"
    );
    assert!(
        kube::Api::<olmv1_api::v1::ClusterExtension>::all(s.client.clone())
            .get_opt(&s.extension)
            .await
            .unwrap()
            .is_none(),
        "a dry run writes nothing"
    );
    install(&[]).ok();
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    // The range pins 1.0.0: nothing is reachable now; 1.1.0 and 2.0.0 have paths; 3.0.0 none.
    let u = json(olmv1(&["upgrades", &s.extension, "-o", "json"]));
    assert_eq!(u["installed"]["version"], "1.0.0");
    assert_eq!(versions(&u["reachable"]), Vec::<String>::new());
    let paths: Vec<(String, Vec<String>)> = u["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["target"]["version"].as_str().unwrap().to_string(),
                versions(&p["steps"]),
            )
        })
        .collect();
    assert_eq!(
        paths,
        [
            ("1.1.0".to_string(), vec!["1.1.0".to_string()]),
            (
                "2.0.0".to_string(),
                vec!["1.1.0".to_string(), "2.0.0".to_string()]
            ),
        ]
    );
    assert_eq!(versions(&u["unreachable"]), ["3.0.0"]);

    // With "<2.0.0": 1.1.0 is reachable now, and explain picks it; 2.0.0 is out of range
    // and 3.0.0 is no successor.
    let u = json(olmv1(&[
        "upgrades",
        &s.extension,
        "--version",
        "<2.0.0",
        "-o",
        "json",
    ]));
    assert_eq!(versions(&u["reachable"]), ["1.1.0"]);
    let e = json(olmv1(&[
        "explain",
        &s.extension,
        "--version",
        "<2.0.0",
        "-o",
        "json",
    ]));
    assert_eq!(e["chosen"]["version"], "1.1.0");
    let ours: Vec<&Value> = e["catalogs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "considered")
        .collect();
    assert_eq!(ours.len(), 1, "only the selected catalog is consulted: {e}");
    assert_eq!(ours[0]["name"], s.catalog.as_str());
    let rule = |version: &str| {
        e["bundles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["version"] == version)
            .map(|b| b["excludedBy"].clone())
            .unwrap()
    };
    assert_eq!(rule("1.0.0"), "lowerVersion");
    assert_eq!(rule("2.0.0"), "notSuccessor");
    assert_eq!(rule("3.0.0"), "notSuccessor");

    // The controller installs exactly that.
    olmv1(&["upgrade", &s.extension, "--version", "<2.0.0"]).ok();
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;

    // The path's last step: from 1.1.0, 2.0.0 is reachable now once the range allows it.
    let u = json(olmv1(&[
        "upgrades",
        &s.extension,
        "--version",
        "2.0.0",
        "-o",
        "json",
    ]));
    assert_eq!(versions(&u["reachable"]), ["2.0.0"]);
    olmv1(&["upgrade", &s.extension, "--version", "2.0.0"]).ok();
    components::wait_installed(&s.client, &s.extension, "2.0.0").await;

    // 3.0.0 is unreachable: explain fails with the message the controller then puts in status.
    let out = olmv1(&["explain", &s.extension, "--version", "3.0.0", "-o", "json"]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let e: Value = serde_json::from_str(&out.stdout).unwrap();
    let message = e["error"].as_str().unwrap().to_string();
    assert_eq!(
        message,
        "error upgrading from currently installed version \"2.0.0\": no bundles found for package \
         \"PKG\" matching version \"3.0.0\""
            .replace("PKG", &s.package)
    );
    olmv1(&["upgrade", &s.extension, "--version", "3.0.0"]).ok();
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &message).await;
    assert_eq!(ext.status.unwrap().install.unwrap().bundle.version, "2.0.0");

    // status sums it up.
    let st = json(olmv1(&["status", &s.extension, "-o", "json"]));
    assert_eq!(st[0]["installedVersion"], "2.0.0");
    assert_eq!(st[0]["targetError"], message.as_str());
    let text = olmv1(&["status", &s.extension]).ok();
    assert!(text.starts_with("NAME "), "{text}");
    assert!(
        text.contains(&format!("{} resolution: {message}", s.extension)),
        "{text}"
    );

    // uninstall --dry-run keeps it; uninstall removes it.
    let dry = olmv1(&["uninstall", &s.extension, "--dry-run"]).ok();
    assert!(dry.contains("would delete"), "{dry}");
    olmv1(&["uninstall", &s.extension]).ok();
    support::wait_for(
        "the ClusterExtension to be gone",
        components::INSTALL_TIMEOUT,
        || async {
            match kube::Api::<olmv1_api::v1::ClusterExtension>::all(s.client.clone())
                .get_opt(&s.extension)
                .await
            {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn search_and_versions_read_the_cluster_catalogs_through_catalogd() {
    let s = Scenario::new("clisearch", chain).await;
    let rows = json(olmv1(&["search", &s.package, "-o", "json"]));
    let row = &rows.as_array().unwrap()[0];
    assert_eq!(row["catalog"], s.catalog.as_str());
    assert_eq!(row["newestVersion"], "3.0.0");
    assert_eq!(row["installable"], true, "{row}");
    assert_eq!(
        row["manifestsFrom"], "image",
        "the catalog names images only: {row}"
    );
    assert_eq!(
        row["installModes"],
        serde_json::json!(["OwnNamespace", "SingleNamespace", "AllNamespaces"])
    );
    let v = json(olmv1(&["versions", &s.package, "-o", "json"]));
    assert_eq!(
        v[0]["channels"][0]["entries"][1]["replaces"],
        format!("{}.v1.1.0", s.package)
    );
}
