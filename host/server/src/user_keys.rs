//! Keys that name a user (`--user-keys-file`): with `--adapters per-user`, a request made with
//! one is that user's, answered by their adapter, whatever its headers say.
//!
//! `POST /admin/users` with the server's key issues a key for a user (`{"user": "alice"}` →
//! `{"user", "api_key"}`); `DELETE /admin/users/{user}` revokes every key of the user. The file
//! keeps one line per key, `<user> <SHA-256 of the key, hex>`: the keys themselves are never
//! written, so reading the file gives none away. A key is found by its hash, so looking one up
//! takes the same time whatever it shares with a real key. Lines are appended and synced before
//! the key is answered; a revocation rewrites the file whole (written beside it, then renamed).

use crate::error::ApiError;
use crate::App;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use burn::prelude::Backend;
use openclaw_engine::Model;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The user a request's key names (set by the key layer, read by the handlers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserKey(pub String);

/// The users' keys, by hash, and the file that keeps them.
#[derive(Debug, Default)]
pub struct UserKeys {
    file: Option<PathBuf>,
    by_hash: Mutex<HashMap<String, String>>,
}

fn hash(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl UserKeys {
    /// The keys `file` lists (none when it does not exist yet; it is made on the first issue).
    pub fn load(file: &Path) -> anyhow::Result<Self> {
        let mut by_hash = HashMap::new();
        if file.exists() {
            let text = std::fs::read_to_string(file)?;
            for (i, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let mut parts = line.split_whitespace();
                let (Some(user), Some(h), None) = (parts.next(), parts.next(), parts.next()) else {
                    anyhow::bail!(
                        "{} line {}: expected `<user> <sha256 hex>`",
                        file.display(),
                        i + 1
                    );
                };
                let hex = h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit());
                if !openclaw_engine::adapters::valid_name(user) || !hex {
                    anyhow::bail!(
                        "{} line {}: expected `<user> <sha256 hex>`",
                        file.display(),
                        i + 1
                    );
                }
                by_hash.insert(h.to_ascii_lowercase(), user.to_string());
            }
        }
        Ok(UserKeys {
            file: Some(file.to_path_buf()),
            by_hash: Mutex::new(by_hash),
        })
    }

    /// Whether keys can be issued (a file is given).
    pub fn enabled(&self) -> bool {
        self.file.is_some()
    }

    /// The user `key` names, if it is a user's key.
    pub fn user_of(&self, key: &str) -> Option<String> {
        if !self.enabled() {
            return None;
        }
        self.by_hash.lock().ok()?.get(&hash(key)).cloned()
    }

    /// A new key for `user`, on disk before it is returned.
    fn issue(&self, user: &str) -> anyhow::Result<String> {
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no --user-keys-file"))?;
        let key = format!(
            "oc-user-{:016x}{:016x}",
            rand::random::<u64>(),
            rand::random::<u64>()
        );
        let h = hash(&key);
        let mut keys = self
            .by_hash
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)?;
        writeln!(f, "{user} {h}")?;
        f.sync_all()?;
        keys.insert(h, user.to_string());
        Ok(key)
    }

    /// Revokes every key of `user`; returns how many there were.
    fn revoke(&self, user: &str) -> anyhow::Result<usize> {
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no --user-keys-file"))?;
        let mut keys = self
            .by_hash
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        let before = keys.len();
        keys.retain(|_, u| u != user);
        let gone = before - keys.len();
        if gone > 0 {
            let mut lines: Vec<String> = keys.iter().map(|(h, u)| format!("{u} {h}\n")).collect();
            lines.sort();
            let tmp = file.with_extension("tmp");
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(lines.concat().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, file)?;
        }
        Ok(gone)
    }
}

/// A refusal of a key that is not the server's.
fn not_admin() -> ApiError {
    ApiError {
        status: StatusCode::FORBIDDEN,
        message: "Only the server's key manages users.".into(),
        kind: "invalid_request_error",
        param: None,
        code: Some("admin_key_required"),
    }
}

/// Whether a request came with the server's key (not a session's or a user's).
fn by_admin(extensions: &axum::http::Extensions) -> bool {
    extensions.get::<UserKey>().is_none()
        && extensions
            .get::<crate::session_keys::SessionKey>()
            .is_none()
}

