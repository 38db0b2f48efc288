//! The egress proxy of registry pulls and catalog fetches, read from the environment with the
//! rules of Go's `golang.org/x/net/http/httpproxy` (what upstream's components and every Go
//! program on the cluster follow), so that one `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` setting on
//! a Deployment means the same thing for olmv1 as for them:
//!
//! - `HTTPS_PROXY` serves `https` URLs, `HTTP_PROXY` serves `http` URLs; each name is read upper
//!   case first, then lower case (`https_proxy`); an empty value is unset. `ALL_PROXY` is not
//!   read (Go ignores it; reqwest, left to itself, would use it). A value without a scheme means
//!   `http://`. `HTTP_PROXY` is ignored when `REQUEST_METHOD` is set (a CGI environment).
//! - `localhost` and loopback addresses are never proxied.
//! - `NO_PROXY` is a comma-separated list, case-insensitive: `*` alone turns the proxy off; an IP
//!   (`10.0.0.1`, `::1`) or a CIDR (`10.0.0.0/8`) matches IP hosts only; `example.com` matches
//!   that host and its subdomains; `.example.com` and `*.example.com` only the subdomains; a
//!   `:port` suffix (`example.com:5000`, `10.0.0.1:443`, `[::1]:443`) limits an entry to that
//!   port, a URL without one having its scheme's default (80, 443).
//!
//! The API server is not reached through this: kube's client takes its proxy only from the
//! kubeconfig's `proxy-url` (see `cmd::start`).

use std::net::IpAddr;

use reqwest::Url;

/// The start of every HTTP client of registries and catalog servers: the environment's egress
/// proxy, as Go reads it.
pub fn client_builder() -> reqwest::ClientBuilder {
    EgressProxy::from_env().configure(reqwest::Client::builder())
}

/// Where requests go: through which proxy, if any, per scheme, and what never is proxied.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EgressProxy {
    http: Option<Url>,
    https: Option<Url>,
    no_proxy: NoProxy,
}

impl EgressProxy {
    /// The proxy settings of this process's environment.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The proxy settings `var` gives (an environment lookup).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let any = |names: [&str; 2]| names.iter().find_map(|n| var(n).filter(|v| !v.is_empty()));
        let cgi = var("REQUEST_METHOD").is_some_and(|v| !v.is_empty());
        let http = any(["HTTP_PROXY", "http_proxy"])
            .filter(|_| !cgi)
            .and_then(|v| proxy_url(&v));
        Self {
            http,
            https: any(["HTTPS_PROXY", "https_proxy"]).and_then(|v| proxy_url(&v)),
            no_proxy: NoProxy::parse(&any(["NO_PROXY", "no_proxy"]).unwrap_or_default()),
        }
    }

    /// Whether any proxy is set.
    pub fn is_set(&self) -> bool {
        self.http.is_some() || self.https.is_some()
    }

    /// The proxy a request to `url` goes through, if any.
    pub fn proxy_for(&self, url: &Url) -> Option<Url> {
        let proxy = match url.scheme() {
            "https" => self.https.as_ref(),
            "http" => self.http.as_ref(),
            _ => None,
        }?;
        let host = Host::of(url)?;
        let port = url
            .port_or_known_default()
            .map(|p| p.to_string())
            .unwrap_or_default();
        (!host.is_local() && !self.no_proxy.matches(&host, &port)).then(|| proxy.clone())
    }

    /// `builder` sending its requests as these settings say (and ignoring reqwest's own reading
    /// of the environment, whose rules differ from Go's).
    pub fn configure(&self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        let builder = builder.no_proxy();
        if !self.is_set() {
            return builder;
        }
        let settings = self.clone();
        builder.proxy(reqwest::Proxy::custom(move |url| settings.proxy_for(url)))
    }
}

/// A proxy setting as Go's `parseProxy` reads it: a URL, or `host:port` meaning `http://`.
/// An unreadable one is no proxy (Go ignores it too), with a warning.
fn proxy_url(value: &str) -> Option<Url> {
    let parsed = Url::parse(value)
        .ok()
        .filter(|u| u.has_host() && !u.host_str().unwrap_or_default().is_empty());
    let url = parsed.or_else(|| Url::parse(&format!("http://{value}")).ok());
    if url.is_none() {
        tracing::warn!(proxy = %value, "ignoring an egress proxy setting that is not a URL");
    }
    url
}

/// A request's host as `NO_PROXY` entries are matched against it.
#[derive(Debug)]
enum Host {
    Ip(IpAddr),
    /// Lower case (URLs keep domains lower case and in ASCII).
    Domain(String),
}

