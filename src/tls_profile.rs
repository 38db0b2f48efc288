//! TLS security profiles (upstream's `--tls-profile old|intermediate|modern|custom`): what each
//! profile allows, and the rustls configuration that offers it: *ring*'s suites and classic groups,
//! aws-lc-rs's post-quantum hybrid groups (ring has no ML-KEM). Every TLS
//! server olmv1 runs is built here; its HTTP clients take the profile's minimum version. Pure: no
//! I/O.
//!
//! The named profiles are upstream's (Mozilla's guidelines as upstream pins them). rustls offers
//! a subset of what Go's crypto/tls can: TLS 1.2 and 1.3 only, AEAD suites with ECDHE only, the
//! groups X25519MLKEM768, X25519, P-256, P-384 and SecP256r1MLKEM768. A named profile is served as its intersection with that subset
//! (never more than the profile allows; [`Offer::not_offered`] lists the rest); a custom profile
//! that names something rustls cannot offer is refused, so the admin sees exactly what is served.

use std::sync::Arc;

use rustls::SupportedCipherSuite;
use rustls::crypto::{CryptoProvider, SupportedKxGroup, aws_lc_rs, ring};

/// Why a profile cannot be built; always a configuration mistake (terminal).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TlsProfileError {
    /// `--tls-profile` names no profile.
    #[error("unknown TLS profile {0:?}: use one of old, intermediate, modern, custom")]
    UnknownProfile(String),
    /// `--tls-custom-version` names no version.
    #[error("unknown TLS version {0:?}: use one of TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3")]
    UnknownVersion(String),
    /// `--tls-custom-ciphers` names no cipher suite.
    #[error("unknown cipher {0:?}: use IANA (Go) names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")]
    UnknownCipher(String),
    /// `--tls-custom-curves` names no group.
    #[error("unknown curve {0:?}: use one of {CURVE_NAMES}")]
    UnknownCurve(String),
    /// A custom profile names a cipher rustls does not implement.
    #[error(
        "cipher {0} cannot be offered: olmv1's TLS library (rustls) implements only ECDHE with AES-GCM or \
         ChaCha20-Poly1305 for TLS 1.2, and the three TLS 1.3 suites; remove it from --tls-custom-ciphers"
    )]
    CipherNotOffered(String),
    /// A custom profile names a group rustls does not implement.
    #[error(
        "curve {0} cannot be offered: olmv1's TLS library (rustls) implements only X25519MLKEM768, \
         X25519, prime256v1 (secp256r1), secp384r1 and SecP256r1MLKEM768; remove it from \
         --tls-custom-curves"
    )]
    CurveNotOffered(String),
    /// A custom profile's minimum version is below what rustls speaks.
    #[error(
        "minimum version {0} cannot be offered: olmv1 speaks TLS 1.2 and 1.3 only; use TLSv1.2 or TLSv1.3"
    )]
    VersionNotOffered(&'static str),
    /// `--tls-custom-*` given with a named profile (it would be ignored).
    #[error("{0} applies only with --tls-profile custom")]
    CustomFlagWithoutCustom(&'static str),
    /// The profile leaves no cipher suite for any version it allows.
    #[error("the TLS profile leaves no cipher suite for the versions it allows ({0})")]
    NothingToOffer(&'static str),
    /// rustls refused the configuration.
    #[error("{0}")]
    Rustls(String),
}

impl TlsProfileError {
    /// Every profile error is a configuration mistake: retrying cannot help.
    pub fn is_terminal(&self) -> bool {
        true
    }
}

/// Upstream's profile names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProfileName {
    /// Mozilla's "old" (upstream keeps it from guideline 5.8): TLS 1.0 and up, CBC and RSA suites.
    Old,
    /// Mozilla's "intermediate": TLS 1.2 and up, AEAD suites with ECDHE (upstream's default).
    #[default]
    Intermediate,
    /// Mozilla's "modern": TLS 1.3 only.
    Modern,
    /// The `--tls-custom-*` flags.
    Custom,
}

impl std::str::FromStr for ProfileName {
    type Err = TlsProfileError;

    /// Case-insensitive, as upstream.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name.to_ascii_lowercase().as_str() {
            "old" => Ok(Self::Old),
            "intermediate" => Ok(Self::Intermediate),
            "modern" => Ok(Self::Modern),
            "custom" => Ok(Self::Custom),
            _ => Err(TlsProfileError::UnknownProfile(name.to_string())),
        }
    }
}

