use super::*;

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn conf(text: &str) -> RegistriesConf {
    RegistriesConf::parse(text, "/etc/containers/registries.conf").expect("valid registries.conf")
}

fn sources(conf: &RegistriesConf, reference: &str) -> Vec<String> {
    conf.pull_sources(&ImageReference::parse(reference).unwrap())
        .expect("not blocked")
        .into_iter()
        .map(|s| s.reference.to_string())
        .collect()
}

fn invalid(text: &str) -> String {
    RegistriesConf::parse(text, "f").unwrap_err().to_string()
}

#[test]
fn the_man_pages_example_tries_the_mirrors_in_order_then_the_location() {
    let c = conf(
        r#"
unqualified-search-registries = ["example.com"]

[[registry]]
prefix = "example.com/foo"
insecure = false
blocked = false
location = "internal-registry-for-example.com/bar"

[[registry.mirror]]
location = "example-mirror-0.local/mirror-for-foo"

[[registry.mirror]]
location = "example-mirror-1.local/mirrors/foo"
insecure = true

[[registry]]
location = "registry.com"

[[registry.mirror]]
location = "mirror.registry.com"
"#,
    );
    assert_eq!(
        sources(&c, "example.com/foo/image:latest"),
        [
            "example-mirror-0.local/mirror-for-foo/image:latest",
            "example-mirror-1.local/mirrors/foo/image:latest",
            "internal-registry-for-example.com/bar/image:latest",
        ]
    );
    // A mirror belongs to its own table only.
    assert_eq!(
        sources(&c, "registry.com/image:latest"),
        ["mirror.registry.com/image:latest", "registry.com/image:latest"]
    );
    // No table: the reference as written.
    assert_eq!(sources(&c, "quay.io/org/op:v1"), ["quay.io/org/op:v1"]);
    let tried = c
        .pull_sources(&ImageReference::parse("example.com/foo/image:latest").unwrap())
        .unwrap();
    assert_eq!(
        tried.iter().map(|s| s.mirror).collect::<Vec<_>>(),
        [true, true, false]
    );
    assert!(c.is_insecure("example-mirror-1.local/mirrors/foo/image"));
    assert!(!c.is_insecure("example-mirror-1.local/elsewhere/image"));
    assert!(!c.is_insecure("example-mirror-0.local/mirror-for-foo/image"));
    assert!(!c.is_insecure("internal-registry-for-example.com/bar/image"));
}

#[test]
fn the_longest_matching_prefix_wins_and_a_prefix_ends_at_a_separator() {
    let c = conf(
        r#"
[[registry]]
prefix = "quay.io"
location = "short.example"

[[registry]]
prefix = "quay.io/org"
location = "long.example/mirror"

[[registry]]
prefix = "quay.io/org/op:v1"
location = "pinned.example/op:v1-copy"
"#,
    );
    assert_eq!(sources(&c, "quay.io/org/op:v2"), ["long.example/mirror/op:v2"]);
    assert_eq!(sources(&c, "quay.io/other/op:v2"), ["short.example/other/op:v2"]);
    // `quay.io/org` does not match `quay.io/organisation` (no separator after the prefix).
    assert_eq!(
        sources(&c, "quay.io/organisation/op:v2"),
        ["short.example/organisation/op:v2"]
    );
    // A prefix with a tag matches that tag exactly.
    assert_eq!(sources(&c, "quay.io/org/op:v1"), ["pinned.example/op:v1-copy"]);
    // A digest follows the prefix with `@`.
    assert_eq!(
        sources(&c, &format!("quay.io/org/op@{DIGEST}")),
        [format!("long.example/mirror/op@{DIGEST}")]
    );
    // `quay.io` does not match `quay.io.evil.com`.
    assert_eq!(sources(&c, "quay.io.evil.com/x:y"), ["quay.io.evil.com/x:y"]);
}

