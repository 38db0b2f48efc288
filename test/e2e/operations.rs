//! The components as platform parts: `/metrics` over HTTPS only for callers the API server allows
//! `get` on `/metrics` (TokenReview + SubjectAccessReview), probes open on their own port, and
//! the TLS profile (`--tls-profile`) on catalogd's catalog server and on a metrics server, checked
//! with `openssl s_client` offering only what a profile forbids, then what it allows, and with a
//! rustls client for the post-quantum hybrid group (OpenSSL 3.0 has no ML-KEM).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::NamedGroup;
use rustls::crypto::{CryptoProvider, aws_lc_rs};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};

use crate::components::{self, Operations};
use crate::fixtures::scratch_dir;
use crate::support;

/// How long a component has to start listening on a busy machine.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// `GET /metrics` until the server answers (it may be restarting), then its status and body.
async fn metrics_answer(addr: &str, ca: &[u8], token: Option<&str>) -> (u16, String) {
    support::wait_for(&format!("/metrics on {addr} to answer"), START_TIMEOUT, || {
        components::get_metrics(addr, ca, token)
    })
    .await
}

/// The reader's token is served once the API server's RBAC has the binding (and the component's
/// short-lived denial, if it asked before, has expired).
async fn wait_served(addr: &str, ca: &[u8], token: &str, metric: &str) {
    support::wait_for(
        &format!("/metrics on {addr} to serve the metrics reader"),
        Duration::from_secs(90),
        || async move {
            match components::get_metrics(addr, ca, Some(token)).await? {
                (200, body) if body.contains(metric) => Ok(()),
                (status, body) => Err(format!("{status}: {body}")),
            }
        },
    )
    .await;
}

/// A token of a ServiceAccount without any role, created on first use. Once per process: two
/// tests ask at the same time, and the second `kubectl apply` of a new object can fail with
/// AlreadyExists.
fn stranger_token() -> String {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN
        .get_or_init(|| {
            let stranger = "olmv1-e2e-no-metrics";
            support::kubectl_apply(&format!(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {stranger}\n  namespace: {}\n",
                components::SYSTEM_NAMESPACE
            ))
            .ok();
            components::service_account_token(components::SYSTEM_NAMESPACE, stranger)
        })
        .clone()
}

/// What every reviewed metrics server answers: 401 without a token or with one the API server
/// does not accept, 403 for a ServiceAccount without the role, the metrics for the reader; no
/// plain HTTP.
async fn check_metrics_access(addr: &str, ca: &[u8], metric: &str) {
    let (status, body) = metrics_answer(addr, ca, None).await;
    assert_eq!(status, 401, "no token: {body}");
    let (status, body) = metrics_answer(addr, ca, Some("not-a-token")).await;
    assert_eq!(status, 401, "a token the API server does not know: {body}");

    let (status, body) = metrics_answer(addr, ca, Some(&stranger_token())).await;
    assert_eq!(
        status, 403,
        "a ServiceAccount without olmv1-metrics-reader: {body}"
    );
    assert!(!body.contains(metric), "{body}");

    wait_served(addr, ca, &components::metrics_reader_token(), metric).await;

    let plain = reqwest::get(format!("http://{addr}/metrics")).await;
    assert!(
        plain.map(|r| r.status() != 200).unwrap_or(true),
        "/metrics must not be served in plain HTTP on {addr}"
    );
}

#[tokio::test]
async fn the_controllers_metrics_are_served_only_to_callers_allowed_get_metrics() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let operations = components::operations("controller");
    check_metrics_access(
        &operations.metrics,
        &components::metrics_ca(),
        "olmv1_clusterextension_reconcile_total",
    )
    .await;
    // The probes answer the kubelet, which has no token.
    for path in ["/healthz", "/readyz"] {
        let url = format!("http://{}{path}", operations.probes);
        let status = support::wait_for(&format!("{url} to answer"), START_TIMEOUT, || async {
            reqwest::get(&url).await.map(|r| r.status())
        })
        .await;
        assert_eq!(status, 200, "{url}");
    }
}

/// `openssl s_client` handshakes with `addr` offering only `offer` (s_client options):
/// whether the server accepted.
fn handshake(addr: &str, offer: &[&str]) -> bool {
    let output = Command::new("timeout")
        .args(["30", "openssl", "s_client", "-connect", addr])
        .args(offer)
        .stdin(Stdio::null())
        .output()
        .expect("openssl s_client (hack/install-deps.sh installs openssl)");
    output.status.success()
}