/// A TLS protocol version, by upstream's flag names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// `TLSv1.0`
    Tls10,
    /// `TLSv1.1`
    Tls11,
    /// `TLSv1.2`
    Tls12,
    /// `TLSv1.3`
    Tls13,
}

impl TlsVersion {
    /// Upstream's name (`TLSv1.2`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Tls10 => "TLSv1.0",
            Self::Tls11 => "TLSv1.1",
            Self::Tls12 => "TLSv1.2",
            Self::Tls13 => "TLSv1.3",
        }
    }
}

impl TlsVersion {
    /// The lowest version for a reqwest client (rustls speaks nothing below TLS 1.2).
    pub fn for_reqwest(self) -> reqwest::tls::Version {
        match self {
            Self::Tls13 => reqwest::tls::Version::TLS_1_3,
            _ => reqwest::tls::Version::TLS_1_2,
        }
    }
}

impl std::str::FromStr for TlsVersion {
    type Err = TlsProfileError;

    /// Upstream's names (`TLSv1.2`), or OpenShift's (`VersionTLS12`, as its APIServer's
    /// `tlsSecurityProfile.custom.minTLSVersion` spells them).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        [Self::Tls10, Self::Tls11, Self::Tls12, Self::Tls13]
            .into_iter()
            .find(|v| v.name() == name || v.name().replace("TLSv1.", "VersionTLS1") == name)
            .ok_or_else(|| TlsProfileError::UnknownVersion(name.to_string()))
    }
}

/// Makes *ring* the process's default rustls provider, which kube's client and connectors ask
/// for. rustls is built with ring and aws-lc-rs (for the hybrid groups), so it cannot pick a
/// default itself. Idempotent; call before building a Kubernetes client.
pub fn install_default_provider() {
    // An error means a provider is installed already, which is all this asks.
    let _ = ring::default_provider().install_default();
}

/// A cipher suite by its IANA name (Go's), its OpenSSL name (OpenShift's APIServer profiles use
/// these), and what ring implements of it.
struct Cipher {
    iana: &'static str,
    openssl: &'static str,
    suite: Option<SupportedCipherSuite>,
}

const fn cipher(iana: &'static str, openssl: &'static str, suite: Option<SupportedCipherSuite>) -> Cipher {
    Cipher { iana, openssl, suite }
}

