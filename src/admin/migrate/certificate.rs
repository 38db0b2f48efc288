//! Whether cert-manager keeps the serving certificate classic made when olmv1's Certificate takes
//! its Secret over (pure). Classic issues `<deployment>-service-cert` itself (an ECDSA P-256 key,
//! its own CA in `olmCAKey`); olmv1 renders a cert-manager Certificate writing to the same
//! Secret. cert-manager (v1.21's issuing checks) reissues unless the Secret holds a key pair that
//! matches, of the key type the Certificate asks for, for exactly the Certificate's names, not
//! yet within `renewBefore` of expiry, and not marked as another issuer's or Certificate's. A
//! reissued certificate lands in the same Secret while the pod runs: the kubelet updates the
//! mounted files, and a server that reads them only at start serves the old one until restarted.

use k8s_openapi::{api::core::v1::Secret, jiff::Timestamp};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use serde_json::Value;
use x509_cert::der::{Decode, Reader, SliceReader, asn1::ObjectIdentifier, asn1::UintRef};

/// The key classic keeps its CA certificate under in the Secret.
pub const CLASSIC_CA_KEY: &str = "olmCAKey";
/// The key cert-manager (and its CA injector) reads a CA from.
pub const CA_KEY: &str = "ca.crt";

const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
const P521: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.35");
const RSA_ENCRYPTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");

/// cert-manager's annotations naming who issued a Secret.
const ISSUER_ANNOTATIONS: [(&str, &str); 3] = [
    ("cert-manager.io/issuer-name", "name"),
    ("cert-manager.io/issuer-kind", "kind"),
    ("cert-manager.io/issuer-group", "group"),
];
const CERTIFICATE_NAME_ANNOTATION: &str = "cert-manager.io/certificate-name";

/// A key type as a Certificate's `spec.privateKey` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyType {
    Rsa(usize),
    Ecdsa(usize),
    Ed25519,
    Other(String),
}

impl std::fmt::Display for KeyType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyType::Rsa(bits) => write!(f, "RSA {bits}"),
            KeyType::Ecdsa(bits) => write!(f, "ECDSA P-{bits}"),
            KeyType::Ed25519 => f.write_str("Ed25519"),
            KeyType::Other(oid) => write!(f, "of algorithm {oid}"),
        }
    }
}

/// What `certificate` (a rendered cert-manager Certificate) asks for: its key type (cert-manager's
/// defaults: RSA 2048, ECDSA 256).
fn wanted_key(certificate: &Value) -> KeyType {
    let key = &certificate["spec"]["privateKey"];
    let size = key["size"].as_u64().filter(|s| *s > 0).map(|s| s as usize);
    match key["algorithm"].as_str().unwrap_or("RSA") {
        "ECDSA" => KeyType::Ecdsa(size.unwrap_or(256)),
        "Ed25519" => KeyType::Ed25519,
        _ => KeyType::Rsa(size.unwrap_or(2048)),
    }
}

/// The key type of a certificate's public key.
fn key_type(cert: &x509_cert::Certificate) -> KeyType {
    let spki = cert.tbs_certificate().subject_public_key_info();
    let oid = spki.algorithm.oid;
    if oid == EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.decode_as::<ObjectIdentifier>().ok());
        return match curve {
            Some(c) if c == P256 => KeyType::Ecdsa(256),
            Some(c) if c == P384 => KeyType::Ecdsa(384),
            Some(c) if c == P521 => KeyType::Ecdsa(521),
            other => KeyType::Other(format!("EC {other:?}")),
        };
    }
    if oid == RSA_ENCRYPTION {
        let bits = spki
            .subject_public_key
            .as_bytes()
            .and_then(|der| rsa_modulus_bits(der).ok())
            .unwrap_or(0);
        return KeyType::Rsa(bits);
    }
    if oid == ED25519 {
        return KeyType::Ed25519;
    }
    KeyType::Other(oid.to_string())
}

/// The bit length of an RSA public key's modulus (`RSAPublicKey`, DER).
fn rsa_modulus_bits(der: &[u8]) -> x509_cert::der::Result<usize> {
    let mut reader = SliceReader::new(der)?;
    let modulus = reader.sequence(|r| {
        let modulus = UintRef::decode(r)?;
        let _exponent = UintRef::decode(r)?;
        Ok::<_, x509_cert::der::Error>(modulus.as_bytes().to_vec())
    })?;
    Ok(match modulus.first() {
        Some(first) => modulus.len() * 8 - first.leading_zeros() as usize,
        None => 0,
    })
}

