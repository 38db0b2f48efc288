//! Dependencies (`--dependencies=check`, the default): an extension whose bundle needs another
//! package waits, Blocked, until an extension installs that package; an upgrade that would break
//! an installed dependent is refused and the installed version keeps running; `olmv1 uninstall`
//! refuses to remove a dependency; an API the cluster already serves satisfies a requirement of
//! it; `olmv1 explain` of an extension plans with what the cluster's extensions installed.
//! `--dependencies=refuse` keeps upstream's refusal.

use serde_json::{Value, json};

use crate::components::olmv1;
use crate::{
    components::{self, PACKAGE_LABEL},
    fixtures::{self, Bundle, Channel, Package},
    support,
};

/// Two packages in one catalog, a namespace with an installer, and the extensions' names.
struct World {
    client: kube::Client,
    namespace: String,
    /// The dependent package (and its extension's name: `<a>-ext`).
    a: String,
    /// The package it needs.
    b: String,
}

impl World {
    /// Publishes the packages `make(a, b)` returns in one catalog labelled for `a`.
    async fn new(prefix: &str, make: impl FnOnce(&str, &str) -> Vec<Package>) -> World {
        components::ensure_running();
        let client = support::client().await;
        let a = support::fresh_name(&format!("{prefix}-a"));
        let b = support::fresh_name(&format!("{prefix}-b"));
        let catalog = format!("{a}-catalog");
        let image = fixtures::publish_catalog_of(
            support::registry(),
            &format!("e2e/{catalog}"),
            "v1",
            &make(&a, &b),
        )
        .await;
        components::apply_catalog(&client, &catalog, &image, 0, &a).await;
        components::wait_catalog_serving(&client, &catalog).await;
        let namespace = components::namespace_with_admin_installer(&client, &a).await;
        World {
            client,
            namespace,
            a,
            b,
        }
    }

    fn extension_of(&self, package: &str) -> String {
        format!("{package}-ext")
    }

    /// Applies the extension of `package` (selecting this world's catalog) with extra
    /// `spec.source.catalog` fields.
    async fn apply(&self, package: &str, fields: Value) {
        let mut body = components::extension(&self.extension_of(package), &self.namespace, package, fields);
        body["spec"]["source"]["catalog"]["selector"] = json!({"matchLabels": {PACKAGE_LABEL: self.a}});
        components::apply_extension(&self.client, body).await;
    }
}

/// A package with one channel `stable` holding `bundles` in order.
fn package(name: &str, bundles: Vec<Bundle>) -> Package {
    let versions: Vec<&str> = bundles.iter().map(|b| b.version.as_str()).collect();
    Package {
        name: name.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &versions)],
        bundles: bundles.clone(),
        deprecations: vec![],
    }
}

/// `a` 1.0.0 needs package `b` in `range` and, through a constraint with a failure message,
/// `b`'s Widget API; `b` has 1.0.0 and 2.0.0 (replacing 1.0.0).
fn a_needs_b(range: &str) -> impl FnOnce(&str, &str) -> Vec<Package> + '_ {
    move |a, b| {
        let needs = Bundle::new("1.0.0")
            .requires(
                "olm.package.required",
                json!({"packageName": b, "versionRange": range}),
            )
            .requires(
                "olm.constraint",
                json!({
                    "failureMessage": format!("{a} stores its state in {b}'s widgets"),
                    "gvk": {"group": fixtures::crd_group(b), "version": "v1", "kind": "Widget"}
                }),
            );
        vec![
            package(a, vec![needs]),
            package(
                b,
                vec![Bundle::new("1.0.0"), Bundle::new("2.0.0").replaces("1.0.0", b)],
            ),
        ]
    }
}

