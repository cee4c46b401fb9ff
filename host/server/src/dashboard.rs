//! The live dashboard: a page that draws the run's [`History`](openclaw_metrics::History)
//! (learning curves, judges, queues, throughput, checkpoints, episodes) and the JSON it polls,
//! behind the API key when one is set. Stateless from the caller's view, so the API server
//! merges it and `train`, which has no API server, serves it alone.
//!
//! A browser is asked for the key as a Basic password (any user name), which it then sends
//! with the page's own requests; scripts may send it as a bearer token instead.

use axum::extract::{Request, State};
use axum::http::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, WWW_AUTHENTICATE,
    X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine as _;
use openclaw_config::access::{bearer, same_key};
use openclaw_metrics::Metrics;
use std::sync::Arc;
use std::time::Duration;

/// The page's path; its script, style and data are under it.
pub const PATH: &str = "/dashboard";
/// How often [`spawn_ticker`] samples the counters for the throughput charts.
pub const TICK: Duration = Duration::from_secs(2);
/// The challenge that makes a browser ask for the key.
pub const CHALLENGE: &str = "Basic realm=\"openclaw-host dashboard\"";

const PAGE: &str = include_str!("dashboard/page.html");
const SCRIPT: &str = include_str!("dashboard/app.js");
const STYLE: &str = include_str!("dashboard/style.css");
/// Nothing but this server's own files and data, so a transcript can never load or run
/// anything even if it slipped past the page's text-only rendering.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

#[derive(Clone)]
struct Dashboard {
    metrics: Arc<Metrics>,
    /// `None` (or empty) when no key is asked.
    key: Option<Arc<str>>,
}

/// The dashboard's routes: `GET /dashboard` (the page), `/dashboard/app.js`,
/// `/dashboard/style.css` and `/dashboard/data` (the snapshot as JSON), each behind `key` when
/// it is given and not empty, none of them cached.
pub fn router(metrics: Arc<Metrics>, key: Option<Arc<str>>) -> Router {
    let key = key.filter(|k| !k.is_empty());
    let state = Dashboard { metrics, key };
    Router::new()
        .route(PATH, get(page))
        // Relative, so it also works behind a proxy that mounts the server under a prefix.
        .route(
            "/dashboard/",
            get(|| async { Redirect::to("../dashboard") }),
        )
        .route("/dashboard/app.js", get(script))
        .route("/dashboard/style.css", get(style))
        .route("/dashboard/data", get(data))
        .route_layer(from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// Samples the counters into the history every [`TICK`] (the throughput charts), until the
/// task is aborted.
pub fn spawn_ticker(metrics: Arc<Metrics>) -> tokio::task::JoinHandle<()> {
    spawn_ticker_every(metrics, TICK)
}

fn spawn_ticker_every(metrics: Arc<Metrics>, period: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(period);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            metrics.history.tick(&metrics);
        }
    })
}

/// Whether an `Authorization` header value carries `key`: as a bearer token, or as the
/// password of HTTP Basic with any user name. Compared in constant time.
fn carries_key(authorization: Option<&str>, key: &str) -> bool {
    let Some(value) = authorization else {
        return false;
    };
    if let Some(token) = bearer(value) {
        return same_key(token, key);
    }
    basic_password(value).is_some_and(|password| same_key(&password, key))
}

/// The password of an HTTP Basic `Authorization` value (`Basic base64(user:password)`).
fn basic_password(value: &str) -> Option<String> {
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    // A user name holds no colon (RFC 7617); a password may.
    let (_user, password) = text.split_once(':')?;
    Some(password.to_string())
}

/// The key check, and `no-store` on every answer: the data is live and may be private.
async fn guard(State(d): State<Dashboard>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let mut response = match &d.key {
        Some(key) if !carries_key(given, key) => (
            StatusCode::UNAUTHORIZED,
            [(WWW_AUTHENTICATE, CHALLENGE)],
            "The dashboard asks for the API key: as the password (any user name) or as a bearer token.\n",
        )
            .into_response(),
        _ => next.run(request).await,
    };
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

async fn page() -> Response {
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CONTENT_SECURITY_POLICY, POLICY),
        ],
        PAGE,
    )
        .into_response()
}