impl Host {
    fn of(url: &Url) -> Option<Host> {
        Some(match url.host()? {
            url::Host::Domain(d) => Host::Domain(d.to_ascii_lowercase()),
            url::Host::Ipv4(ip) => Host::Ip(IpAddr::V4(ip)),
            url::Host::Ipv6(ip) => Host::Ip(canonical(IpAddr::V6(ip))),
        })
    }

    /// `localhost` or a loopback address: never proxied.
    fn is_local(&self) -> bool {
        match self {
            Host::Domain(d) => d == "localhost",
            Host::Ip(ip) => ip.is_loopback(),
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (Go compares them so).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// The parsed `NO_PROXY`.
#[derive(Clone, Debug, Default, PartialEq)]
struct NoProxy {
    /// `*`: nothing is proxied.
    all: bool,
    entries: Vec<Entry>,
}

#[derive(Clone, Debug, PartialEq)]
enum Entry {
    /// An IP network (`10.0.0.0/8`): IP hosts in it, any port.
    Network { ip: IpAddr, prefix: u8 },
    /// One IP, on `port` only when given.
    Ip { ip: IpAddr, port: String },
    /// `suffix` starts with a dot; `exact` also matches the host without it.
    Domain {
        suffix: String,
        exact: bool,
        port: String,
    },
}

impl NoProxy {
    fn parse(value: &str) -> NoProxy {
        let mut no_proxy = NoProxy::default();
        for entry in value.split(',') {
            let entry = entry.trim().to_ascii_lowercase();
            if entry.is_empty() {
                continue;
            }
            if entry == "*" {
                return NoProxy {
                    all: true,
                    entries: vec![],
                };
            }
            if let Some(network) = parse_cidr(&entry) {
                no_proxy.entries.push(network);
                continue;
            }
            let (host, port) = match split_host_port(&entry) {
                Some(("", _)) => continue,
                Some((host, port)) => (host.to_string(), port.to_string()),
                None => (entry.clone(), String::new()),
            };
            if let Ok(ip) = host.parse::<IpAddr>() {
                no_proxy.entries.push(Entry::Ip {
                    ip: canonical(ip),
                    port,
                });
                continue;
            }
            let host = host
                .strip_prefix('*')
                .filter(|h| h.starts_with('.'))
                .unwrap_or(host.as_str());
            let exact = !host.starts_with('.');
            let suffix = if exact {
                format!(".{host}")
            } else {
                host.to_string()
            };
            no_proxy.entries.push(Entry::Domain { suffix, exact, port });
        }
        no_proxy
    }

    fn matches(&self, host: &Host, port: &str) -> bool {
        self.all || self.entries.iter().any(|entry| entry.matches(host, port))
    }
}

impl Entry {
    fn matches(&self, host: &Host, port: &str) -> bool {
        let port_matches = |wanted: &str| wanted.is_empty() || wanted == port;
        match (self, host) {
            (Entry::Network { ip, prefix }, Host::Ip(host)) => in_network(*host, *ip, *prefix),
            (Entry::Ip { ip, port: wanted }, Host::Ip(host)) => ip == host && port_matches(wanted),
            (
                Entry::Domain {
                    suffix,
                    exact,
                    port: wanted,
                },
                Host::Domain(host),
            ) => {
                (host.ends_with(suffix.as_str()) || (*exact && host == &suffix[1..])) && port_matches(wanted)
            }
            _ => false,
        }
    }
}

/// `ip/prefix`, as Go's `net.ParseCIDR` accepts it.
fn parse_cidr(entry: &str) -> Option<Entry> {
    let (ip, prefix) = entry.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let prefix: u8 = prefix.parse().ok().filter(|p: &u8| match ip {
        IpAddr::V4(_) => *p <= 32,
        IpAddr::V6(_) => *p <= 128,
    })?;
    Some(Entry::Network { ip, prefix })
}

fn in_network(host: IpAddr, network: IpAddr, prefix: u8) -> bool {
    match (canonical(host), network) {
        (IpAddr::V4(h), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(h) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(h), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(h) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Go's `net.SplitHostPort`: `host:port` or `[host]:port` (the port may be empty); `None` when
/// there is no port or too many colons.
fn split_host_port(entry: &str) -> Option<(&str, &str)> {
    if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return Some((host, after.strip_prefix(':')?));
    }
    let (host, port) = entry.rsplit_once(':')?;
    (!host.contains(':') && !host.contains('[') && !port.contains(']')).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROXY: &str = "http://proxy.corp:3128/";

    fn settings(vars: &[(&str, &str)]) -> EgressProxy {
        EgressProxy::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string()))
    }

    /// Whether `url` goes through the proxy with `NO_PROXY=no_proxy` (both proxies set).
    fn proxied(no_proxy: &str, url: &str) -> bool {
        let s = settings(&[
            ("HTTPS_PROXY", PROXY),
            ("HTTP_PROXY", PROXY),
            ("NO_PROXY", no_proxy),
        ]);
        s.proxy_for(&Url::parse(url).unwrap()).is_some()
    }

    #[test]
    fn each_scheme_uses_its_own_variable_upper_case_first() {
        let https = Url::parse("https://quay.io/v2/").unwrap();
        let http = Url::parse("http://catalogd.olmv1-system.svc/catalogs/x").unwrap();
        let only_https = settings(&[
            ("https_proxy", "http://lower:1"),
            ("HTTPS_PROXY", "http://upper:2"),
        ]);
        assert_eq!(only_https.proxy_for(&https).unwrap().as_str(), "http://upper:2/");
        assert_eq!(
            only_https.proxy_for(&http),
            None,
            "HTTPS_PROXY does not serve http URLs"
        );
        let lower = settings(&[("http_proxy", "http://lower:1"), ("HTTP_PROXY", "")]);
        assert_eq!(lower.proxy_for(&http).unwrap().as_str(), "http://lower:1/");
        assert_eq!(lower.proxy_for(&https), None);
        // ALL_PROXY is not Go's.
        assert!(!settings(&[("ALL_PROXY", PROXY)]).is_set());
        // A CGI environment ignores HTTP_PROXY.
        assert!(!settings(&[("HTTP_PROXY", PROXY), ("REQUEST_METHOD", "GET")]).is_set());
        // host:port means http://host:port.
        let bare = settings(&[("HTTPS_PROXY", "10.0.0.5:3128")]);
        assert_eq!(bare.proxy_for(&https).unwrap().as_str(), "http://10.0.0.5:3128/");
        let named = settings(&[("HTTPS_PROXY", "proxy.corp:3128")]);
        assert_eq!(
            named.proxy_for(&https).unwrap().as_str(),
            "http://proxy.corp:3128/"
        );
    }

    #[test]
    fn localhost_and_loopback_are_never_proxied() {
        for url in [
            "https://localhost:5000/v2/",
            "https://127.0.0.1/",
            "http://127.0.0.2:8080/",
            "https://[::1]:443/",
            "https://[::ffff:127.0.0.1]/",
        ] {
            assert!(!proxied("", url), "{url}");
        }
        // Only `localhost` itself: its subdomains are names like any other.
        assert!(proxied("", "https://registry.localhost/"));
        assert!(proxied("", "https://192.0.2.2:5000/"));
    }

    #[test]
    fn no_proxy_entries_match_as_go_matches_them() {
        let cases = [
            // (NO_PROXY, URL, proxied)
            ("*", "https://quay.io/", false),
            ("quay.io", "https://quay.io/", false),
            ("quay.io", "https://cdn.quay.io/", false),
            ("quay.io", "https://notquay.io/", true),
            (".quay.io", "https://quay.io/", true),
            (".quay.io", "https://cdn.quay.io/", false),
            ("*.quay.io", "https://quay.io/", true),
            ("*.quay.io", "https://cdn.quay.io/", false),
            (" Quay.IO ", "https://quay.io/", false),
            ("quay.io:443", "https://quay.io/", false),
            ("quay.io:443", "https://quay.io:8443/", true),
            ("quay.io:8443", "https://quay.io:8443/", false),
            ("quay.io:", "https://quay.io/", false),
            ("10.0.0.1", "https://10.0.0.1:5000/", false),
            ("10.0.0.1", "https://10.0.0.2/", true),
            ("10.0.0.1:5000", "https://10.0.0.1:5000/", false),
            ("10.0.0.1:5000", "https://10.0.0.1/", true),
            ("10.0.0.0/8", "https://10.200.3.4/", false),
            ("10.0.0.0/8", "https://11.0.0.1/", true),
            ("fd00::/8", "https://[fd00::2]/", false),
            ("fd00::2", "https://[fd00::2]:5000/", false),
            ("[fd00::2]:443", "https://[fd00::2]/", false),
            ("[fd00::2]:443", "https://[fd00::2]:5000/", true),
            // An IP entry does not match names, a domain entry not IPs.
            ("10.0.0.1", "https://ten.example/", true),
            ("0.0.1", "https://10.0.0.1/", true),
            // Several entries, and the empty ones between them.
            (
                "example.com,, .svc ,10.0.0.0/8",
                "http://catalogd.olmv1-system.svc/",
                false,
            ),
            ("example.com,, .svc ,10.0.0.0/8", "https://quay.io/", true),
            ("", "https://quay.io/", true),
        ];
        for (no_proxy, url, expected) in cases {
            assert_eq!(proxied(no_proxy, url), expected, "NO_PROXY={no_proxy:?} {url}");
        }
        // `*` anywhere in the list means everything.
        assert!(!proxied("quay.io,*", "https://example.com/"));
        assert!(!proxied("*,quay.io", "https://example.com/"));
    }
}
