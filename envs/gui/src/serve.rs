//! The static HTTP server the pages come from: `GET` only, on `127.0.0.1` at a port the
//! system picks, over one folder (the task set). Every path is decoded, refused when a segment
//! is `..`, resolved with its links and refused again when it leads outside the folder; a
//! task's own `task.toml`, `solution.json` and `wrong.json` are never served (a page cannot
//! read its answer). One thread per connection, each with 10 s read and write timeouts, and
//! one answer per connection (`Connection: close`).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Files of a task that are never served.
pub const HIDDEN: [&str; 3] = ["task.toml", "solution.json", "wrong.json"];

/// Connections served at once; more are answered 503.
const MAX_CONNECTIONS: usize = 256;
/// The most bytes of a request's head.
const MAX_HEAD: usize = 16 * 1024;
/// Read and write timeout of a connection.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A running server; stopped when dropped.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves `root` on `127.0.0.1` at a free port.
    pub fn start(root: &Path) -> io::Result<Server> {
        let root = std::fs::canonicalize(root)?;
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let active = Arc::new(AtomicUsize::new(0));
        let accept = std::thread::Builder::new()
            .name("gui-serve".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    let mut conn = match conn {
                        Ok(c) => c,
                        Err(_) => {
                            // Out of descriptors, say: do not spin.
                            std::thread::sleep(Duration::from_millis(20));
                            continue;
                        }
                    };
                    if active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                        let _ = conn.set_write_timeout(Some(IO_TIMEOUT));
                        let _ = respond(&mut conn, 503, "text/plain", b"busy\n");
                        continue;
                    }
                    active.fetch_add(1, Ordering::SeqCst);
                    let root = root.clone();
                    let done = Arc::clone(&active);
                    let spawned = std::thread::Builder::new()
                        .name("gui-serve-conn".into())
                        .spawn(move || {
                            let _ = handle(conn, &root);
                            done.fetch_sub(1, Ordering::SeqCst);
                        });
                    if spawned.is_err() {
                        active.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            })?;
        Ok(Server {
            addr,
            stop,
            accept: Some(accept),
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The URL of `path` (relative to the folder).
    pub fn url(&self, path: &str) -> String {
        format!(
            "http://127.0.0.1:{}/{}",
            self.port(),
            path.trim_start_matches('/')
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// Why a path is not served: the status and a line of text.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal(pub u16, pub &'static str);

/// The file a request target names inside `root` (itself with its links resolved).
pub fn resolve(root: &Path, target: &str) -> Result<PathBuf, Refusal> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    if !path.starts_with('/') {
        return Err(Refusal(400, "the path must start with /"));
    }
    let decoded = percent_decode(path).ok_or(Refusal(400, "a bad %-escape"))?;
    if decoded.contains('\0') {
        return Err(Refusal(400, "a NUL in the path"));
    }
    let mut rel = PathBuf::new();
    let mut last = "";
    for seg in decoded.split('/') {
        match seg {
            "" | "." => continue,
            ".." => return Err(Refusal(403, "a path out of the folder")),
            s => {
                rel.push(s);
                last = s;
            }
        }
    }
    if rel.as_os_str().is_empty() || HIDDEN.contains(&last) {
        return Err(Refusal(404, "not found"));
    }
    let real = std::fs::canonicalize(root.join(&rel)).map_err(|_| Refusal(404, "not found"))?;
    if !real.starts_with(root) {
        return Err(Refusal(403, "a path out of the folder"));
    }
    if !real.is_file() {
        return Err(Refusal(404, "not found"));
    }
    if real
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| HIDDEN.contains(&n))
    {
        return Err(Refusal(404, "not found"));
    }
    Ok(real)
}

/// `%XX` escapes decoded; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The content type of a file, by its extension.
pub fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "png" => "image/png",
        "svg" => "image/svg+xml",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        408 => "Request Timeout",
        _ => "Internal Server Error",
    }
}