async fn script() -> Response {
    ([(CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT).into_response()
}

async fn style() -> Response {
    ([(CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

async fn data(State(d): State<Dashboard>) -> Json<serde_json::Value> {
    Json(d.metrics.history.snapshot(&d.metrics))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    async fn get(
        app: Router,
        path: &str,
        authorization: Option<&str>,
    ) -> (StatusCode, axum::http::HeaderMap, String) {
        let mut request = Request::get(path);
        if let Some(a) = authorization {
            request = request.header(AUTHORIZATION, a);
        }
        let response = app
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), 1 << 24)
            .await
            .unwrap();
        (status, headers, String::from_utf8(body.to_vec()).unwrap())
    }

    fn basic(user: &str, password: &str) -> String {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {encoded}")
    }

    #[tokio::test]
    async fn the_page_its_files_and_the_data_are_served_uncached() {
        let metrics = Arc::new(Metrics::new());
        metrics.history.push("train/loss", 3, 0.25);
        let app = router(metrics, None);
        let (status, headers, body) = get(app.clone(), "/dashboard", None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(headers[CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"));
        assert_eq!(headers[CACHE_CONTROL], "no-store");
        assert!(headers.contains_key(CONTENT_SECURITY_POLICY));
        assert!(body.contains("dashboard/app.js"), "{body}");
        assert!(body.contains("dashboard/style.css"), "{body}");
        for (path, kind) in [
            ("/dashboard/app.js", "text/javascript"),
            ("/dashboard/style.css", "text/css"),
        ] {
            let (status, headers, body) = get(app.clone(), path, None).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert!(headers[CONTENT_TYPE].to_str().unwrap().starts_with(kind));
            assert_eq!(headers[CACHE_CONTROL], "no-store");
            assert!(!body.is_empty());
        }
        let (status, headers, body) = get(app.clone(), "/dashboard/data", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CONTENT_TYPE], "application/json");
        assert_eq!(headers[CACHE_CONTROL], "no-store");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        for part in ["series", "rates", "gauges", "counters"] {
            assert!(v[part].is_object(), "{part}: {v}");
        }
        for part in ["checkpoints", "episodes"] {
            assert!(v[part].is_array(), "{part}: {v}");
        }
        assert!(v["now"].is_number());
        assert_eq!(v["series"]["train/loss"][0][0], 3);
        assert_eq!(v["series"]["train/loss"][0][1], 0.25);
        let (status, headers, _) = get(app, "/dashboard/", None).await;
        assert!(status.is_redirection());
        assert_eq!(headers["location"], "../dashboard");
    }

    #[tokio::test]
    async fn the_key_is_asked_as_a_bearer_token_or_a_basic_password() {
        let app = router(Arc::new(Metrics::new()), Some(Arc::from("s3cret:x")));
        for path in [
            "/dashboard",
            "/dashboard/data",
            "/dashboard/app.js",
            "/dashboard/style.css",
        ] {
            for refused in [
                None,
                Some("Bearer wrong"),
                Some("Bearer s3cret:"),
                Some("s3cret:x"),
                Some("Basic !!!not-base64"),
                Some(basic("user", "wrong").as_str()),
                Some(basic("s3cret", "x").as_str()),
            ] {
                let (status, headers, body) = get(app.clone(), path, refused).await;
                assert_eq!(status, StatusCode::UNAUTHORIZED, "{path} {refused:?}");
                assert_eq!(headers[WWW_AUTHENTICATE], CHALLENGE);
                assert_eq!(headers[CACHE_CONTROL], "no-store");
                assert!(!body.contains("s3cret"));
            }
            for allowed in [
                "Bearer s3cret:x".to_string(),
                "bearer  s3cret:x".to_string(),
                basic("anyone", "s3cret:x"),
                basic("", "s3cret:x"),
            ] {
                let (status, _, _) = get(app.clone(), path, Some(allowed.as_str())).await;
                assert_eq!(status, StatusCode::OK, "{path} {allowed}");
            }
        }
    }

    #[tokio::test]
    async fn an_empty_key_asks_for_none_and_other_paths_are_left_to_the_merging_router() {
        let app = router(Arc::new(Metrics::new()), Some(Arc::from("")));
        let (status, _, _) = get(app.clone(), "/dashboard/data", None).await;
        assert_eq!(status, StatusCode::OK);
        let merged = Router::new()
            .route("/healthz", axum::routing::get(|| async { "ok" }))
            .merge(router(Arc::new(Metrics::new()), Some(Arc::from("k"))));
        let (status, _, body) = get(merged.clone(), "/healthz", None).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
        let (status, _, _) = get(merged, "/dashboard", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn the_ticker_records_rates() {
        let metrics = Arc::new(Metrics::new());
        let ticker = spawn_ticker_every(metrics.clone(), Duration::from_millis(20));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            metrics.generated_tokens.inc_by(10);
            let rates = metrics.history.snapshot(&metrics)["rates"]["rate/tokens_per_s"]
                .as_array()
                .map_or(0, Vec::len);
            if rates > 0 {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "no rate recorded");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        ticker.abort();
    }
}
