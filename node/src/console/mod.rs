//! The web console, on the client listener at `/ui`, over the listener's TLS: static files
//! compiled into the binary (`index.html`, `console.js`, `console.css`), read-only JSON under
//! `/ui/api/` (`data.rs`) and a live feed of a namespace's events (`live.rs`), judged by the same
//! tokens as the API (any token the replica knows, a reader's included, once auth is on).
//!
//! Pages (each is `index.html`; the script reads the path): `/ui` (what needs attention, the
//! cluster), `/ui/ns/NS` (a namespace's queues), `/ui/ns/NS/beads/ID`, `/ui/ns/NS/events`,
//! `/ui/ns/NS/orders`. Path segments are percent-decoded, so a namespace holding `/` is one
//! segment (`%2F`).
//!
//! Invariant: nothing under `/ui` changes state. Every answer carries a strict Content Security
//! Policy (`script-src 'self'`, nothing from elsewhere); a method other than GET or HEAD is
//! refused with 405, and a request whose `Origin` is not this node's own with 403.

mod data;
mod live;

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use raft_store::Disk;

use crate::client::{ClusterService, EventsService};
use crate::leader::Leader;
use data::Reads;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("console.js");
const STYLE: &str = include_str!("console.css");

/// The Content Security Policy of every answer under `/ui`.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// What the console reads with: the cluster service (status), the leader plane (reads) and the
/// events service (watch streams).
pub struct Console<D: Disk> {
    cluster: ClusterService<D>,
    leader: Arc<Leader<D>>,
    events: EventsService<D>,
}

impl<D: Disk> Console<D> {
    /// The console of a node.
    pub fn new(cluster: ClusterService<D>, leader: Arc<Leader<D>>) -> Console<D> {
        Console { cluster, events: EventsService::new(leader.clone()), leader }
    }
}

/// The console's routes.
pub fn route<D: Disk>(console: Arc<Console<D>>) -> axum::Router {
    let serve = move |method: Method, uri: Uri, headers: HeaderMap| {
        let console = console.clone();
        async move { secured(answer(&console, &method, &uri, &headers).await) }
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

/// A JSON error answer: `{"error": message}`.
fn error(status: StatusCode, message: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], serde_json::json!({ "error": message }).to_string())
        .into_response()
}

/// A JSON answer.
fn json(body: serde_json::Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// A gRPC request of `message` that carries the HTTP request's `Authorization` header, for the
/// node's own services to judge its token.
fn grpc_request<T>(headers: &HeaderMap, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok())
        && let Ok(value) = value.parse()
    {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// Whether the request's `Origin`, when it has one, is this node as the request addressed it.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let host = headers.get(header::HOST).and_then(|host| host.to_str().ok()).unwrap_or_default();
    let origin = origin.to_str().unwrap_or_default();
    let authority = origin.split_once("://").map_or("", |(_, rest)| rest);
    !host.is_empty() && authority == host
}

/// A path segment with its `%XX` escapes decoded; `None` when an escape is malformed or the
/// result is not UTF-8.
fn percent_decoded(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = std::str::from_utf8(bytes.get(at + 1..at + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            decoded.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

/// The value of `name` in a query string, percent-decoded.
fn query_value(uri: &Uri, name: &str) -> Option<String> {
    uri.query()?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| percent_decoded(value)).flatten()
    })
}

async fn answer<D: Disk>(console: &Console<D>, method: &Method, uri: &Uri, headers: &HeaderMap) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("the console is read-only: {method} is refused; change state with the strand CLI or the gRPC API"),
        );
    }
    if !same_origin(headers) {
        return error(
            StatusCode::FORBIDDEN,
            "a request from another origin is refused; open the console from this node".into(),
        );
    }
    let path = uri.path();
    let rest = path.strip_prefix("/ui").unwrap_or_default();
    let segments: Option<Vec<String>> = if rest.is_empty() || rest == "/" {
        Some(Vec::new())
    } else {
        rest[1..].split('/').map(percent_decoded).collect()
    };
    let Some(segments) = segments else {
        return error(StatusCode::BAD_REQUEST, format!("the path {path} has a malformed %-escape; open /ui"));
    };
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let file = |kind: &'static str, body: &'static str| ([(header::CONTENT_TYPE, kind)], body).into_response();
    let page = || file("text/html; charset=utf-8", INDEX);
    match segments.as_slice() {
        [] | ["index.html"] | ["cluster"] => page(),
        ["ns", namespace] | ["ns", namespace, "events" | "orders"] | ["ns", namespace, "beads", _]
            if !namespace.is_empty() =>
        {
            page()
        }
        ["console.js"] => file("text/javascript; charset=utf-8", SCRIPT),
        ["console.css"] => file("text/css; charset=utf-8", STYLE),
        ["api", "cluster"] => data::cluster(console, headers).await,
        ["api", "namespaces"] => data::namespaces(Reads::new(console, headers)).await,
        ["api", "ns", namespace] => data::namespace(Reads::new(console, headers), namespace).await,
        ["api", "ns", namespace, "beads", id] => data::bead(Reads::new(console, headers), namespace, id).await,
        ["api", "ns", namespace, "orders"] => data::orders(Reads::new(console, headers), namespace).await,
        ["api", "ns", namespace, "events"] => {
            let (after, event_type) = (query_value(uri, "after"), query_value(uri, "type"));
            data::events(Reads::new(console, headers), namespace, after, event_type).await
        }
        ["api", "ns", namespace, "watch"] => live::watch(console, headers, namespace, query_value(uri, "after")).await,
        _ => error(StatusCode::NOT_FOUND, format!("no console page or data at {path}; open /ui")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_decode_their_escapes_and_refuse_malformed_ones() {
        assert_eq!(percent_decoded("rig%2Fweb%3Aa").as_deref(), Some("rig/web:a"));
        assert_eq!(percent_decoded("plain").as_deref(), Some("plain"));
        assert_eq!(percent_decoded("bad%2"), None);
        assert_eq!(percent_decoded("bad%zz"), None);
        assert_eq!(percent_decoded("%ff"), None, "not UTF-8");
    }

    #[test]
    fn a_query_value_is_found_by_name() {
        let uri: Uri = "/ui/api/ns/a/events?after=5&type=bead.created".parse().unwrap();
        assert_eq!(query_value(&uri, "after").as_deref(), Some("5"));
        assert_eq!(query_value(&uri, "type").as_deref(), Some("bead.created"));
        assert_eq!(query_value(&uri, "missing"), None);
    }
}
