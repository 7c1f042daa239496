//! warp routes: the admission endpoints and the probe/metrics endpoints, and
//! the mapping of every rejection to a precise HTTP status.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt as _};
use http::StatusCode;
use http::header::{ALLOW, CONTENT_TYPE};
use tracing::{debug, error};
use warp::{Filter, Rejection, Reply};

use crate::admission::Admission;
use crate::metrics;
use pod_director_engine::placement::Webhook;

/// The body is larger than `--max-body-bytes`.
#[derive(Debug)]
struct BodyTooLarge {
    limit: u64,
}
impl warp::reject::Reject for BodyTooLarge {}

/// The body could not be read (client went away, broken chunking).
#[derive(Debug)]
struct BodyUnreadable(String);
impl warp::reject::Reject for BodyUnreadable {}

/// The body is declared as something other than JSON.
#[derive(Debug)]
struct NotJson(String);
impl warp::reject::Reject for NotJson {}

/// The request body, refused with 413 as soon as it is known to exceed `limit`
/// (by `Content-Length`, or while streaming when there is none, as in HTTP/2).
fn body_limited(limit: u64) -> impl Filter<Extract = (Bytes,), Error = Rejection> + Clone {
    warp::header::optional::<u64>("content-length")
        .and_then(move |length: Option<u64>| async move {
            match length {
                Some(n) if n > limit => Err(warp::reject::custom(BodyTooLarge { limit })),
                _ => Ok(()),
            }
        })
        .untuple_one()
        .and(warp::body::stream())
        .and_then(move |stream| collect(stream, limit))
}

/// The body's bytes: a body that arrives in one chunk (the usual case) is kept as it came,
/// without a copy; one in several chunks is joined.
async fn collect<S, B>(stream: S, limit: u64) -> Result<Bytes, Rejection>
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: bytes::Buf,
{
    let mut stream = std::pin::pin!(stream);
    let mut first: Option<Bytes> = None;
    let mut joined = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let mut chunk = chunk.map_err(|e| warp::reject::custom(BodyUnreadable(e.to_string())))?;
        let held = first.as_ref().map_or(0, Bytes::len) + joined.len();
        if (held + chunk.remaining()) as u64 > limit {
            return Err(warp::reject::custom(BodyTooLarge { limit }));
        }
        if held == 0 {
            first = Some(chunk.copy_to_bytes(chunk.remaining()));
            continue;
        }
        if let Some(first) = first.take() {
            joined.extend_from_slice(&first);
        }
        bytes::BufMut::put(&mut joined, chunk);
    }
    Ok(first.unwrap_or_else(|| joined.freeze()))
}

/// Accepts a missing `Content-Type` and any JSON one; refuses the rest with 415.
fn json_content() -> impl Filter<Extract = (), Error = Rejection> + Clone {
    warp::header::optional::<String>("content-type")
        .and_then(|value: Option<String>| async move {
            match value {
                Some(v) if !is_json(&v) => Err(warp::reject::custom(NotJson(v))),
                _ => Ok(()),
            }
        })
        .untuple_one()
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
}

/// A review posted to `/{name}`: its headers and its JSON body, within `max_body_bytes`.
pub(crate) fn review_request(
    name: &'static str,
    max_body_bytes: u64,
) -> impl Filter<Extract = (http::HeaderMap, Bytes), Error = Rejection> + Clone {
    warp::path(name)
        .and(warp::path::end())
        .and(warp::post())
        .and(json_content())
        .and(warp::header::headers_cloned())
        .and(body_limited(max_body_bytes))
}

/// An AdmissionReview answer.
pub(crate) fn review_reply(body: Vec<u8>, status: StatusCode) -> impl Reply {
    warp::reply::with_status(warp::reply::with_header(body, CONTENT_TYPE, "application/json"), status)
}