/// A rustls client (aws-lc-rs) handshakes with `addr` offering TLS 1.3 with the one key exchange
/// `group`, trusting `ca`: whether the server accepted, having agreed on that group.
fn handshake_with_group(addr: &str, ca: &Path, group: NamedGroup) -> bool {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("the test CA") {
        roots.add(cert.expect("the test CA's PEM")).expect("the test CA");
    }
    let provider = CryptoProvider {
        kx_groups: aws_lc_rs::ALL_KX_GROUPS
            .iter()
            .copied()
            .filter(|g| g.name() == group)
            .collect(),
        ..aws_lc_rs::default_provider()
    };
    assert_eq!(provider.kx_groups.len(), 1, "aws-lc-rs implements {group:?}");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").expect("server name");
    let mut connection = rustls::ClientConnection::new(Arc::new(config), name).expect("client connection");
    let mut socket = std::net::TcpStream::connect(addr).expect("connect");
    socket.set_read_timeout(Some(Duration::from_secs(30))).ok();
    while connection.is_handshaking() {
        if connection.complete_io(&mut socket).is_err() {
            return false;
        }
    }
    let agreed = connection.negotiated_key_exchange_group().map(|g| g.name());
    assert_eq!(agreed, Some(group), "the only group offered");
    true
}

/// How a test client offers.
enum Client {
    /// `openssl s_client` with these options.
    OpenSsl(&'static [&'static str]),
    /// rustls offering TLS 1.3 with this one group.
    Group(NamedGroup),
}

/// What a client offers, and whether the profile lets it in.
struct Offer {
    what: &'static str,
    client: Client,
    accepted: bool,
}

