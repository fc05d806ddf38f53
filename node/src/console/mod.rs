//! The web console, on the client listener at `/ui`, over the listener's TLS: static files
//! compiled into the binary (`index.html`, `console.js`, `console.css`) and read-only JSON under
//! `/ui/api/`, judged by the same tokens as the API (any token the replica knows, a reader's
//! included, once auth is on). This first part shows what needs attention and the cluster's
//! members (`/ui/api/cluster`, the node's `Cluster.Status`, with what needs attention as
//! `api::status` judges it for `strand top` too).
//!
//! Invariant: nothing under `/ui` changes state. Every answer carries a strict Content Security
//! Policy (`script-src 'self'`, nothing from elsewhere); a method other than GET or HEAD is
//! refused with 405, and a request whose `Origin` is not this node's own with 403.

use std::sync::Arc;

use api::proto::cluster_server::Cluster;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use raft_store::Disk;

use crate::client::ClusterService;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("console.js");
const STYLE: &str = include_str!("console.css");

/// The Content Security Policy of every answer under `/ui`.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The console's routes.
pub fn route<D: Disk>(cluster: Arc<ClusterService<D>>) -> axum::Router {
    let serve = move |method: Method, uri: Uri, headers: HeaderMap| {
        let cluster = cluster.clone();
        async move { secured(answer(&cluster, &method, uri.path(), &headers).await) }
    };
    axum::Router::new()
        .route("/ui", axum::routing::any(serve.clone()))
        .route("/ui/", axum::routing::any(serve.clone()))
        .route("/ui/{*path}", axum::routing::any(serve))
}

/// The answer's headers: the policy, no sniffing, no referrer, no caching.
fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

fn text(status: StatusCode, message: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], serde_json::json!({ "error": message }).to_string())
        .into_response()
}

/// Whether the request's `Origin`, when it has one, is this node as the request addressed it.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let host = headers.get(header::HOST).and_then(|host| host.to_str().ok()).unwrap_or_default();
    let origin = origin.to_str().unwrap_or_default();
    let authority = origin.split_once("://").map_or("", |(_, rest)| rest);
    !host.is_empty() && authority == host
}

async fn answer<D: Disk>(cluster: &ClusterService<D>, method: &Method, path: &str, headers: &HeaderMap) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("the console is read-only: {method} is refused; change state with the strand CLI or the gRPC API"),
        );
    }
    if !same_origin(headers) {
        return text(
            StatusCode::FORBIDDEN,
            "a request from another origin is refused; open the console from this node".into(),
        );
    }
    let file = |kind: &'static str, body: &'static str| ([(header::CONTENT_TYPE, kind)], body).into_response();
    match path {
        "/ui" | "/ui/" | "/ui/index.html" => file("text/html; charset=utf-8", INDEX),
        "/ui/console.js" => file("text/javascript; charset=utf-8", SCRIPT),
        "/ui/console.css" => file("text/css; charset=utf-8", STYLE),
        "/ui/api/cluster" => cluster_status(cluster, headers).await,
        other => text(StatusCode::NOT_FOUND, format!("no console page or data at {other}; open /ui")),
    }
}

/// `Cluster.Status` as the node answers it, as JSON; 401 without a token it knows (auth on).
async fn cluster_status<D: Disk>(cluster: &ClusterService<D>, headers: &HeaderMap) -> Response {
    let mut request = tonic::Request::new(api::proto::StatusRequest { include_digest: false });
    if let Some(value) = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok())
        && let Ok(value) = value.parse()
    {
        request.metadata_mut().insert("authorization", value);
    }
    let status = match cluster.status(request).await {
        Ok(answer) => answer.into_inner(),
        Err(status)
            if status.code() == tonic::Code::Unauthenticated || status.code() == tonic::Code::PermissionDenied =>
        {
            return text(StatusCode::UNAUTHORIZED, status.message().to_string());
        }
        Err(status) => return text(StatusCode::SERVICE_UNAVAILABLE, status.message().to_string()),
    };
    let nodes: Vec<serde_json::Value> = status
        .nodes
        .iter()
        .map(|node| {
            serde_json::json!({
                "id": node.id, "client_address": node.client_address, "peer_address": node.address,
                "state": node.state, "term": node.term, "last_log_index": node.last_log_index,
                "applied_index": node.applied_index, "lag": node.lag, "lease_count": node.lease_count,
                "error": node.error, "fatal_error": node.fatal_error, "divergence": node.divergence, "note": node.note,
            })
        })
        .collect();
    let body = serde_json::json!({
        "leader_id": status.leader_id, "term": status.term, "voters": status.voters,
        "apply_version": api::status::apply_version(&status).map(|(version, _)| version),
        "controller": api::status::controller(&status), "attention": api::status::attention(&status),
        "nodes": nodes,
    });
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}