/// The certificate's common name and DNS names, and whether it names anything else (IP
/// addresses, URIs, emails), which a rendered Certificate never asks for.
fn names(cert: &x509_cert::Certificate) -> (Vec<String>, bool) {
    use x509_cert::ext::pkix::{SubjectAltName, name::GeneralName};
    let tbs = cert.tbs_certificate();
    let mut names: Vec<String> = tbs
        .subject()
        .iter()
        .filter(|atv| atv.oid == COMMON_NAME)
        .filter_map(|atv| x509_cert::ext::pkix::name::DirectoryString::try_from(&atv.value).ok())
        .map(|cn| cn.value().into_owned())
        .collect();
    let mut others = false;
    match tbs.get_extension::<SubjectAltName>() {
        Ok(Some((_, san))) => {
            for name in san.0 {
                match name {
                    GeneralName::DnsName(dns) => names.push(dns.to_string()),
                    _ => others = true,
                }
            }
        }
        Ok(None) => {}
        Err(_) => others = true,
    }
    names.sort();
    names.dedup();
    (names, others)
}

fn secret_bytes<'a>(secret: &'a Secret, key: &str) -> Option<&'a [u8]> {
    secret
        .data
        .as_ref()?
        .get(key)
        .map(|b| b.0.as_slice())
        .filter(|b| !b.is_empty())
}

/// `Ok(())` when cert-manager keeps the key pair in `secret` for `certificate` (a rendered
/// cert-manager Certificate) at `now`; else why it issues a new one.
pub fn kept_by_cert_manager(
    certificate: &Value,
    secret: Option<&Secret>,
    now: Timestamp,
) -> Result<(), String> {
    let Some(secret) = secret else {
        return Err("there is no such Secret".into());
    };
    let (Some(cert_pem), Some(key_pem)) = (secret_bytes(secret, "tls.crt"), secret_bytes(secret, "tls.key"))
    else {
        return Err("it holds no tls.crt and tls.key".into());
    };
    let cert_der = CertificateDer::from_pem_slice(cert_pem)
        .map_err(|e| format!("its tls.crt is not a certificate: {e}"))?;
    let key_der = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("its tls.key is not a private key: {e}"))?;
    let cert = x509_cert::Certificate::from_der(&cert_der)
        .map_err(|e| format!("its tls.crt is not a certificate: {e}"))?;
    rustls::sign::CertifiedKey::from_der(
        vec![cert_der.clone()],
        key_der,
        &rustls::crypto::ring::default_provider(),
    )
    .map_err(|e| format!("its tls.key does not belong to its tls.crt ({e})"))?;

    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    let issuer = &certificate["spec"]["issuerRef"];
    let wanted_issuer = [
        issuer["name"].as_str().unwrap_or_default(),
        issuer["kind"].as_str().unwrap_or("Issuer"),
        issuer["group"].as_str().unwrap_or("cert-manager.io"),
    ];
    let marked = ISSUER_ANNOTATIONS
        .iter()
        .any(|(k, _)| annotations.contains_key(*k));
    if marked {
        for ((key, what), wanted) in ISSUER_ANNOTATIONS.iter().zip(wanted_issuer) {
            let found = annotations.get(*key).map(String::as_str).unwrap_or_default();
            let defaulted = match *what {
                "kind" if found.is_empty() => "Issuer",
                "group" if found.is_empty() => "cert-manager.io",
                _ => found,
            };
            if defaulted != wanted {
                return Err(format!(
                    "another issuer made it (its {what} is {found:?}, not {wanted:?})"
                ));
            }
        }
    }
    let own_name = certificate["metadata"]["name"].as_str().unwrap_or_default();
    if let Some(other) = annotations
        .get(CERTIFICATE_NAME_ANNOTATION)
        .filter(|n| *n != own_name)
    {
        return Err(format!("Certificate {other:?} made it"));
    }

    let (found_key, wanted_key) = (key_type(&cert), wanted_key(certificate));
    if found_key != wanted_key {
        return Err(format!(
            "its key is {found_key}, the Certificate asks for {wanted_key}"
        ));
    }

    let mut wanted_names: Vec<String> = certificate["spec"]["dnsNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_string))
        .chain(certificate["spec"]["commonName"].as_str().map(str::to_string))
        .collect();
    wanted_names.sort();
    wanted_names.dedup();
    let (found_names, other_names) = names(&cert);
    if found_names != wanted_names || other_names {
        return Err(format!(
            "it is for {}, the Certificate for {}",
            found_names.join(", "),
            wanted_names.join(", ")
        ));
    }

    let not_after = cert
        .tbs_certificate()
        .validity()
        .not_after
        .to_unix_duration()
        .as_secs() as i64;
    let renew_before = certificate["spec"]["renewBefore"]
        .as_str()
        .and_then(go_hours)
        .unwrap_or(0);
    if now.as_second() >= not_after - renew_before {
        let expiry = Timestamp::from_second(not_after)
            .map(|t| t.to_string())
            .unwrap_or_default();
        return Err(format!(
            "it expires at {expiry}, within the Certificate's renewBefore ({})",
            certificate["spec"]["renewBefore"].as_str().unwrap_or_default()
        ));
    }
    Ok(())
}