fn respond(conn: &mut TcpStream, status: u16, ctype: &str, body: &[u8]) -> io::Result<()> {
    let allow = if status == 405 { "Allow: GET\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n{allow}Connection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body)?;
    conn.flush()
}

/// Answers one request on `conn`.
fn handle(mut conn: TcpStream, root: &Path) -> io::Result<()> {
    conn.set_read_timeout(Some(IO_TIMEOUT))?;
    conn.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    // One deadline for the whole head: a byte every few seconds does not keep a worker.
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return respond(&mut conn, 408, "text/plain", b"request head too slow\n");
        }
        conn.set_read_timeout(Some(left))?;
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            return respond(&mut conn, 400, "text/plain", b"request head too large\n");
        }
    }
    if head.is_empty() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&head);
    let mut parts = text.lines().next().unwrap_or("").split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" {
        return respond(&mut conn, 405, "text/plain", b"only GET\n");
    }
    match resolve(root, target) {
        Ok(path) => match std::fs::read(&path) {
            Ok(body) => respond(&mut conn, 200, content_type(&path), &body),
            Err(_) => respond(&mut conn, 404, "text/plain", b"not found\n"),
        },
        Err(Refusal(status, why)) => respond(
            &mut conn,
            status,
            "text/plain",
            format!("{why}\n").as_bytes(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `request` and returns the status, the head and the body.
    fn send(server: &Server, request: &str) -> (u16, String, Vec<u8>) {
        let mut c = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        c.read_to_end(&mut raw).unwrap();
        let at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8(raw[..at].to_vec()).unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head, raw[at + 4..].to_vec())
    }

    fn get(server: &Server, path: &str) -> (u16, String, Vec<u8>) {
        send(server, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"))
    }

    fn folder() -> (tempfile::TempDir, tempfile::TempDir) {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "SECRET").unwrap();
        let root = tempfile::tempdir().unwrap();
        let t = root.path().join("task-a");
        std::fs::create_dir(&t).unwrap();
        std::fs::write(t.join("index.html"), "<p>hello</p>").unwrap();
        std::fs::write(t.join("style.css"), "p{}").unwrap();
        std::fs::write(t.join("a b.js"), "1").unwrap();
        std::fs::write(t.join("task.toml"), "check = 'x'").unwrap();
        std::fs::write(t.join("solution.json"), "[]").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), t.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(t.join("index.html"), t.join("alias.html")).unwrap();
        (root, outside)
    }

    #[test]
    fn it_serves_files_with_their_types() {
        let (root, _outside) = folder();
        let server = Server::start(root.path()).unwrap();
        let (status, head, body) = get(&server, "/task-a/index.html?x=1#top");
        assert_eq!(status, 200, "{head}");
        assert!(
            head.contains("Content-Type: text/html; charset=utf-8"),
            "{head}"
        );
        assert!(head.contains("Content-Length: 12"), "{head}");
        assert_eq!(body, b"<p>hello</p>");
        let (status, head, _) = get(&server, "/task-a/style.css");
        assert_eq!(status, 200);
        assert!(head.contains("text/css"));
        assert_eq!(get(&server, "/task-a/a%20b.js").0, 200);
        assert_eq!(get(&server, "//task-a/./index.html").0, 200);
        // A link that stays inside is followed.
        assert_eq!(get(&server, "/task-a/alias.html").2, b"<p>hello</p>");
        assert_eq!(
            server.url("/task-a/index.html"),
            format!("http://127.0.0.1:{}/task-a/index.html", server.port())
        );
    }

    #[test]
    fn it_refuses_paths_out_of_the_folder_and_the_answers() {
        let (root, outside) = folder();
        let server = Server::start(root.path()).unwrap();
        let name = outside.path().file_name().unwrap().to_str().unwrap();
        for path in [
            "/../secret.txt".to_string(),
            "/task-a/../../secret.txt".to_string(),
            "/%2e%2e/secret.txt".to_string(),
            "/task-a/..%2f..%2fsecret.txt".to_string(),
            format!("/../{name}/secret.txt"),
        ] {
            let (status, _, body) = get(&server, &path);
            assert_eq!(status, 403, "{path}");
            assert!(!String::from_utf8_lossy(&body).contains("SECRET"));
        }
        let (status, _, body) = get(&server, "/task-a/link.txt");
        assert_eq!(status, 403);
        assert!(!String::from_utf8_lossy(&body).contains("SECRET"));
        assert_eq!(get(&server, "/task-a/task.toml").0, 404);
        assert_eq!(get(&server, "/task-a/solution.json").0, 404);
        assert_eq!(get(&server, "/task-a/missing.html").0, 404);
        assert_eq!(get(&server, "/task-a/").0, 404);
        assert_eq!(get(&server, "/").0, 404);
        assert_eq!(get(&server, "/task-a/%zz").0, 400);
        assert_eq!(get(&server, "/task-a/%00x").0, 400);
        assert_eq!(get(&server, "task-a/index.html").0, 400);
        let (status, head, _) = send(
            &server,
            "POST /task-a/index.html HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        );
        assert_eq!(status, 405);
        assert!(head.contains("Allow: GET"));
    }

    #[test]
    fn dropping_the_server_stops_it_promptly() {
        let (root, _outside) = folder();
        let server = Server::start(root.path()).unwrap();
        // A connection that never sends its request does not hold the stop up.
        let _idle = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        let started = std::time::Instant::now();
        drop(server);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
