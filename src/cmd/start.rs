//! Start-up shared by the commands: logging, the parent watch, and the flags of more than one
//! command (bundle limits, the TLS profile, listen addresses, registries.conf). The components'
//! own start-up (replica, leader loop, operations servers) is `crate::components`.

use std::{net::SocketAddr, path::Path};

use crate::{
    image::{RegistriesConf, UnpackLimits},
    leader::LeaderTimings,
    tls_profile::TlsProfile,
};

/// Structured logs on stderr; `RUST_LOG` filters (default `info`), `OLMV1_LOG_FORMAT=json` for JSON.
pub fn init_tracing() {
    use tracing_subscriber::{EnvFilter, fmt};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if std::env::var("OLMV1_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// With `OLMV1_EXIT_WITH_PARENT=1`, the process exits when its parent does: test harnesses and
/// scripts that start `olmv1 controller` or `olmv1 catalogd` leave nothing running behind them.
pub fn exit_with_parent() {
    if std::env::var("OLMV1_EXIT_WITH_PARENT").as_deref() != Ok("1") {
        return;
    }
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(std::time::Duration::from_millis(500));
            if std::os::unix::process::parent_id() != parent {
                std::process::exit(0);
            }
        }
    });
}

/// The registries configuration a command pulls with: `flag`, else `CONTAINERS_REGISTRIES_CONF`,
/// else `/etc/containers/registries.conf` when present (none: every pull goes where its
/// reference says). An unreadable or invalid file stops the command.
pub fn load_registries_conf(flag: Option<&Path>) -> Result<RegistriesConf, String> {
    RegistriesConf::configured(flag).map_err(|e| e.to_string())
}

/// What a bundle image may hold and what is read from it (defaults: [`UnpackLimits::BUNDLE`]).
#[derive(clap::Args, Debug, Clone)]
pub struct BundleLimitArgs {
    /// Largest total uncompressed size of a bundle image, in bytes.
    #[arg(long, env = "OLMV1_MAX_UNPACKED_BYTES", default_value_t = UnpackLimits::BUNDLE.max_total_bytes)]
    pub max_unpacked_bytes: u64,
    /// Largest number of tar entries over the layers of a bundle image.
    #[arg(long, env = "OLMV1_MAX_UNPACKED_ENTRIES", default_value_t = UnpackLimits::BUNDLE.max_entries)]
    pub max_unpacked_entries: u64,
    /// Largest single bundle file (manifest, metadata) read, in bytes (checked before it is read).
    #[arg(long, env = "OLMV1_MAX_FILE_BYTES", default_value_t = UnpackLimits::BUNDLE.max_file_bytes)]
    pub max_file_bytes: u64,
}

impl BundleLimitArgs {
    /// The limits these flags describe.
    pub fn limits(&self) -> UnpackLimits {
        UnpackLimits {
            max_total_bytes: self.max_unpacked_bytes,
            max_entries: self.max_unpacked_entries,
            max_file_bytes: self.max_file_bytes,
        }
    }
}

/// The leader election's durations (with `--leader-elect`); upstream's by default.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaderTimingArgs {
    /// Seconds a Lease is valid without renewal: how long the other replicas wait before one
    /// takes over from a leader that stopped renewing.
    #[arg(long, env = "OLMV1_LEADER_ELECTION_LEASE_DURATION_SECONDS",
          default_value_t = LeaderTimings::UPSTREAM.lease_duration.as_secs())]
    pub leader_election_lease_duration_seconds: u64,
    /// Seconds the leader keeps reconciling after its last successful renewal; shorter than the
    /// lease duration, so that it stops before another replica may start.
    #[arg(long, env = "OLMV1_LEADER_ELECTION_RENEW_DEADLINE_SECONDS",
          default_value_t = LeaderTimings::UPSTREAM.renew_deadline.as_secs())]
    pub leader_election_renew_deadline_seconds: u64,
    /// Seconds between the leader's renewals (one request each) and between the other replicas'
    /// reads of the Lease; shorter than the renew deadline.
    #[arg(long, env = "OLMV1_LEADER_ELECTION_RETRY_PERIOD_SECONDS",
          default_value_t = LeaderTimings::UPSTREAM.retry_period.as_secs())]
    pub leader_election_retry_period_seconds: u64,
}

impl LeaderTimingArgs {
    /// With `elect`, the timings these flags describe, if the leader stops before another may
    /// take over; `None` without election.
    pub fn election(&self, elect: bool) -> Result<Option<LeaderTimings>, String> {
        if !elect {
            return Ok(None);
        }
        let s = std::time::Duration::from_secs;
        LeaderTimings::new(
            s(self.leader_election_lease_duration_seconds),
            s(self.leader_election_renew_deadline_seconds),
            s(self.leader_election_retry_period_seconds),
        )
        .map(Some)
        .map_err(|e| e.to_string())
    }
}

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
    /// The profile these flags describe; the error names the flag and the cause.
    pub fn profile(&self) -> Result<TlsProfile, String> {
        let profile = TlsProfile::from_flags(
            &self.tls_profile,
            self.tls_custom_version.as_deref(),
            &self.tls_custom_ciphers,
            &self.tls_custom_curves,
        )
        .map_err(|e| format!("invalid TLS profile: {e}"))?;
        tracing::info!("{}", profile.describe());
        Ok(profile)
    }
}

/// A listen address; Go-style `:PORT` means every interface (as upstream's flags).
pub fn parse_bind_address(addr: &str) -> Result<SocketAddr, String> {
    let full = match addr.starts_with(':') {
        true => format!("0.0.0.0{addr}"),
        false => addr.to_string(),
    };
    full.parse()
        .map_err(|e| format!("invalid listen address {addr:?}: {e}"))
}