/// Seconds of a Go duration of hours, minutes and seconds (`24h0m0s`), as rendered Certificates
/// write them.
fn go_hours(text: &str) -> Option<i64> {
    let mut total = 0i64;
    let mut number = String::new();
    for c in text.chars() {
        match c {
            '0'..='9' => number.push(c),
            'h' | 'm' | 's' => {
                let n: i64 = number.parse().ok()?;
                number.clear();
                total += n * match c {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
            }
            _ => return None,
        }
    }
    number.is_empty().then_some(total)
}

/// The data patch that gives a classic Secret the CA where cert-manager's injector reads it
/// (`ca.crt`, from classic's `olmCAKey`); `None` when it has one or classic kept none.
pub fn ca_data_patch(secret: &Value) -> Option<Value> {
    let data = &secret["data"];
    if !data[CA_KEY].is_null() {
        return None;
    }
    let ca = data[CLASSIC_CA_KEY].as_str().filter(|c| !c.is_empty())?;
    Some(serde_json::json!({ CA_KEY: ca }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn fixture(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("test/fixtures/certificates")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The Secret classic made with `pair`'s certificate and key, and `annotations`.
    fn secret(pair: &str, annotations: &[(&str, &str)]) -> Secret {
        let mut secret = Secret {
            data: Some(
                [
                    ("tls.crt", fixture(&format!("{pair}.crt"))),
                    ("tls.key", fixture(&format!("{pair}.key"))),
                    ("olmCAKey", fixture("ca.crt")),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), ByteString(v)))
                .collect(),
            ),
            ..Secret::default()
        };
        if !annotations.is_empty() {
            secret.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
        }
        secret
    }

    /// The Certificate olmv1 renders for Deployment `op-server` in `ns` (`ecdsa`: one serving an
    /// APIService).
    fn certificate(ecdsa: bool) -> Value {
        let host = "op-server-service.ns";
        let mut certificate = serde_json::json!({
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": "op-server-service-cert", "namespace": "ns"},
            "spec": {"secretName": "op-server-service-cert", "commonName": host, "usages": ["server auth"],
                "dnsNames": [host, format!("{host}.svc"), format!("{host}.svc.cluster.local")],
                "issuerRef": {"name": "op-server-service-cert-selfsigned-issuer"},
                "duration": "17520h0m0s", "renewBefore": "24h0m0s"}
        });
        if ecdsa {
            certificate["spec"]["privateKey"] = serde_json::json!({"algorithm": "ECDSA", "size": 256});
        }
        certificate
    }

    #[test]
    fn cert_manager_keeps_a_classic_certificate_of_the_key_type_and_names_it_asks_for() {
        let now = Timestamp::now();
        assert_eq!(
            kept_by_cert_manager(&certificate(true), Some(&secret("classic", &[])), now),
            Ok(())
        );
        // Once cert-manager has marked it as its own, still kept.
        let marked = secret(
            "classic",
            &[
                (
                    "cert-manager.io/issuer-name",
                    "op-server-service-cert-selfsigned-issuer",
                ),
                ("cert-manager.io/issuer-kind", "Issuer"),
                ("cert-manager.io/issuer-group", "cert-manager.io"),
                ("cert-manager.io/certificate-name", "op-server-service-cert"),
            ],
        );
        assert_eq!(
            kept_by_cert_manager(&certificate(true), Some(&marked), now),
            Ok(())
        );
        // cert-manager's default RSA 2048, as upstream renders a webhook Deployment's Certificate.
        assert_eq!(
            kept_by_cert_manager(&certificate(false), Some(&secret("rsa", &[])), now),
            Ok(())
        );
    }

    #[test]
    fn each_reason_cert_manager_reissues_is_named() {
        let now = Timestamp::now();
        let why = |certificate: Value, secret: Option<Secret>| {
            kept_by_cert_manager(&certificate, secret.as_ref(), now).unwrap_err()
        };
        assert_eq!(
            why(certificate(false), Some(secret("classic", &[]))),
            "its key is ECDSA P-256, the Certificate asks for RSA 2048"
        );
        assert_eq!(
            why(certificate(true), Some(secret("rsa", &[]))),
            "its key is RSA 2048, the Certificate asks for ECDSA P-256"
        );
        assert_eq!(
            why(certificate(true), Some(secret("other-names", &[]))),
            "it is for other-service.ns, other-service.ns.svc, other-service.ns.svc.cluster.local, the Certificate \
             for op-server-service.ns, op-server-service.ns.svc, op-server-service.ns.svc.cluster.local"
        );
        let expiring = why(certificate(true), Some(secret("expiring", &[])));
        assert!(
            expiring.starts_with("it expires at ")
                && expiring.ends_with(", within the Certificate's renewBefore (24h0m0s)"),
            "{expiring}"
        );
        assert_eq!(why(certificate(true), None), "there is no such Secret");
        assert_eq!(
            why(
                certificate(true),
                Some(secret("classic", &[("cert-manager.io/issuer-name", "another")]))
            ),
            "another issuer made it (its name is \"another\", not \"op-server-service-cert-selfsigned-issuer\")"
        );
        assert_eq!(
            why(
                certificate(true),
                Some(secret("classic", &[("cert-manager.io/certificate-name", "x")]))
            ),
            "Certificate \"x\" made it"
        );
        let mut mismatched = secret("classic", &[]);
        mismatched
            .data
            .as_mut()
            .unwrap()
            .insert("tls.key".into(), ByteString(fixture("other-names.key")));
        assert!(
            why(certificate(true), Some(mismatched))
                .starts_with("its tls.key does not belong to its tls.crt"),
        );
        let mut empty = secret("classic", &[]);
        empty.data.as_mut().unwrap().remove("tls.key");
        assert_eq!(
            why(certificate(true), Some(empty)),
            "it holds no tls.crt and tls.key"
        );
    }

    #[test]
    fn go_durations_of_rendered_certificates_read_as_seconds() {
        assert_eq!(go_hours("24h0m0s"), Some(86_400));
        assert_eq!(go_hours("17520h0m0s"), Some(63_072_000));
        assert_eq!(go_hours("90s"), Some(90));
        assert_eq!(go_hours("1d"), None);
        assert_eq!(go_hours("24"), None);
    }

    #[test]
    fn a_certificate_asks_for_cert_managers_default_key_unless_it_names_one() {
        assert_eq!(wanted_key(&serde_json::json!({"spec": {}})), KeyType::Rsa(2048));
        assert_eq!(
            wanted_key(&serde_json::json!({"spec": {"privateKey": {"algorithm": "ECDSA", "size": 256}}})),
            KeyType::Ecdsa(256)
        );
        assert_eq!(
            wanted_key(&serde_json::json!({"spec": {"privateKey": {"algorithm": "ECDSA"}}})),
            KeyType::Ecdsa(256)
        );
    }

    #[test]
    fn classics_ca_is_copied_where_the_injector_reads_it_once() {
        let classic = serde_json::json!({"data": {"tls.crt": "Yw==", "tls.key": "aw==", "olmCAKey": "Q0E="}});
        assert_eq!(
            ca_data_patch(&classic),
            Some(serde_json::json!({"ca.crt": "Q0E="}))
        );
        let done = serde_json::json!({"data": {"olmCAKey": "Q0E=", "ca.crt": "Q0E="}});
        assert_eq!(ca_data_patch(&done), None);
        assert_eq!(ca_data_patch(&serde_json::json!({"data": {}})), None);
    }
}