#[test]
fn a_wildcard_prefix_matches_subdomains_and_keeps_the_reference_without_location() {
    let c = conf(
        r#"
[[registry]]
prefix = "*.example.com"

[[registry.mirror]]
location = "mirror.local/example"

[[registry]]
prefix = "*.blocked.example"
blocked = true
"#,
    );
    assert_eq!(
        sources(&c, "a.example.com/foo/op:v1"),
        ["mirror.local/example/foo/op:v1", "a.example.com/foo/op:v1"]
    );
    // Any number of subdomains.
    assert_eq!(
        sources(&c, "b.a.example.com/op:v1"),
        ["mirror.local/example/op:v1", "b.a.example.com/op:v1"]
    );
    // The domain itself and hosts merely containing it do not match.
    assert_eq!(sources(&c, "example.com/op:v1"), ["example.com/op:v1"]);
    assert_eq!(
        sources(&c, "a.example.community/op:v1"),
        ["a.example.community/op:v1"]
    );
    let err = c
        .pull_sources(&ImageReference::parse("x.blocked.example/op:v1").unwrap())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "image x.blocked.example/op:v1: registry *.blocked.example is blocked in /etc/containers/registries.conf"
    );
    assert!(err.is_terminal());
}

#[test]
fn digest_only_mirrors_serve_only_references_by_digest() {
    let c = conf(
        r#"
[[registry]]
prefix = "registry.redhat.io"
mirror-by-digest-only = true

[[registry.mirror]]
location = "mirror.internal/redhat"

[[registry]]
location = "quay.io"

[[registry.mirror]]
location = "digests.internal/quay"
pull-from-mirror = "digest-only"

[[registry.mirror]]
location = "tags.internal/quay"
pull-from-mirror = "tag-only"

[[registry.mirror]]
location = "all.internal/quay"
pull-from-mirror = "all"
"#,
    );
    assert_eq!(
        sources(&c, "registry.redhat.io/ubi9/op:v1"),
        ["registry.redhat.io/ubi9/op:v1"],
        "a tag goes to the primary only"
    );
    assert_eq!(
        sources(&c, &format!("registry.redhat.io/ubi9/op@{DIGEST}")),
        [
            format!("mirror.internal/redhat/ubi9/op@{DIGEST}"),
            format!("registry.redhat.io/ubi9/op@{DIGEST}")
        ]
    );
    assert_eq!(
        sources(&c, "quay.io/org/op:v1"),
        [
            "tags.internal/quay/org/op:v1",
            "all.internal/quay/org/op:v1",
            "quay.io/org/op:v1"
        ]
    );
    assert_eq!(
        sources(&c, &format!("quay.io/org/op@{DIGEST}")),
        [
            format!("digests.internal/quay/org/op@{DIGEST}"),
            format!("all.internal/quay/org/op@{DIGEST}"),
            format!("quay.io/org/op@{DIGEST}")
        ]
    );
}

#[test]
fn blocked_registries_are_refused_and_blocked_hosts_are_never_contacted() {
    let c = conf(
        r#"
[[registry]]
location = "docker.io"
blocked = true

[[registry]]
prefix = "quay.io/org"
location = "quay.io/org"

[[registry.mirror]]
location = "docker.io/quay-copy"

[[registry]]
prefix = "only-blocked.example"
location = "docker.io/x"
"#,
    );
    let blocked = |r: &str| {
        c.pull_sources(&ImageReference::parse(r).unwrap())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        blocked("docker.io/library/busybox:1"),
        "image docker.io/library/busybox:1: registry docker.io is blocked in /etc/containers/registries.conf"
    );
    // The mirror on the blocked host is left out; the primary remains.
    assert_eq!(sources(&c, "quay.io/org/op:v1"), ["quay.io/org/op:v1"]);
    // Every source on a blocked host: refused, naming the blocked registry.
    assert_eq!(
        blocked("only-blocked.example/op:v1"),
        "image only-blocked.example/op:v1: registry docker.io is blocked in /etc/containers/registries.conf"
    );
}

#[test]
fn a_blocked_source_with_mirrors_is_never_contacted_but_its_mirrors_are() {
    // What OpenShift writes for an ImageDigestMirrorSet with `mirrorSourcePolicy:
    // NeverContactSource`.
    let c = conf(
        r#"
[[registry]]
location = "registry.redhat.io/ubi9"
blocked = true

[[registry.mirror]]
location = "mirror.internal/ubi9"
pull-from-mirror = "digest-only"
"#,
    );
    assert_eq!(
        sources(&c, &format!("registry.redhat.io/ubi9/op@{DIGEST}")),
        [format!("mirror.internal/ubi9/op@{DIGEST}")]
    );
    let err = c
        .pull_sources(&ImageReference::parse("registry.redhat.io/ubi9/op:v1").unwrap())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "image registry.redhat.io/ubi9/op:v1: registry registry.redhat.io/ubi9 is blocked in /etc/containers/registries.conf"
    );
}