/// Every suite Go's crypto/tls names (`tls.CipherSuites()` and `tls.InsecureCipherSuites()`):
/// the names upstream's `--tls-custom-ciphers` accepts.
static CIPHERS: &[Cipher] = {
    use ring::cipher_suite as rs;
    &[
        cipher(
            "TLS_AES_128_GCM_SHA256",
            "TLS_AES_128_GCM_SHA256",
            Some(rs::TLS13_AES_128_GCM_SHA256),
        ),
        cipher(
            "TLS_AES_256_GCM_SHA384",
            "TLS_AES_256_GCM_SHA384",
            Some(rs::TLS13_AES_256_GCM_SHA384),
        ),
        cipher(
            "TLS_CHACHA20_POLY1305_SHA256",
            "TLS_CHACHA20_POLY1305_SHA256",
            Some(rs::TLS13_CHACHA20_POLY1305_SHA256),
        ),
        cipher(
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            Some(rs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
        ),
        cipher(
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "ECDHE-RSA-AES128-GCM-SHA256",
            Some(rs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
        ),
        cipher(
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            Some(rs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
        ),
        cipher(
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "ECDHE-RSA-AES256-GCM-SHA384",
            Some(rs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
        ),
        cipher(
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            Some(rs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
        ),
        cipher(
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            "ECDHE-RSA-CHACHA20-POLY1305",
            Some(rs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
        ),
        cipher(
            "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
            "ECDHE-ECDSA-AES128-SHA256",
            None,
        ),
        cipher(
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
            "ECDHE-RSA-AES128-SHA256",
            None,
        ),
        cipher(
            "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
            "ECDHE-ECDSA-AES128-SHA",
            None,
        ),
        cipher("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA", None),
        cipher(
            "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
            "ECDHE-ECDSA-AES256-SHA",
            None,
        ),
        cipher("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA", None),
        cipher("TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256", None),
        cipher("TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384", None),
        cipher("TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256", None),
        cipher("TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA", None),
        cipher("TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA", None),
        cipher("TLS_RSA_WITH_3DES_EDE_CBC_SHA", "DES-CBC3-SHA", None),
        cipher(
            "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
            "ECDHE-RSA-DES-CBC3-SHA",
            None,
        ),
        cipher("TLS_RSA_WITH_RC4_128_SHA", "RC4-SHA", None),
        cipher("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "ECDHE-ECDSA-RC4-SHA", None),
        cipher("TLS_ECDHE_RSA_WITH_RC4_128_SHA", "ECDHE-RSA-RC4-SHA", None),
    ]
};

/// The curve names upstream's `--tls-custom-curves` accepts, and what rustls implements of them:
/// the classic curves from ring, the post-quantum hybrids from aws-lc-rs (ring has no ML-KEM);
/// neither has P-521 nor SecP384r1MLKEM1024.
static CURVES: &[(&str, Option<&dyn SupportedKxGroup>)] = &[
    ("X25519MLKEM768", Some(aws_lc_rs::kx_group::X25519MLKEM768)),
    ("X25519", Some(ring::kx_group::X25519)),
    ("prime256v1", Some(ring::kx_group::SECP256R1)),
    ("secp256r1", Some(ring::kx_group::SECP256R1)),
    ("secp384r1", Some(ring::kx_group::SECP384R1)),
    ("secp521r1", None),
    ("SecP256r1MLKEM768", Some(aws_lc_rs::kx_group::SECP256R1MLKEM768)),
    ("SecP384r1MLKEM1024", None),
];

/// What an empty curve list offers, in Go's default order: the hybrid first, then the classic curves.
static ALL_GROUPS: [&dyn SupportedKxGroup; 5] = [
    aws_lc_rs::kx_group::X25519MLKEM768,
    ring::kx_group::X25519,
    ring::kx_group::SECP256R1,
    ring::kx_group::SECP384R1,
    aws_lc_rs::kx_group::SECP256R1MLKEM768,
];

const CURVE_NAMES: &str = "X25519MLKEM768, X25519, prime256v1, secp256r1, secp384r1, secp521r1, SecP256r1MLKEM768, SecP384r1MLKEM1024";

const TLS13_SUITES: [&str; 3] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

const ECDHE_AEAD_SUITES: [&str; 6] = [
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
];

/// Upstream's curves for the three named profiles.
const PROFILE_CURVES: [&str; 4] = ["X25519MLKEM768", "X25519", "prime256v1", "secp384r1"];

/// The old profile's suites after the intermediate ones (upstream's `old_profile.go`).
const OLD_ONLY_SUITES: [&str; 12] = [
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
];

/// Upstream's TLS profile flags (`--tls-profile` and the custom profile's three).
#[derive(clap::Args, Debug, Clone)]
pub struct TlsProfileArgs {
    /// TLS profile of every TLS server of this command (old, intermediate, modern, custom:
    /// upstream's names and values); its registry and catalog clients accept no lower version than
    /// the profile's minimum.
    #[arg(long, env = "OLMV1_TLS_PROFILE", default_value = "intermediate")]
    pub tls_profile: String,
    /// Lowest version of the custom profile: TLSv1.2 (default) or TLSv1.3.
    #[arg(long, value_name = "VERSION")]
    pub tls_custom_version: Option<String>,
    /// Cipher suites of the custom profile, comma-separated IANA (Go) or OpenSSL names.
    #[arg(long, value_name = "CIPHERS", value_delimiter = ',')]
    pub tls_custom_ciphers: Vec<String>,
    /// Curves of the custom profile, comma-separated: X25519, prime256v1 (secp256r1), secp384r1.
    #[arg(long, value_name = "CURVES", value_delimiter = ',')]
    pub tls_custom_curves: Vec<String>,
}

impl TlsProfileArgs {
    /// The profile these flags describe ([`TlsProfile::from_flags`]).
    pub fn profile(&self) -> Result<TlsProfile, TlsProfileError> {
        TlsProfile::from_flags(
            &self.tls_profile,
            self.tls_custom_version.as_deref(),
            &self.tls_custom_ciphers,
            &self.tls_custom_curves,
        )
    }
}

/// A profile: the lowest version, the cipher suites and the curves it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsProfile {
    /// Which profile this is.
    pub name: ProfileName,
    /// The lowest version allowed.
    pub min_version: TlsVersion,
    /// IANA names of the allowed suites (empty in a custom profile: every suite rustls offers).
    pub ciphers: Vec<&'static str>,
    /// Names of the allowed groups (empty in a custom profile: every group rustls offers).
    pub curves: Vec<&'static str>,
}

impl Default for TlsProfile {
    /// Upstream's default, intermediate.
    fn default() -> Self {
        Self::named(ProfileName::Intermediate)
    }
}

impl TlsProfile {
    /// One of upstream's named profiles; `Custom` gives upstream's empty custom profile
    /// (TLS 1.2 and up, every suite and curve).
    pub fn named(name: ProfileName) -> Self {
        let (min_version, ciphers): (_, Vec<&'static str>) = match name {
            ProfileName::Modern => (TlsVersion::Tls13, TLS13_SUITES.to_vec()),
            ProfileName::Intermediate => (
                TlsVersion::Tls12,
                TLS13_SUITES.iter().chain(&ECDHE_AEAD_SUITES).copied().collect(),
            ),
            ProfileName::Old => (
                TlsVersion::Tls10,
                TLS13_SUITES
                    .iter()
                    .chain(&ECDHE_AEAD_SUITES)
                    .chain(&OLD_ONLY_SUITES)
                    .copied()
                    .collect(),
            ),
            ProfileName::Custom => (TlsVersion::Tls12, Vec::new()),
        };
        let curves = match name {
            ProfileName::Custom => Vec::new(),
            _ => PROFILE_CURVES.to_vec(),
        };
        Self {
            name,
            min_version,
            ciphers,
            curves,
        }
    }

    /// The profile upstream's four flags describe. Cipher names may be IANA's (Go's, as upstream)
    /// or OpenSSL's (as OpenShift's APIServer profile lists them); unknown names are refused.
    pub fn from_flags(
        profile: &str,
        custom_version: Option<&str>,
        custom_ciphers: &[String],
        custom_curves: &[String],
    ) -> Result<Self, TlsProfileError> {
        let name: ProfileName = profile.parse()?;
        if name != ProfileName::Custom {
            let given = [
                (custom_version.is_some(), "--tls-custom-version"),
                (!custom_ciphers.is_empty(), "--tls-custom-ciphers"),
                (!custom_curves.is_empty(), "--tls-custom-curves"),
            ];
            if let Some((_, flag)) = given.into_iter().find(|(set, _)| *set) {
                return Err(TlsProfileError::CustomFlagWithoutCustom(flag));
            }
            return Ok(Self::named(name));
        }
        let mut profile = Self::named(ProfileName::Custom);
        if let Some(version) = custom_version {
            profile.min_version = version.parse()?;
        }
        for name in custom_ciphers.iter().map(|c| c.trim()).filter(|c| !c.is_empty()) {
            let known = CIPHERS
                .iter()
                .find(|c| c.iana == name || c.openssl == name)
                .ok_or_else(|| TlsProfileError::UnknownCipher(name.to_string()))?;
            profile.ciphers.push(known.iana);
        }
        for name in custom_curves.iter().map(|c| c.trim()).filter(|c| !c.is_empty()) {
            let (known, _) = CURVES
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| TlsProfileError::UnknownCurve(name.to_string()))?;
            profile.curves.push(known);
        }
        // Refuse now what could never be offered, rather than at the first server start.
        profile.offer()?;
        Ok(profile)
    }

    /// The lowest version olmv1's HTTP clients accept under this profile (never below TLS 1.2,
    /// which rustls cannot speak).
    pub fn client_min_version(&self) -> TlsVersion {
        self.min_version.max(TlsVersion::Tls12)
    }

    /// What rustls offers for this profile.
    pub fn offer(&self) -> Result<Offer, TlsProfileError> {
        let custom = self.name == ProfileName::Custom;
        let mut not_offered = Vec::new();
        if self.min_version < TlsVersion::Tls12 {
            if custom {
                return Err(TlsProfileError::VersionNotOffered(self.min_version.name()));
            }
            not_offered.push(match self.min_version {
                TlsVersion::Tls10 => "TLSv1.0 and TLSv1.1".to_string(),
                _ => "TLSv1.1".to_string(),
            });
        }
        let mut suites = Vec::new();
        for name in &self.ciphers {
            match CIPHERS.iter().find(|c| c.iana == *name).and_then(|c| c.suite) {
                Some(suite) => suites.push(suite),
                None if custom => return Err(TlsProfileError::CipherNotOffered(name.to_string())),
                None => not_offered.push(name.to_string()),
            }
        }
        let all_suites = &ring::ALL_CIPHER_SUITES;
        if self.ciphers.is_empty() {
            suites = all_suites.to_vec();
        } else if !suites.iter().any(|s| s.version() == &rustls::version::TLS13) {
            // Go's crypto/tls offers every TLS 1.3 suite whatever the list says; so does a list
            // that names none.
            suites.extend(
                all_suites
                    .iter()
                    .filter(|s| s.version() == &rustls::version::TLS13),
            );
        }
        let mut groups: Vec<&'static dyn SupportedKxGroup> = Vec::new();
        for name in &self.curves {
            match CURVES.iter().find(|(n, _)| n == name).and_then(|(_, g)| *g) {
                Some(group) if groups.iter().any(|g| g.name() == group.name()) => {}
                Some(group) => groups.push(group),
                None if custom => return Err(TlsProfileError::CurveNotOffered(name.to_string())),
                None => not_offered.push(name.to_string()),
            }
        }
        if self.curves.is_empty() {
            groups = ALL_GROUPS.to_vec();
        }
        let mut versions = Vec::new();
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let allowed = match version.version {
                rustls::ProtocolVersion::TLSv1_2 => self.min_version <= TlsVersion::Tls12,
                _ => true,
            };
            if allowed && suites.iter().any(|s| s.version() == version) {
                versions.push(version);
            }
        }
        if versions.is_empty() {
            return Err(TlsProfileError::NothingToOffer(self.min_version.name()));
        }
        // TLS 1.2 suites are useless (and TLS 1.3 ones meaningless) outside the versions offered.
        suites.retain(|s| versions.contains(&s.version()));
        Ok(Offer {
            versions,
            provider: CryptoProvider {
                cipher_suites: suites,
                kx_groups: groups,
                ..ring::default_provider()
            },
            not_offered,
        })
    }

    /// A server configuration for this profile serving what `certificates` resolves (HTTP/1.1,
    /// no client certificates).
    pub fn server_config(
        &self,
        certificates: Arc<dyn rustls::server::ResolvesServerCert>,
    ) -> Result<rustls::ServerConfig, TlsProfileError> {
        let offer = self.offer()?;
        Ok(
            rustls::ServerConfig::builder_with_provider(Arc::new(offer.provider))
                .with_protocol_versions(&offer.versions)
                .map_err(|e| TlsProfileError::Rustls(e.to_string()))?
                .with_no_client_auth()
                .with_cert_resolver(certificates),
        )
    }

    /// One line for the start-up log: the profile and what of it rustls does not offer.
    pub fn describe(&self) -> String {
        let name = match self.name {
            ProfileName::Old => "old",
            ProfileName::Intermediate => "intermediate",
            ProfileName::Modern => "modern",
            ProfileName::Custom => "custom",
        };
        let mut line = format!("TLS profile {name}, minimum {}", self.min_version.name());
        if let Ok(offer) = self.offer()
            && !offer.not_offered.is_empty()
        {
            line.push_str(&format!(
                "; not offered (rustls has no implementation): {}",
                offer.not_offered.join(", ")
            ));
        }
        line
    }
}

/// What rustls offers for a profile.
pub struct Offer {
    /// The protocol versions, newest first.
    pub versions: Vec<&'static rustls::SupportedProtocolVersion>,
    /// ring's provider with the profile's suites and groups (hybrid groups from aws-lc-rs).
    pub provider: CryptoProvider,
    /// What the profile allows and rustls cannot offer (named profiles only).
    pub not_offered: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::{CipherSuite, NamedGroup};

    fn suites(offer: &Offer) -> Vec<CipherSuite> {
        offer.provider.cipher_suites.iter().map(|s| s.suite()).collect()
    }

    fn groups(offer: &Offer) -> Vec<NamedGroup> {
        offer.provider.kx_groups.iter().map(|g| g.name()).collect()
    }

    fn versions(offer: &Offer) -> Vec<rustls::ProtocolVersion> {
        offer.versions.iter().map(|v| v.version).collect()
    }

    fn custom(
        version: Option<&str>,
        ciphers: &[&str],
        curves: &[&str],
    ) -> Result<TlsProfile, TlsProfileError> {
        let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        TlsProfile::from_flags("custom", version, &owned(ciphers), &owned(curves))
    }

    const TLS13: [CipherSuite; 3] = [
        CipherSuite::TLS13_AES_128_GCM_SHA256,
        CipherSuite::TLS13_AES_256_GCM_SHA384,
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ];

    #[test]
    fn modern_offers_tls_1_3_only_with_its_three_suites() {
        let offer = TlsProfile::named(ProfileName::Modern).offer().unwrap();
        assert_eq!(versions(&offer), [rustls::ProtocolVersion::TLSv1_3]);
        assert_eq!(suites(&offer), TLS13);
        assert_eq!(
            groups(&offer),
            [
                NamedGroup::X25519MLKEM768,
                NamedGroup::X25519,
                NamedGroup::secp256r1,
                NamedGroup::secp384r1
            ]
        );
        assert!(offer.not_offered.is_empty(), "{:?}", offer.not_offered);
    }

    #[test]
    fn intermediate_offers_tls_1_2_aead_ecdhe_suites() {
        let offer = TlsProfile::default().offer().unwrap();
        assert_eq!(
            versions(&offer),
            [rustls::ProtocolVersion::TLSv1_3, rustls::ProtocolVersion::TLSv1_2]
        );
        let offered = suites(&offer);
        assert_eq!(offered.len(), 9, "{offered:?}");
        assert!(offered.contains(&CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256));
        assert!(offered.contains(&CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256));
        assert_eq!(
            groups(&offer)[0],
            NamedGroup::X25519MLKEM768,
            "the hybrid is preferred"
        );
        assert!(offer.not_offered.is_empty(), "{:?}", offer.not_offered);
    }

    #[test]
    fn old_is_served_as_what_rustls_has_of_it_and_says_what_is_missing() {
        let profile = TlsProfile::named(ProfileName::Old);
        assert_eq!(profile.ciphers.len(), 21, "upstream's old profile has 21 suites");
        let offer = profile.offer().unwrap();
        assert_eq!(
            versions(&offer),
            [rustls::ProtocolVersion::TLSv1_3, rustls::ProtocolVersion::TLSv1_2]
        );
        assert_eq!(suites(&offer).len(), 9);
        assert!(offer.not_offered.contains(&"TLSv1.0 and TLSv1.1".to_string()));
        assert!(
            offer
                .not_offered
                .contains(&"TLS_RSA_WITH_3DES_EDE_CBC_SHA".to_string())
        );
        assert!(profile.describe().contains("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,"));
        assert_eq!(profile.client_min_version(), TlsVersion::Tls12);
    }

    #[test]
    fn a_custom_profile_offers_exactly_its_lists() {
        let profile = custom(
            Some("TLSv1.2"),
            &[
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "ECDHE-ECDSA-AES256-GCM-SHA384",
            ],
            &["secp384r1"],
        )
        .unwrap();
        let offer = profile.offer().unwrap();
        // Go offers every TLS 1.3 suite when the list names none; so does olmv1.
        let mut expected = vec![
            CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ];
        expected.extend(TLS13.iter().copied());
        let mut offered = suites(&offer);
        offered.sort_by_key(|s| u16::from(*s));
        expected.sort_by_key(|s| u16::from(*s));
        assert_eq!(offered, expected);
        assert_eq!(groups(&offer), [NamedGroup::secp384r1]);
        assert!(offer.not_offered.is_empty());
    }

    #[test]
    fn a_custom_profile_may_list_the_post_quantum_hybrids() {
        let offer = custom(Some("TLSv1.3"), &[], &["SecP256r1MLKEM768", "X25519MLKEM768"])
            .unwrap()
            .offer()
            .unwrap();
        assert_eq!(
            groups(&offer),
            [NamedGroup::secp256r1MLKEM768, NamedGroup::X25519MLKEM768],
            "the listed groups, in the listed order"
        );
    }

    #[test]
    fn a_custom_profile_naming_one_tls_1_3_suite_offers_only_it_for_1_3() {
        let offer = custom(Some("TLSv1.3"), &["TLS_AES_256_GCM_SHA384"], &[])
            .unwrap()
            .offer()
            .unwrap();
        assert_eq!(versions(&offer), [rustls::ProtocolVersion::TLSv1_3]);
        assert_eq!(suites(&offer), [CipherSuite::TLS13_AES_256_GCM_SHA384]);
        assert_eq!(
            groups(&offer),
            [
                NamedGroup::X25519MLKEM768,
                NamedGroup::X25519,
                NamedGroup::secp256r1,
                NamedGroup::secp384r1,
                NamedGroup::secp256r1MLKEM768
            ],
            "no list: every group"
        );
    }

    #[test]
    fn an_empty_custom_profile_is_upstreams_tls_1_2_and_up() {
        let profile = custom(None, &[], &[]).unwrap();
        assert_eq!(profile.min_version, TlsVersion::Tls12);
        assert_eq!(suites(&profile.offer().unwrap()).len(), 9);
    }

    #[test]
    fn custom_lists_rustls_cannot_offer_are_refused_by_name() {
        let cases: [(Result<TlsProfile, TlsProfileError>, TlsProfileError); 6] = [
            (
                custom(None, &["TLS_RSA_WITH_AES_128_CBC_SHA"], &[]),
                TlsProfileError::CipherNotOffered("TLS_RSA_WITH_AES_128_CBC_SHA".into()),
            ),
            (
                custom(None, &[], &["SecP384r1MLKEM1024"]),
                TlsProfileError::CurveNotOffered("SecP384r1MLKEM1024".into()),
            ),
            (
                custom(Some("TLSv1.0"), &[], &[]),
                TlsProfileError::VersionNotOffered("TLSv1.0"),
            ),
            (
                custom(None, &["TLS_FOO"], &[]),
                TlsProfileError::UnknownCipher("TLS_FOO".into()),
            ),
            (
                custom(None, &[], &["curve448"]),
                TlsProfileError::UnknownCurve("curve448".into()),
            ),
            (
                custom(Some("TLSv1.4"), &[], &[]),
                TlsProfileError::UnknownVersion("TLSv1.4".into()),
            ),
        ];
        for (got, expected) in cases {
            assert_eq!(got.unwrap_err(), expected);
        }
        let message = custom(None, &[], &["secp521r1"]).unwrap_err().to_string();
        assert!(
            message.starts_with("curve secp521r1 cannot be offered"),
            "{message}"
        );
    }

    #[test]
    fn profile_names_and_flag_combinations() {
        assert_eq!(
            TlsProfile::from_flags("Modern", None, &[], &[]).unwrap(),
            TlsProfile::named(ProfileName::Modern)
        );
        assert_eq!(
            TlsProfile::from_flags("strict", None, &[], &[]).unwrap_err(),
            TlsProfileError::UnknownProfile("strict".into())
        );
        assert_eq!(
            TlsProfile::from_flags("modern", Some("TLSv1.2"), &[], &[]).unwrap_err(),
            TlsProfileError::CustomFlagWithoutCustom("--tls-custom-version")
        );
        assert_eq!(
            TlsProfile::named(ProfileName::Modern).client_min_version(),
            TlsVersion::Tls13
        );
        assert_eq!("VersionTLS13".parse::<TlsVersion>().unwrap(), TlsVersion::Tls13);
        assert_eq!("TLSv1.2".parse::<TlsVersion>().unwrap(), TlsVersion::Tls12);
    }

    #[test]
    fn every_known_cipher_has_both_names_once() {
        let mut names: Vec<&str> = CIPHERS.iter().flat_map(|c| [c.iana, c.openssl]).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        // The three TLS 1.3 suites carry the same name in both columns.
        assert_eq!(names.len(), count - 3);
        for name in TlsProfile::named(ProfileName::Old).ciphers {
            assert!(CIPHERS.iter().any(|c| c.iana == name), "{name}");
        }
    }
}
