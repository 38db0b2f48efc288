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
}

impl CatalogClient {
    /// A client with system roots plus the given extra CA certificates (PEM), a 5-minute timeout
    /// and the default body bound.
    pub fn new(extra_ca_pem: &[Vec<u8>]) -> Result<CatalogClient, CatalogError> {
        let mut builder = reqwest::Client::builder().timeout(DEFAULT_TIMEOUT).gzip(true);
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
        })
    }

    /// The same client with another body bound.
    pub fn with_max_body_bytes(mut self, max_body_bytes: usize) -> CatalogClient {
        self.max_body_bytes = max_body_bytes;
        self
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
    use super::*;

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
