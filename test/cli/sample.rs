//! A hand-checked sample of real packages (docs/cli.md lists them): the answers below were
//! worked out by reading each package's channel entries, not copied from the snapshots.
//!
//! - community kube-green (alpha): a plain `replaces` chain 0.3.0 -> ... -> 0.7.1;
//! - community kairos-operator (candidate-v2): 2.2.0 skips 2.0.1, 2.1.1 replaces it, and nothing
//!   leads from 2.0.1 to 2.1.0;
//! - community dell-csm-operator (stable): 1.8.0 and 1.8.1 both replace 1.7.0, so 1.9.0 and 1.9.1
//!   are reached through different branches;
//! - certified v4.16 cpd-platform-operator (v6.4): every successor declares `olm.gvk.required`
//!   (and `olm.package.required`): with `--dependencies=check` (the default) each is reachable,
//!   naming what it requires; with `refuse` the resolver refuses each one although the graph has
//!   the edges.

use std::sync::Arc;

use olmv1::{
    admin::upgrades::{Upgrades, upgrades},
    catalog::CatalogIndex,
    resolve::{CatalogInput, DependencyMode, InstalledBundle, ResolveRequest},
};
use olmv1_api::v1::UpgradeConstraintPolicy;

use crate::support::shared_catalogs_root;

fn answer(catalog: &str, package: &str, channel: &str, installed: &str) -> Upgrades {
    answer_with(catalog, package, channel, installed, DependencyMode::default())
}

fn answer_with(
    catalog: &str,
    package: &str,
    channel: &str,
    installed: &str,
    dependencies: DependencyMode,
) -> Upgrades {
    let dir = shared_catalogs_root().join(catalog).join(package);
    let index = Arc::new(CatalogIndex::from_dir(&dir).expect("package indexes"));
    let request = ResolveRequest {
        package: package.into(),
        version_range: None,
        channels: vec![channel.into()],
        selector: None,
        upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
        installed: Some(InstalledBundle {
            name: format!("{package}.v{installed}"),
            version: installed.into(),
            release: None,
        }),
    };
    upgrades(
        &request,
        &[CatalogInput::new(catalog, index)],
        dependencies,
        &mut olmv1::admin::command_meter(),
    )
    .expect("upgrades listed")
}

fn reachable(u: &Upgrades) -> Vec<&str> {
    u.reachable.iter().map(|t| t.version.as_str()).collect()
}

fn path_to<'a>(u: &'a Upgrades, version: &str) -> Vec<&'a str> {
    u.paths
        .iter()
        .find(|p| p.target.version == version)
        .unwrap_or_else(|| panic!("no path to {version}: {u:?}"))
        .steps
        .iter()
        .map(|s| s.version.as_str())
        .collect()
}

#[test]
fn kube_green_steps_through_its_replaces_chain() {
    let u = answer("community-operators-v4.16", "kube-green", "alpha", "0.5.0");
    assert_eq!(reachable(&u), ["0.5.1"]);
    assert_eq!(
        path_to(&u, "0.7.1"),
        ["0.5.1", "0.5.2", "0.6.0", "0.7.0", "0.7.1"]
    );
    assert!(u.unreachable.is_empty());
}

#[test]
fn kairos_reaches_two_versions_at_once_and_never_2_1_0() {
    let u = answer(
        "community-operators-v4.16",
        "kairos-operator",
        "candidate-v2",
        "2.0.1",
    );
    assert_eq!(reachable(&u), ["2.2.0", "2.1.1"]);
    assert!(u.paths.is_empty());
    let unreachable: Vec<&str> = u.unreachable.iter().map(|x| x.version.as_str()).collect();
    assert_eq!(unreachable, ["2.1.0"]);
    assert_eq!(
        u.unreachable[0].message,
        "error upgrading from currently installed version \"2.0.1\": no bundles found for package \
         \"kairos-operator\" matching version \"=2.1.0\" in channels [candidate-v2]"
    );
}

#[test]
fn dell_csm_reaches_1_9_0_and_1_9_1_through_different_branches() {
    let u = answer(
        "community-operators-v4.16",
        "dell-csm-operator",
        "stable",
        "1.6.1",
    );
    assert_eq!(reachable(&u), ["1.7.0"]);
    assert_eq!(path_to(&u, "1.9.0"), ["1.7.0", "1.8.0", "1.9.0"]);
    assert_eq!(path_to(&u, "1.9.1"), ["1.7.0", "1.8.1", "1.9.1"]);
    assert_eq!(path_to(&u, "1.10.2"), ["1.7.0", "1.8.1", "1.9.1", "1.10.2"]);
}

#[test]
fn cpd_platform_successors_need_their_dependencies_or_are_refused_for_them() {
    let args = (
        "certified-operators-v4.16",
        "cpd-platform-operator",
        "v6.4",
        "6.4.0",
    );
    let u = answer(args.0, args.1, args.2, args.3);
    let versions: Vec<&str> = u.reachable.iter().map(|t| t.version.as_str()).collect();
    assert_eq!(versions, ["6.4.11", "6.4.9", "6.4.7", "6.4.4", "6.4.2"]);
    assert!(
        u.reachable.iter().all(|t| t.requires
            == [
                "gvk operator.ibm.com/v3 CommonService",
                "pkg ibm-common-service-operator <5.0.0"
            ]),
        "{u:?}"
    );
    assert!(u.paths.is_empty() && u.unreachable.is_empty(), "{u:?}");

    let u = answer_with(args.0, args.1, args.2, args.3, DependencyMode::Refuse);
    assert!(u.reachable.is_empty(), "{u:?}");
    assert!(u.paths.is_empty(), "{u:?}");
    assert_eq!(u.unreachable.len(), 5);
    assert!(
        u.unreachable.iter().all(|x| x
            .message
            .contains("has a dependency declared via property \"olm.gvk.required\"")),
        "{u:?}"
    );
}