/// `POST /mutate`, `POST /validate`, `POST /validate-namespace`, `POST /validate-reservation`,
/// `POST /mutate-in-tree` and `POST /validate-in-tree`.
pub(crate) fn admission(
    admission: Arc<Admission>,
    max_body_bytes: u64,
) -> impl Filter<Extract = (impl Reply,), Error = Infallible> + Clone {
    let endpoint = move |name: &'static str, webhook: Webhook| {
        let admission = admission.clone();
        review_request(name, max_body_bytes).then(move |headers: http::HeaderMap, body: Bytes| {
            let admission = admission.clone();
            async move {
                let reply = admission.review(webhook, &headers, &body).await;
                review_reply(reply.body, reply.status)
            }
        })
    };
    endpoint("mutate", Webhook::Mutate)
        .or(endpoint("validate", Webhook::Validate))
        .unify()
        .or(endpoint("validate-namespace", Webhook::ValidateNamespace))
        .unify()
        .or(endpoint("validate-reservation", Webhook::ValidateReservation))
        .unify()
        .or(endpoint("mutate-in-tree", Webhook::MutateInTree))
        .unify()
        .or(endpoint("validate-in-tree", Webhook::ValidateInTree))
        .unify()
        .recover(rejection)
}

/// What `/metrics` answers: the composition root refreshes the gauges read at scrape time, then encodes.
pub(crate) type Scrape = Arc<dyn Fn() -> String + Send + Sync>;

/// `GET /healthz`, `/readyz`, `/metrics` (plain HTTP, separate port).
pub(crate) fn probes(
    admission: Arc<Admission>,
    scrape: Scrape,
) -> impl Filter<Extract = (impl Reply,), Error = Infallible> + Clone {
    let healthz = warp::path("healthz")
        .and(warp::path::end())
        .map(|| warp::reply::with_status("ok\n".to_owned(), StatusCode::OK));
    let readyz = warp::path("readyz").and(warp::path::end()).map(move || {
        if admission.is_ready() {
            warp::reply::with_status("ready\n".to_owned(), StatusCode::OK)
        } else {
            warp::reply::with_status(
                "not ready: the namespace cache (or the Node cache) has not completed its first list\n".to_owned(),
                StatusCode::SERVICE_UNAVAILABLE,
            )
        }
    });
    let metrics = warp::path("metrics")
        .and(warp::path::end())
        .map(move || warp::reply::with_header(scrape(), CONTENT_TYPE, metrics::CONTENT_TYPE).into_response());
    warp::get()
        .and(healthz.or(readyz).unify().map(Reply::into_response).or(metrics).unify())
        .recover(rejection)
}

fn text(status: StatusCode, message: String) -> warp::reply::Response {
    warp::reply::with_status(
        warp::reply::with_header(message + "\n", CONTENT_TYPE, "text/plain; charset=utf-8"),
        status,
    )
    .into_response()
}

/// Maps each rejection to its own status with a message saying what to do.
pub(crate) async fn rejection(rejection: Rejection) -> Result<warp::reply::Response, Infallible> {
    let reply = if rejection.is_not_found() {
        text(
            StatusCode::NOT_FOUND,
            "no such endpoint: POST AdmissionReviews to /mutate, /validate, /validate-namespace or /validate-reservation; probes are /healthz, /readyz, /metrics on the probe port".to_owned(),
        )
    } else if let Some(too_large) = rejection.find::<BodyTooLarge>() {
        text(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body exceeds {} bytes (--max-body-bytes)", too_large.limit),
        )
    } else if rejection.find::<warp::reject::MethodNotAllowed>().is_some() {
        let mut reply = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: admission endpoints take POST, probes GET".to_owned(),
        );
        reply
            .headers_mut()
            .insert(ALLOW, http::HeaderValue::from_static("POST, GET"));
        reply
    } else if let Some(NotJson(content_type)) = rejection.find::<NotJson>() {
        text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type {content_type:?} is not JSON; send an AdmissionReview as application/json"),
        )
    } else if let Some(BodyUnreadable(why)) = rejection.find::<BodyUnreadable>() {
        text(StatusCode::BAD_REQUEST, format!("cannot read the request body: {why}"))
    } else if let Some(header) = rejection.find::<warp::reject::InvalidHeader>() {
        text(StatusCode::BAD_REQUEST, format!("invalid header {}", header.name()))
    } else {
        error!(rejection = ?rejection, "unhandled request rejection");
        text(StatusCode::INTERNAL_SERVER_ERROR, "internal error".to_owned())
    };
    debug!(status = reply.status().as_u16(), "request rejected");
    Ok(reply)
}

#[cfg(test)]
mod tests;
