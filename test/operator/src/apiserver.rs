//! The aggregated API server's request path: authenticate (front-proxy headers on a verified
//! client certificate, else a bearer token), authorize (SubjectAccessReview), then answer from
//! [`crate::aggregated`].

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Json, Response};
use kube::Client;

use crate::aggregated::{self, Answer, GadgetApi};
use crate::delegated::{self, RequestHeaderConfig, UserInfo};
use crate::serve::PeerCertificate;

/// What every request reads.
pub struct ApiState {
    pub api: GadgetApi,
    pub auth: RequestHeaderConfig,
    /// The pod's own client: TokenReviews and SubjectAccessReviews.
    pub client: Client,
}

/// Every path goes to [`handle`].
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new().fallback(handle).with_state(state)
}

fn respond((code, body): Answer) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, Json(body)).into_response()
}

async fn handle(
    State(state): State<Arc<ApiState>>,
    Extension(peer): Extension<PeerCertificate>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let path = uri.path();
    let Some(route) = aggregated::route(path) else {
        return respond(aggregated::status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    };
    if method != Method::GET {
        return respond(aggregated::status(
            405,
            "MethodNotAllowed",
            &format!("{method} is not supported: gadgets are read-only"),
        ));
    }
    let user = match authenticate(&state, &peer, &headers).await {
        Ok(user) => user,
        Err(why) => {
            tracing::info!(%path, %why, "request not authenticated");
            return respond(aggregated::status(
                401,
                "Unauthorized",
                &format!("Unauthorized: {why}"),
            ));
        }
    };
    let attributes = aggregated::attributes(&route, path);
    match delegated::authorize(&state.client, &user, &attributes).await {
        Ok((true, _)) => {}
        Ok((false, why)) => {
            tracing::info!(%path, user = %user.username, groups = ?user.groups, %why, "request forbidden");
            return respond(aggregated::forbidden(&user.username, &attributes, &why));
        }
        Err(e) => {
            tracing::warn!(error = %e, "access review failed");
            return respond(aggregated::status(500, "InternalError", &e.to_string()));
        }
    }
    let table = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(aggregated::wants_table);
    respond(state.api.answer(&route, &user.username, table))
}

/// The request's user: from the front-proxy headers when the connection presented a (verified)
/// client certificate, else from a bearer token; an error says why there is none.
async fn authenticate(
    state: &ApiState,
    peer: &PeerCertificate,
    headers: &HeaderMap,
) -> Result<UserInfo, String> {
    if let Some(cert) = &peer.0 {
        let common_name = delegated::common_name(cert).unwrap_or_default();
        let headers: Vec<(String, String)> = headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect();
        return delegated::proxied_user(&state.auth, &common_name, &headers);
    }
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or("no client certificate and no bearer token")?;
    match delegated::review_token(&state.client, token.trim()).await {
        Ok(Some(user)) => Ok(user),
        Ok(None) => Err("the token authenticates no one".into()),
        Err(e) => Err(e.to_string()),
    }
}