/// `olmv1 explain EXTENSION -o json`, from the cluster's catalogs and extensions.
fn explain_json(extension: &str) -> Value {
    let text = olmv1(&["explain", extension, "-o", "json"]).ok();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The bundles of explain's dependency plan, dependencies first.
fn planned(explained: &Value) -> Vec<String> {
    let plan = explained["dependencies"]["plan"]
        .as_array()
        .unwrap_or_else(|| panic!("a plan in {explained}"));
    plan.iter()
        .map(|p| p["bundle"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_extension_needing_a_package_is_blocked_until_an_extension_installs_it() {
    let w = World::new("deps-blocked", a_needs_b(">=1.0.0")).await;
    let (ext_a, ext_b) = (w.extension_of(&w.a), w.extension_of(&w.b));
    w.apply(&w.a, json!({})).await;

    // Each unsatisfied requirement is named (the author's failure message with it), and the
    // command that installs what is missing.
    let blocked = components::wait_progressing(&w.client, &ext_a, "Blocked", "not satisfied").await;
    let progressing = components::condition(&blocked, "Progressing").unwrap();
    assert_eq!(progressing.status, "False");
    let message = &progressing.message;
    for expected in [
        format!(
            "error for resolved bundle \"{}.v1.0.0\" with version \"1.0.0\": ",
            w.a
        ),
        format!("requires package {} >=1.0.0", w.b),
        format!(
            "{} stores its state in {}'s widgets (requires API Widget ({}/v1))",
            w.a,
            w.b,
            fixtures::crd_group(&w.b)
        ),
        format!(
            "install them with: olmv1 install {} --name {ext_a} --namespace {} --service-account installer --catalog-label {PACKAGE_LABEL}={} --with-dependencies",
            w.a, w.namespace, w.a
        ),
    ] {
        assert!(
            message.contains(&expected),
            "{expected:?} missing from: {message}"
        );
    }
    let installed = components::condition(&blocked, "Installed").unwrap();
    assert_eq!(
        (installed.status.as_str(), installed.reason.as_str()),
        ("False", "Failed")
    );
    // `olmv1 explain` agrees with the controller (`--dependencies=check`, the default): a's
    // bundle is chosen, and the plan installs b's head first.
    let explained = explain_json(&ext_a);
    assert_eq!(explained["chosen"]["bundle"], format!("{}.v1.0.0", w.a));
    assert_eq!(
        planned(&explained),
        [format!("{}.v2.0.0", w.b), format!("{}.v1.0.0", w.a)]
    );
    // `olmv1 status` gives the controller's verdict too: a's bundle is the target; with
    // `--dependencies refuse`, upstream's refusal of it.
    let status = |extra: &[&str]| -> Value {
        let mut args = vec!["status", ext_a.as_str(), "-o", "json"];
        args.extend(extra);
        let text = olmv1(&args).ok();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    };
    let checked = status(&[]);
    assert_eq!(checked[0]["targetBundle"], format!("{}.v1.0.0", w.a), "{checked}");
    assert_eq!(checked[0]["targetError"], Value::Null, "{checked}");
    let refused = status(&["--dependencies", "refuse"]);
    assert_eq!(refused[0]["targetBundle"], Value::Null, "{refused}");
    let error = refused[0]["targetError"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!(
            "bundle \"{}.v1.0.0\" has a dependency declared via property",
            w.a
        )) && error.ends_with("which is currently not supported"),
        "{refused}"
    );

    // The admin installs b: a converges on its own (another extension's install wakes it).
    w.apply(&w.b, json!({"version": "1.0.0"})).await;
    components::wait_installed(&w.client, &ext_b, "1.0.0").await;
    components::wait_installed(&w.client, &ext_a, "1.0.0").await;
    // explain counts what the cluster's extensions installed, as the controller's check does:
    // b 1.0.0, installed as b's extension, satisfies a's requirements; nothing else is planned.
    let explained = explain_json(&ext_a);
    assert_eq!(planned(&explained), [format!("{}.v1.0.0", w.a)]);
    let choices = explained["dependencies"]["choices"].as_array().unwrap();
    assert!(!choices.is_empty(), "{explained}");
    for choice in choices {
        assert_eq!(choice["satisfiedBy"], format!("{}.v1.0.0", w.b), "{choice}");
        assert!(
            choice["why"]
                .as_str()
                .unwrap()
                .contains(&format!("installed as {ext_b}")),
            "{choice}"
        );
    }
    olmv1(&["uninstall", &ext_a]).ok();
    olmv1(&["uninstall", &ext_b]).ok();
}

#[tokio::test]
async fn install_with_dependencies_installs_the_dependency_then_the_extension() {
    let w = World::new("deps-plan", a_needs_b(">=1.0.0")).await;
    let ext_a = w.extension_of(&w.a);
    let label = format!("{PACKAGE_LABEL}={}", w.a);
    let install = |extra: &[&str]| {
        let mut args = vec![
            "install",
            &w.a,
            "--name",
            &ext_a,
            "-n",
            &w.namespace,
            "--yes",
            "--catalog-label",
            &label,
            "--with-dependencies",
        ];
        args.extend_from_slice(extra);
        olmv1(&args)
    };
    let b_installer = format!("{}-installer", w.b);
    let a_installer = format!("{ext_a}-installer");
    let api = kube::Api::<olmv1_api::v1::ClusterExtension>::all(w.client.clone());

    // Without --service-account, each extension gets its own installer, as `olmv1 install`
    // makes it. The dry run prints b's installer and ClusterExtension, pinned to the head of its
    // channel and to the catalog, then a's; it writes nothing.
    let dry = install(&["--dry-run"]).ok();
    let catalog = format!("{}-catalog", w.a);
    for expected in [
        format!("# installer of ClusterExtension {:?}", w.b),
        format!("# installer of ClusterExtension {ext_a:?}"),
        format!("name: {b_installer}"),
        format!("name: {a_installer}"),
        format!("name: {}", w.b),
        "version: \"2.0.0\"".to_string(),
        format!("olm.operatorframework.io/metadata.name: {catalog}"),
        format!(
            "# dry run: would install {}.v2.0.0 2.0.0 from catalog {catalog} (required by {}.v1.0.0)",
            w.b, w.a
        ),
        format!(
            "# dry run: would install {}.v1.0.0 1.0.0 from catalog {catalog}",
            w.a
        ),
    ] {
        assert!(dry.contains(&expected), "{expected:?} missing from:\n{dry}");
    }
    assert!(
        dry.find(&format!("name: {}", w.b)) < dry.find(&format!("name: {ext_a}")),
        "{dry}"
    );
    assert!(
        api.get_opt(&w.b).await.unwrap().is_none(),
        "a dry run writes nothing"
    );
    assert!(
        api.get_opt(&ext_a).await.unwrap().is_none(),
        "a dry run writes nothing"
    );

    // b first (its installer, then it), installed before a is applied; then a.
    let out = install(&[]).ok();
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("clusterextension/") || l.starts_with("serviceaccount/"))
        .collect();
    assert_eq!(
        lines,
        [
            format!(
                "serviceaccount/{b_installer} and its roles applied in namespace {}",
                w.namespace
            )
            .as_str(),
            format!("clusterextension/{} applied ({}.v2.0.0 2.0.0)", w.b, w.b).as_str(),
            &format!("clusterextension/{} installed", w.b),
            &format!(
                "serviceaccount/{a_installer} and its roles applied in namespace {}",
                w.namespace
            ),
            &format!("clusterextension/{ext_a} applied"),
            &format!("clusterextension/{ext_a} installed"),
        ],
        "{out}"
    );
    let b = components::wait_installed(&w.client, &w.b, "2.0.0").await;
    let a = components::wait_installed(&w.client, &ext_a, "1.0.0").await;
    let account =
        |e: &olmv1_api::v1::ClusterExtension| e.spec.service_account.as_ref().map(|a| a.name.clone());
    assert_eq!(account(&b), Some(b_installer.clone()));
    assert_eq!(account(&a), Some(a_installer.clone()));
    let b_installed_at = &components::condition(&b, "Installed")
        .unwrap()
        .last_transition_time
        .0;
    let a_created_at = &a.metadata.creation_timestamp.as_ref().unwrap().0;
    assert!(
        b_installed_at <= a_created_at,
        "b installed at {b_installed_at}, a created at {a_created_at}"
    );
    olmv1(&["uninstall", &ext_a]).ok();
    olmv1(&["uninstall", &w.b]).ok();
}

#[tokio::test]
async fn an_upgrade_that_breaks_an_installed_dependent_is_refused_and_the_installed_version_stays() {
    let w = World::new("deps-protect", a_needs_b(">=1.0.0 <2.0.0")).await;
    let (ext_a, ext_b) = (w.extension_of(&w.a), w.extension_of(&w.b));
    w.apply(&w.b, json!({"version": "1.0.0"})).await;
    components::wait_installed(&w.client, &ext_b, "1.0.0").await;
    w.apply(&w.a, json!({})).await;
    components::wait_installed(&w.client, &ext_a, "1.0.0").await;

    // b 2.0.0 is outside a's range: refused, naming a and the requirement; 1.0.0 keeps running.
    w.apply(&w.b, json!({"version": "2.0.0"})).await;
    let refused = components::wait_progressing(&w.client, &ext_b, "Blocked", "would break").await;
    let message = &components::condition(&refused, "Progressing").unwrap().message;
    let expected = format!(
        "installing it would break installed extensions: ClusterExtension \"{ext_a}\" (bundle \"{}.v1.0.0\") requires package {} >=1.0.0 <2.0.0; bundle \"{}.v1.0.0\" stays installed",
        w.a, w.b, w.b
    );
    assert!(
        message.contains(&expected),
        "{expected:?} missing from: {message}"
    );
    assert_eq!(components::installed_version(&refused), Some("1.0.0"));
    assert_eq!(
        components::condition(&refused, "Installed").unwrap().status,
        "True"
    );
    let settings =
        kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(w.client.clone(), &w.namespace)
            .get(&format!("{}-settings", w.b))
            .await
            .unwrap();
    assert_eq!(
        settings.data.unwrap()["version"],
        "1.0.0",
        "b's 1.0.0 content stays applied"
    );

    // `olmv1 uninstall` refuses to remove a's dependency, naming a; without a, b may go.
    let out = olmv1(&["uninstall", &ext_b]);
    assert!(
        !out.success,
        "uninstalling a dependency must fail: {}",
        out.stdout
    );
    assert!(
        out.stderr.contains(&format!(
            "ClusterExtension \"{ext_b}\" is a dependency of installed extensions: ClusterExtension \"{ext_a}\" (bundle \"{}.v1.0.0\") requires package {} >=1.0.0 <2.0.0",
            w.a, w.b
        )) && out.stderr.contains("pass --force"),
        "{}",
        out.stderr
    );
    assert!(
        kube::Api::<olmv1_api::v1::ClusterExtension>::all(w.client.clone())
            .get_opt(&ext_b)
            .await
            .unwrap()
            .is_some(),
        "a refused uninstall deletes nothing"
    );

    // Once the dependent is gone, the refused upgrade goes through on its own.
    olmv1(&["uninstall", &ext_a]).ok();
    components::wait_installed(&w.client, &ext_b, "2.0.0").await;
    olmv1(&["uninstall", &ext_b]).ok();
}

#[tokio::test]
async fn a_bundle_whose_api_requirement_the_cluster_already_serves_installs_alone() {
    // An API nothing in the catalog provides, served by a CRD the admin created.
    let group = format!("{}.served.olmv1.io", support::fresh_name("deps-api"));
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": "Gadget", "listKind": "GadgetList", "plural": "gadgets", "singular": "gadget"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    });
    support::kubectl_with_stdin(&["apply", "-f", "-"], &crd.to_string()).ok();
    support::wait_crds_established(&[&format!("crd/gadgets.{group}")]);
    let needs = json!({"group": group, "version": "v1", "kind": "Gadget"});
    let w = World::new("deps-served", |a, b| {
        vec![
            package(a, vec![Bundle::new("1.0.0").requires("olm.gvk.required", needs)]),
            package(b, vec![Bundle::new("1.0.0")]),
        ]
    })
    .await;
    let ext_a = w.extension_of(&w.a);
    w.apply(&w.a, json!({})).await;
    components::wait_installed(&w.client, &ext_a, "1.0.0").await;
    olmv1(&["uninstall", &ext_a]).ok();
}

#[tokio::test]
async fn refuse_mode_keeps_upstreams_refusal_of_bundles_with_dependencies() {
    let share = components::exclusive_cluster().await;
    let w = World::new("deps-refuse", a_needs_b(">=1.0.0")).await;
    let stopped = components::stop_shared_controller(&share);
    let _refusing =
        components::Replica::controller_as("controller", "controller-refuse", &["--dependencies", "refuse"]);
    let ext_a = w.extension_of(&w.a);
    w.apply(&w.a, json!({})).await;
    let refused =
        components::wait_progressing(&w.client, &ext_a, "Retrying", "currently not supported").await;
    assert_eq!(
        components::condition(&refused, "Progressing").unwrap().message,
        format!(
            "validating bundle \"{a}.v1.0.0\": bundle \"{a}.v1.0.0\" has a dependency declared via property \"olm.package.required\" which is currently not supported",
            a = w.a
        )
    );
    drop(_refusing);
    drop(stopped);
    // The default mode, back: the same extension is blocked on b instead.
    components::wait_progressing(&w.client, &ext_a, "Blocked", "not satisfied").await;
}

/// A rule whose worst case multiplies the property list by itself through list `+` inside two
/// nested comprehensions (the nesting allowed): refused by its estimated cost when the catalog is
/// read, never evaluated.
const OVER_BUDGET_RULE: &str = "properties.all(a, (properties + properties + properties + properties + properties + properties + properties + properties).exists(b, b.type == a.type + \"x\"))";

/// An upgrade to a bundle carrying an over-budget CEL rule is refused with the reason
/// (`Progressing=False/Blocked`), the installed version keeps running, and another extension
/// installs meanwhile.
#[tokio::test]
async fn a_bundle_with_an_over_budget_rule_is_blocked_while_another_extension_installs() {
    let w = World::new("deps-budget", |a, b| {
        let costly = Bundle::new("2.0.0")
            .replaces("1.0.0", a)
            .requires("olm.constraint", json!({"cel": {"rule": OVER_BUDGET_RULE}}));
        vec![
            package(a, vec![Bundle::new("1.0.0"), costly]),
            package(b, vec![Bundle::new("1.0.0")]),
        ]
    })
    .await;
    let (ext_a, ext_b) = (w.extension_of(&w.a), w.extension_of(&w.b));
    w.apply(&w.a, json!({"version": "1.0.0"})).await;
    components::wait_installed(&w.client, &ext_a, "1.0.0").await;

    // The upgrade and another extension at once.
    w.apply(&w.a, json!({"version": "2.0.0"})).await;
    w.apply(&w.b, json!({})).await;
    components::wait_installed(&w.client, &ext_b, "1.0.0").await;
    let blocked = components::wait_progressing(&w.client, &ext_a, "Blocked", "over the budget").await;
    let progressing = components::condition(&blocked, "Progressing").unwrap();
    assert_eq!(progressing.status, "False");
    for expected in [
        format!(
            "error for resolved bundle \"{}.v2.0.0\" with version \"2.0.0\": ",
            w.a
        ),
        format!(
            "bundle \"{}.v2.0.0\" has an invalid olm.constraint dependency: ",
            w.a
        ),
        "worst-case cost".to_string(),
    ] {
        assert!(
            progressing.message.contains(&expected),
            "{expected:?} missing from: {}",
            progressing.message
        );
    }
    // 1.0.0 keeps running.
    let installed = components::condition(&blocked, "Installed").unwrap();
    assert_eq!(installed.status, "True", "{installed:?}");
    let status = blocked.status.as_ref().unwrap();
    let bundle = status.install.as_ref().map(|i| i.bundle.version.clone());
    assert_eq!(bundle.as_deref(), Some("1.0.0"));
    olmv1(&["uninstall", &ext_a]).ok();
    olmv1(&["uninstall", &ext_b]).ok();
}

/// A rule of 4 KiB of bad characters: the CEL parser makes one error per character, each with the
/// whole line (16 MB of text); olmv1 keeps one short sentence of it.
fn unreadable_rule() -> String {
    format!("1 == {}", "#".repeat(4000))
}

/// Sixteen rules of eight patterns each, every automaton large (compiling them all costs more
/// than a check's budget), each rule valid and cheap to evaluate (its text is a short literal).
fn costly_to_compile(package: &str) -> Value {
    let rules: Vec<Value> = (0..16)
        .map(|r| {
            let tests: Vec<String> = (0..8)
                .map(|k| format!("'abc'.matches('({package}{r}x{k}y){{300}}')"))
                .collect();
            json!({"cel": {"rule": tests.join(" || ")}})
        })
        .collect();
    json!({"all": {"constraints": rules}})
}

/// Upgrades to bundles whose requirements are hostile in the new ways (a compiler error text, and
/// compiling that costs more than the check's budget) are refused, each with one short sentence,
/// the installed versions keep running, and another extension installs meanwhile: the controller
/// keeps reconciling other extensions while one extension's catalog is hostile.
#[tokio::test]
async fn hostile_rules_are_refused_in_short_sentences_while_another_extension_installs() {
    let w = World::new("deps-hostile", |a, b| {
        let c = format!("{a}c");
        let unreadable = Bundle::new("2.0.0")
            .replaces("1.0.0", a)
            .requires("olm.constraint", json!({"cel": {"rule": unreadable_rule()}}));
        let costly = Bundle::new("2.0.0")
            .replaces("1.0.0", &c)
            .requires("olm.constraint", costly_to_compile(&c));
        vec![
            package(a, vec![Bundle::new("1.0.0"), unreadable]),
            package(&c, vec![Bundle::new("1.0.0"), costly]),
            package(b, vec![Bundle::new("1.0.0")]),
        ]
    })
    .await;
    let c = format!("{}c", w.a);
    let (ext_a, ext_b, ext_c) = (w.extension_of(&w.a), w.extension_of(&w.b), w.extension_of(&c));
    w.apply(&w.a, json!({"version": "1.0.0"})).await;
    w.apply(&c, json!({"version": "1.0.0"})).await;
    components::wait_installed(&w.client, &ext_a, "1.0.0").await;
    components::wait_installed(&w.client, &ext_c, "1.0.0").await;

    // Both upgrades and another extension at once.
    w.apply(&w.a, json!({"version": "2.0.0"})).await;
    w.apply(&c, json!({"version": "2.0.0"})).await;
    w.apply(&w.b, json!({})).await;
    components::wait_installed(&w.client, &ext_b, "1.0.0").await;
    // The compile's refusal names the budget; once enough of its rules are in the process's
    // cache (a later reconcile), the rules are evaluated and are simply not satisfied.
    for (extension, expected) in [(&ext_a, "more errors"), (&ext_c, "")] {
        let blocked = components::wait_progressing(&w.client, extension, "Blocked", expected).await;
        let progressing = components::condition(&blocked, "Progressing").unwrap();
        assert_eq!(progressing.status, "False");
        // One short sentence, whatever the catalog holds.
        assert!(
            progressing.message.len() < 1024 && !progressing.message.contains('\n'),
            "{extension}: {} bytes: {}",
            progressing.message.len(),
            progressing.message
        );
        let installed = components::condition(&blocked, "Installed").unwrap();
        assert_eq!(installed.status, "True", "{extension}: {installed:?}");
        let status = blocked.status.as_ref().unwrap();
        let version = status.install.as_ref().map(|i| i.bundle.version.clone());
        assert_eq!(version.as_deref(), Some("1.0.0"), "{extension} keeps running");
        if *extension == ext_c {
            // Refused over the budget, or for a pattern whose automaton is over the regex
            // compiler's size limit; once compiled, simply not satisfied.
            assert!(
                progressing.message.contains("work units")
                    || progressing.message.contains("that olmv1 cannot use")
                    || progressing.message.contains("not satisfied"),
                "{}",
                progressing.message
            );
        }
    }
    for extension in [&ext_a, &ext_b, &ext_c] {
        olmv1(&["uninstall", extension]).ok();
    }
}