#[test]
fn version_1_lists_and_insecure_hosts() {
    let c = conf(
        r#"
[registries.search]
registries = ["quay.io"]

[registries.insecure]
registries = ["registry.local:5000"]

[registries.block]
registries = ["bad.example"]
"#,
    );
    assert!(c.is_insecure("registry.local:5000/op"));
    assert!(!c.is_insecure("quay.io/op"));
    assert_eq!(
        sources(&c, "registry.local:5000/op:v1"),
        ["registry.local:5000/op:v1"]
    );
    assert!(
        c.pull_sources(&ImageReference::parse("bad.example/op:v1").unwrap())
            .is_err()
    );
    // The machine's default file: comments only.
    assert_eq!(conf("# nothing\n").registries, vec![]);
}

#[test]
fn invalid_files_are_refused_with_the_reason() {
    assert_eq!(
        invalid("[[registry]]\ninsecure = true\n"),
        "the registries configuration f is invalid: a [[registry]] has neither prefix nor location"
    );
    assert!(invalid("[[registry]\n").starts_with("the registries configuration f is invalid: "));
    assert!(
        invalid("[[registry]]\nprefix = \"example.*.com\"\n").contains("a wildcard may only start a prefix")
    );
    assert!(invalid("[[registry]]\nprefix = \"*.example.com/foo\"\n").contains("a wildcard prefix is"));
    assert!(invalid("[[registry]]\nlocation = \"https://quay.io\"\n").contains("no scheme"));
    assert!(
        invalid("[[registry]]\nlocation = \"q.io\"\n[[registry.mirror]]\ninsecure = true\n")
            .contains("a mirror has no location")
    );
    assert!(
        invalid(
            "[[registry]]\nlocation = \"q.io\"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = \"m.io\"\npull-from-mirror = \"all\"\n"
        )
        .contains("cannot both be set")
    );
    assert!(
        invalid("[[registry]]\nlocation = \"q.io\"\n[[registry.mirror]]\nlocation = \"m.io\"\npull-from-mirror = \"sometimes\"\n")
            .contains("unsupported pull-from-mirror value \"sometimes\"")
    );
    assert!(
        invalid("[[registry]]\nlocation = \"q.io\"\npull-from-mirror = \"all\"\n")
            .contains("not of a [[registry]]")
    );
    assert!(
        invalid("[[registry]]\nlocation = \"q.io\"\ninsecure = true\n[[registry]]\nprefix = \"x.io\"\nlocation = \"q.io\"\n")
            .contains("conflicting insecure or blocked")
    );
    assert!(
        invalid("[registries.insecure]\nregistries = [\"a.io\"]\n[[registry]]\nlocation = \"q.io\"\n")
            .contains("mixing version 1")
    );
}

#[test]
fn a_rewrite_into_an_invalid_reference_is_an_error() {
    let c = conf("[[registry]]\nprefix = \"quay.io/org/op:v1\"\nlocation = \"mirror.io/op\"\n");
    // `mirror.io/op` + `` has no tag: not a pullable reference.
    let err = c
        .pull_sources(&ImageReference::parse("quay.io/org/op:v1").unwrap())
        .unwrap_err();
    assert!(matches!(err, RegistriesConfError::Rewrite { .. }), "{err}");
}

#[test]
fn the_file_comes_from_the_flag_then_the_environment_then_the_default_when_present() {
    let flag = Path::new("/a/registries.conf");
    assert_eq!(
        RegistriesConf::path(Some(flag), Some("/b.conf")),
        Some(flag.to_path_buf())
    );
    assert_eq!(
        RegistriesConf::path(None, Some("/b.conf")),
        Some(PathBuf::from("/b.conf"))
    );
    let default = Path::new(DEFAULT_REGISTRIES_CONF);
    assert_eq!(
        RegistriesConf::path(None, None),
        default.exists().then(|| default.to_path_buf())
    );
}

#[test]
fn a_file_over_the_size_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registries.conf");
    std::fs::write(&path, "#".repeat(MAX_REGISTRIES_CONF_BYTES as usize + 1)).unwrap();
    let err = RegistriesConf::load(&path).unwrap_err().to_string();
    assert!(err.contains("is larger than 1048576 bytes"), "{err}");
    let missing = RegistriesConf::load(&dir.path().join("none")).unwrap_err();
    assert!(matches!(missing, RegistriesConfError::Read { .. }), "{missing}");
}