const fn refused(what: &'static str, args: &'static [&'static str]) -> Offer {
    Offer {
        what,
        client: Client::OpenSsl(args),
        accepted: false,
    }
}

const fn accepted(what: &'static str, args: &'static [&'static str]) -> Offer {
    Offer {
        what,
        client: Client::OpenSsl(args),
        accepted: true,
    }
}

/// Only the post-quantum hybrid X25519MLKEM768, which the named profiles list first.
const fn hybrid_only(what: &'static str, accepted: bool) -> Offer {
    Offer {
        what,
        client: Client::Group(NamedGroup::X25519MLKEM768),
        accepted,
    }
}

/// A profile's flags and the offers checked against it (the test certificate is RSA).
fn profiles() -> Vec<(&'static str, Vec<&'static str>, Vec<Offer>)> {
    vec![
        (
            "modern",
            vec!["--tls-profile", "modern"],
            vec![
                refused("TLS 1.2", &["-tls1_2"]),
                refused("TLS 1.3 with only P-521", &["-tls1_3", "-groups", "P-521"]),
                accepted("TLS 1.3", &["-tls1_3"]),
                hybrid_only("TLS 1.3 with only X25519MLKEM768", true),
            ],
        ),
        (
            "intermediate",
            vec!["--tls-profile", "intermediate"],
            vec![
                refused("TLS 1.1", &["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"]),
                refused(
                    "TLS 1.2 with only a CBC suite (removed)",
                    &["-tls1_2", "-cipher", "ECDHE-RSA-AES128-SHA"],
                ),
                refused(
                    "TLS 1.3 with only P-521 (not listed)",
                    &["-tls1_3", "-groups", "P-521"],
                ),
                accepted(
                    "TLS 1.2 with an ECDHE AES-GCM suite",
                    &["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"],
                ),
                accepted("TLS 1.3", &["-tls1_3"]),
                hybrid_only("TLS 1.3 with only X25519MLKEM768", true),
            ],
        ),
        (
            "old",
            vec!["--tls-profile", "old"],
            vec![
                refused(
                    "TLS 1.3 with only P-521 (not listed)",
                    &["-tls1_3", "-groups", "P-521"],
                ),
                // Upstream's old profile allows these; rustls has no implementation (docs).
                refused(
                    "TLS 1.2 with only an RSA key exchange suite (not implemented)",
                    &["-tls1_2", "-cipher", "AES128-SHA"],
                ),
                accepted(
                    "TLS 1.2 with an ECDHE ChaCha20 suite",
                    &["-tls1_2", "-cipher", "ECDHE-RSA-CHACHA20-POLY1305"],
                ),
                accepted("TLS 1.3", &["-tls1_3"]),
                hybrid_only("TLS 1.3 with only X25519MLKEM768", true),
            ],
        ),
        (
            "custom",
            vec![
                "--tls-profile",
                "custom",
                "--tls-custom-version",
                "TLSv1.2",
                "--tls-custom-ciphers",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "--tls-custom-curves",
                "secp384r1",
            ],
            vec![
                refused(
                    "TLS 1.2 with a suite not listed",
                    &[
                        "-tls1_2",
                        "-cipher",
                        "ECDHE-RSA-AES256-GCM-SHA384",
                        "-groups",
                        "P-384",
                    ],
                ),
                refused(
                    "TLS 1.2 with the suite but a curve not listed",
                    &[
                        "-tls1_2",
                        "-cipher",
                        "ECDHE-RSA-AES128-GCM-SHA256",
                        "-groups",
                        "X25519",
                    ],
                ),
                refused(
                    "TLS 1.3 with a curve not listed",
                    &["-tls1_3", "-groups", "X25519"],
                ),
                accepted(
                    "TLS 1.2 with the suite and curve",
                    &[
                        "-tls1_2",
                        "-cipher",
                        "ECDHE-RSA-AES128-GCM-SHA256",
                        "-groups",
                        "P-384",
                    ],
                ),
                accepted("TLS 1.3 with the curve", &["-tls1_3", "-groups", "P-384"]),
                hybrid_only("TLS 1.3 with only X25519MLKEM768 (not listed)", false),
            ],
        ),
    ]
}

fn check_offers(server: &str, addr: &str, ca: &Path, offers: &[Offer]) -> Vec<String> {
    offers
        .iter()
        .filter(|offer| {
            let accepted = match offer.client {
                Client::OpenSsl(args) => handshake(addr, args),
                Client::Group(group) => handshake_with_group(addr, ca, group),
            };
            accepted != offer.accepted
        })
        .map(|offer| {
            format!(
                "{server}: {} was {}",
                offer.what,
                if offer.accepted { "refused" } else { "accepted" }
            )
        })
        .collect()
}

/// A server process, killed when dropped.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// Waits until `server` accepts TCP connections on `addr`; fails at once if it exits.
async fn wait_listening(server: &mut Server, addr: &str) {
    support::wait_for(&format!("{addr} to listen"), START_TIMEOUT, || {
        let exited = server.0.try_wait().ok().flatten();
        async move {
            if let Some(status) = exited {
                panic!("the server for {addr} exited ({status}); its error is on stderr");
            }
            tokio::net::TcpStream::connect(addr).await.map(|_| ())
        }
    })
    .await;
}

#[tokio::test]
async fn the_catalog_server_offers_exactly_what_each_tls_profile_allows() {
    let dir = scratch_dir("tls-profiles");
    let tls = support::TestTls::generate(&scratch_dir("tls-profiles-pki"));
    let catalog = support::repo_root().join("test/fixtures/images/catalog-v2");
    let mut wrong = Vec::new();
    for (name, flags, offers) in profiles() {
        let addr = format!("127.0.0.1:{}", support::free_port());
        let mut server = Server(
            Command::new(support::olmv1_bin())
                .args(["catalogd", "serve", "--listen", &addr])
                .arg("--catalog")
                .arg(format!("fixture={}", catalog.display()))
                .arg("--cache-dir")
                .arg(dir.join(name))
                .arg("--tls-cert")
                .arg(&tls.serving.cert)
                .arg("--tls-key")
                .arg(&tls.serving.key)
                .args(&flags)
                .env("OLMV1_EXIT_WITH_PARENT", "1")
                .stdout(Stdio::null())
                .spawn()
                .expect("olmv1 catalogd serve"),
        );
        wait_listening(&mut server, &addr).await;
        wrong.extend(check_offers(
            &format!("catalog server, {name}"),
            &addr,
            &tls.ca_cert,
            &offers,
        ));
        drop(server);
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[tokio::test]
async fn a_metrics_server_follows_the_tls_profile_and_reviews_its_callers() {
    let _share = components::shared_cluster().await;
    components::ensure_running();
    let dir = scratch_dir("tls-metrics");
    let tls = support::TestTls::generate(&dir);
    let ca = std::fs::read(&tls.ca_cert).unwrap();
    let mut wrong = Vec::new();
    // For each profile, a catalogd that reconciles no ClusterCatalog: its metrics server (and
    // its catalog server) under the profile; the last one's callers are reviewed too.
    for (name, flags, offers) in profiles() {
        let operations = Operations {
            metrics: format!("127.0.0.1:{}", support::free_port()),
            probes: format!("127.0.0.1:{}", support::free_port()),
        };
        let mut extra = vec![
            "--tls-cert",
            tls.serving.cert.to_str().unwrap(),
            "--tls-key",
            tls.serving.key.to_str().unwrap(),
        ];
        extra.extend(flags);
        let catalogd = components::start_idle_catalogd(&format!("catalogd-{name}"), &operations, &extra);
        let ready = format!("http://{}/readyz", operations.probes);
        support::wait_for(
            &format!("the {name} catalogd to be ready"),
            START_TIMEOUT,
            || async {
                match reqwest::get(&ready).await.map(|r| r.status()) {
                    Ok(status) if status == 200 => Ok(()),
                    other => Err(format!("{other:?}; log: {}", catalogd.log())),
                }
            },
        )
        .await;
        wrong.extend(check_offers(
            &format!("catalogd metrics server, {name}"),
            &operations.metrics,
            &tls.ca_cert,
            &offers,
        ));
        wrong.extend(check_offers(
            &format!("catalogd catalog server, {name}"),
            &catalogd.address,
            &tls.ca_cert,
            &offers,
        ));
        if name == "custom" {
            check_metrics_access(&operations.metrics, &ca, "olmv1_clustercatalog_reconcile_total").await;
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