fn no_file() -> ApiError {
    ApiError::invalid(
        "This server issues no user keys: start it with --user-keys-file.",
        None,
    )
    .with_code("user_keys_disabled")
}

/// `POST /admin/users`: a new key for the body's `user`.
pub async fn issue<B: Backend>(State(app): State<Arc<App<B>>>, request: Request) -> Response
where
    Model<B>: Send + Sync,
{
    let r = async {
        if !by_admin(request.extensions()) {
            return Err(not_admin());
        }
        if !app.user_keys.enabled() {
            return Err(no_file());
        }
        let (parts, body) = request.into_parts();
        let body = crate::admission::read_body(&app, &parts.headers, body).await?;
        let mut o: serde_json::Map<String, Value> = crate::protocol::read_object(&body)?;
        let user = match o.remove("user") {
            Some(Value::String(u)) if openclaw_engine::adapters::valid_name(&u) => u,
            Some(other) => {
                return Err(ApiError::invalid(
                    format!("`user` must be 1-64 letters, digits, `.`, `_` or `-`, starting with a letter or digit; got {other}."),
                    Some("user"),
                ))
            }
            None => return Err(ApiError::invalid("Name the `user` the key is for.", Some("user"))),
        };
        if let Some(k) = o.keys().next() {
            return Err(ApiError::invalid(
                format!("Unrecognized request argument supplied: {k}"),
                Some(k),
            ));
        }
        let app2 = app.clone();
        let u2 = user.clone();
        let key = tokio::task::spawn_blocking(move || app2.user_keys.issue(&u2))
            .await
            .map_err(|e| ApiError::internal(format!("issuing stopped: {e}")))?
            .map_err(|e| ApiError::unavailable(format!("cannot keep the key: {e:#}")))?;
        Ok(Json(json!({"user": user, "api_key": key})).into_response())
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

/// `DELETE /admin/users/{user}`: revokes every key of the user.
pub async fn revoke<B: Backend>(
    State(app): State<Arc<App<B>>>,
    UrlPath(user): UrlPath<String>,
    extensions: axum::http::Extensions,
) -> Response
where
    Model<B>: Send + Sync,
{
    let r = async {
        if !by_admin(&extensions) {
            return Err(not_admin());
        }
        if !app.user_keys.enabled() {
            return Err(no_file());
        }
        let app2 = app.clone();
        let u2 = user.clone();
        let gone = tokio::task::spawn_blocking(move || app2.user_keys.revoke(&u2))
            .await
            .map_err(|e| ApiError::internal(format!("revoking stopped: {e}")))?
            .map_err(|e| ApiError::unavailable(format!("cannot rewrite the keys file: {e:#}")))?;
        if gone == 0 {
            return Err(ApiError {
                status: StatusCode::NOT_FOUND,
                message: format!("User `{user}` has no key."),
                kind: "invalid_request_error",
                param: Some("user".into()),
                code: Some("user_not_found"),
            });
        }
        Ok(Json(json!({"user": user, "revoked": gone})).into_response())
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issued keys name their user after a reload of the file, which holds only hashes; a
    /// revocation leaves the other users' keys.
    #[test]
    fn issued_keys_survive_a_reload_and_the_file_holds_no_key() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("users.keys");
        let keys = UserKeys::load(&file).unwrap();
        let alice = keys.issue("alice").unwrap();
        let bob = keys.issue("bob").unwrap();
        assert_eq!(keys.user_of(&alice).as_deref(), Some("alice"));
        assert_eq!(keys.user_of("oc-user-guess"), None);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(&alice) && text.contains(&hash(&alice)));
        let again = UserKeys::load(&file).unwrap();
        assert_eq!(again.user_of(&bob).as_deref(), Some("bob"));
        assert_eq!(again.revoke("alice").unwrap(), 1);
        let after = UserKeys::load(&file).unwrap();
        assert_eq!(
            (after.user_of(&alice), after.user_of(&bob).as_deref()),
            (None, Some("bob"))
        );
        std::fs::write(&file, "alice nothex\n").unwrap();
        assert!(UserKeys::load(&file)
            .unwrap_err()
            .to_string()
            .contains("line 1"));
    }
}
