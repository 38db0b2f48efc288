//! Fetches a catalog's content from a catalog server: `GET <base>/api/v1/all` (JSONL), gzip
//! accepted, body size bounded, any status but 200 an error (upstream's wording).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;

use super::CatalogError;

/// Default bound on a catalog body (after gzip decoding).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 30;
/// Default whole-request timeout, as upstream's client (5 minutes).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The URL of a catalog's whole content: `<base>/api/v1/all` (upstream `url.JoinPath`).
pub fn all_url(base: &str) -> Result<url::Url, CatalogError> {
    let mut url = url::Url::parse(base).map_err(|e| CatalogError::Http {
        url: base.to_string(),
        message: format!("invalid base URL: {e}"),
    })?;
    {
        let mut segments = url.path_segments_mut().map_err(|()| CatalogError::Http {
            url: base.to_string(),
            message: "invalid base URL".to_string(),
        })?;
        segments.pop_if_empty().extend(["api", "v1", "all"]);
    }
    Ok(url)
}

/// A plain HTTP client for catalog servers (catalogd or `olmv1 catalogd`).
#[derive(Debug, Clone)]
pub struct CatalogClient {
    http: reqwest::Client,
    max_body_bytes: usize,
    max_line_bytes: usize,
}

impl CatalogClient {
    /// A client with system roots plus the given extra CA certificates (PEM), a 5-minute timeout
    /// and the default body bound.
    pub fn new(extra_ca_pem: &[Vec<u8>]) -> Result<CatalogClient, CatalogError> {
        Self::with_min_tls_version(extra_ca_pem, crate::tls_profile::TlsVersion::Tls12)
    }

    /// As [`CatalogClient::new`], accepting no TLS version below `min_tls_version` (the TLS
    /// profile's).
    pub fn with_min_tls_version(
        extra_ca_pem: &[Vec<u8>],
        min_tls_version: crate::tls_profile::TlsVersion,
    ) -> Result<CatalogClient, CatalogError> {
        let mut builder = crate::egress::client_builder()
            .timeout(DEFAULT_TIMEOUT)
            .gzip(true)
            .min_tls_version(min_tls_version.for_reqwest());
        for pem in extra_ca_pem {
            let cert = reqwest::Certificate::from_pem(pem).map_err(|e| CatalogError::Http {
                url: String::new(),
                message: format!("invalid CA certificate: {e}"),
            })?;
            builder = builder.add_root_certificate(cert);
        }
        let http = builder.build().map_err(|e| CatalogError::Http {
            url: String::new(),
            message: format!("building HTTP client: {e}"),
        })?;
        Ok(CatalogClient {
            http,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_line_bytes: super::read::DEFAULT_MAX_JSONL_LINE_BYTES,
        })
    }

    /// The same client with another body bound.
    pub fn with_max_body_bytes(mut self, max_body_bytes: usize) -> CatalogClient {
        self.max_body_bytes = max_body_bytes;
        self
    }

    /// The same client with another bound on one JSONL line of what it fetches.
    pub fn with_max_line_bytes(mut self, max_line_bytes: usize) -> CatalogClient {
        self.max_line_bytes = max_line_bytes;
        self
    }

    /// The bound on one JSONL line of what this client fetches (applied by its readers).
    pub fn max_line_bytes(&self) -> usize {
        self.max_line_bytes
    }

    /// Fetches `<base>/api/v1/all` and returns the (decoded) JSONL body.
    pub async fn fetch_all(&self, base: &str) -> Result<Bytes, CatalogError> {
        let url = all_url(base)?;
        let err = |message: String| CatalogError::Http {
            url: url.to_string(),
            message,
        };
        let response = self
            .http
            .get(url.clone())
            .send()
            .await
            .map_err(|e| err(format!("{e}")))?;
        let status = response.status();
        if status != reqwest::StatusCode::OK {
            return Err(err(format!(
                "error: received unexpected response status code {}",
                status.as_u16()
            )));
        }
        let mut body = BytesMut::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| err(format!("reading body: {e}")))?;
            if body.len() + chunk.len() > self.max_body_bytes {
                return Err(err(format!("body larger than {} bytes", self.max_body_bytes)));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Answers one request on loopback with `status`, `body` and extra headers; returns the base
    /// URL and the request text.
    async fn serve_once(
        status: &'static str,
        headers: &'static str,
        body: Vec<u8>,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let base = format!("http://{}/catalogs/c", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).await.expect("read request");
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
            }
            let head = format!(
                "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&body).await;
            String::from_utf8_lossy(&request).into_owned()
        });
        (base, task)
    }

    #[tokio::test]
    async fn fetches_gzip_bodies_and_refuses_other_statuses_and_oversized_bodies() {
        let jsonl = b"{\"name\":\"p\",\"schema\":\"olm.package\"}\n".repeat(100);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&jsonl).unwrap();
        let (base, server) = serve_once("200 OK", "Content-Encoding: gzip\r\n", gz.finish().unwrap()).await;
        let client = CatalogClient::new(&[]).unwrap();
        assert_eq!(client.fetch_all(&base).await.unwrap(), jsonl);
        let request = server.await.unwrap().to_lowercase();
        assert!(
            request.starts_with("get /catalogs/c/api/v1/all http/1.1"),
            "{request}"
        );
        assert!(request.contains("accept-encoding: gzip"), "{request}");

        let (base, server) = serve_once("404 Not Found", "", b"404 Not Found".to_vec()).await;
        let err = client.fetch_all(&base).await.unwrap_err().to_string();
        assert!(
            err.ends_with("error: received unexpected response status code 404"),
            "{err}"
        );
        server.await.unwrap();

        let (base, server) = serve_once("200 OK", "", jsonl.clone()).await;
        let err = client
            .with_max_body_bytes(100)
            .fetch_all(&base)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("body larger than 100 bytes"), "{err}");
        let _ = server.await;
    }

    #[test]
    fn all_url_joins_paths() {
        assert_eq!(
            all_url("https://catalogd.svc/catalogs/operatorhubio")
                .unwrap()
                .as_str(),
            "https://catalogd.svc/catalogs/operatorhubio/api/v1/all"
        );
        assert_eq!(
            all_url("http://h:8080/catalogs/x/").unwrap().as_str(),
            "http://h:8080/catalogs/x/api/v1/all"
        );
    }
}
