//! Reading an index or a file it names: a local path, `file://`, or HTTPS (plain HTTP only
//! when allowed), with a size limit, since the other end is not trusted.

use anyhow::{anyhow, bail, Context, Result};
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

/// The most an index may weigh.
pub const INDEX_LIMIT: u64 = 8 << 20;
/// The most an archive or a library may weigh.
pub const FILE_LIMIT: u64 = 512 << 20;

/// Where things may be fetched from.
#[derive(Clone, Debug, Default)]
pub struct FetchPolicy {
    /// Accept `http://` (an index or a file over plain HTTP can be changed on the way).
    pub allow_http: bool,
}

/// A location: a URL or a local path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// `http://` or `https://`.
    Url(String),
    /// A local file.
    Path(PathBuf),
}

impl Location {
    /// Reads a location as written in settings, flags or an index.
    pub fn parse(s: &str) -> Location {
        if let Some(p) = s.strip_prefix("file://") {
            return Location::Path(PathBuf::from(p));
        }
        if s.starts_with("http://") || s.starts_with("https://") {
            return Location::Url(s.to_string());
        }
        Location::Path(PathBuf::from(s))
    }

    /// `rel` as named from a file at this location: a URL or an absolute path as it is, else
    /// beside this one.
    pub fn join(&self, rel: &str) -> Location {
        let other = Location::parse(rel);
        match (&other, self) {
            (Location::Url(_), _) => other,
            (Location::Path(p), _) if p.is_absolute() => other,
            (Location::Path(_), Location::Url(base)) => {
                let dir = match base.rfind('/') {
                    Some(i) if i >= "https://".len() => &base[..=i],
                    _ => base.as_str(),
                };
                Location::Url(format!("{dir}{rel}"))
            }
            (Location::Path(p), Location::Path(base)) => Location::Path(
                base.parent()
                    .map(|d| d.join(p))
                    .unwrap_or_else(|| p.clone()),
            ),
        }
    }

    /// For messages.
    pub fn display(&self) -> String {
        match self {
            Location::Url(u) => u.clone(),
            Location::Path(p) => p.display().to_string(),
        }
    }
}

/// Reads what `at` holds, at most `limit` bytes.
pub fn fetch(at: &Location, policy: &FetchPolicy, limit: u64) -> Result<Vec<u8>> {
    match at {
        Location::Path(p) => {
            let meta =
                std::fs::metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
            if meta.len() > limit {
                bail!(
                    "{} is {} bytes, over the limit of {limit}",
                    p.display(),
                    meta.len()
                );
            }
            std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))
        }
        Location::Url(url) => {
            let plain = url.starts_with("http://");
            if plain && !policy.allow_http {
                bail!("{url} is plain HTTP, which anyone on the way can change; --allow-http (or allow_http = true in the settings) permits it");
            }
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(300)))
                .https_only(!plain)
                .max_redirects(5)
                .build()
                .into();
            let mut resp = agent.get(url).call().map_err(|e| match e {
                ureq::Error::StatusCode(code) => anyhow!("{url} answered HTTP {code}"),
                other => anyhow!("cannot fetch {url}: {other}"),
            })?;
            let mut out = Vec::new();
            resp.body_mut()
                .with_config()
                .limit(limit)
                .reader()
                .read_to_end(&mut out)
                .map_err(|e| anyhow!("reading {url}: {e} (the limit is {limit} bytes)"))?;
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_an_index_are_read_beside_it() {
        let url = Location::parse("https://example.org/idx/index.toml");
        assert_eq!(
            url.join("x-0.1.0.tar.gz"),
            Location::Url("https://example.org/idx/x-0.1.0.tar.gz".into())
        );
        assert_eq!(
            url.join("https://cdn.example.org/x.so"),
            Location::Url("https://cdn.example.org/x.so".into())
        );
        let path = Location::parse("/srv/idx/index.toml");
        assert_eq!(
            path.join("x.tar.gz"),
            Location::Path("/srv/idx/x.tar.gz".into())
        );
        assert_eq!(
            Location::parse("file:///srv/i.toml"),
            Location::Path("/srv/i.toml".into())
        );
    }

    #[test]
    fn plain_http_needs_leave_and_a_limit_holds() {
        let e = fetch(
            &Location::parse("http://127.0.0.1:9/index.toml"),
            &FetchPolicy::default(),
            10,
        )
        .unwrap_err();
        assert!(format!("{e}").contains("--allow-http"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("big");
        std::fs::write(&f, vec![0u8; 100]).unwrap();
        let e = fetch(&Location::Path(f), &FetchPolicy::default(), 10).unwrap_err();
        assert!(format!("{e}").contains("over the limit"), "{e}");
    }
}
