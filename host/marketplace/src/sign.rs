//! minisign signatures over index records: a publisher signs each record with a secret key, an
//! installer checks it with the public keys it trusts (cargo-binstall's scheme).

use super::index::Record;
use anyhow::{anyhow, bail, Context, Result};
use minisign::{KeyPair, PublicKey, SecretKey, SecretKeyBox, SignatureBox};
use std::io::Cursor;
use std::path::{Path, PathBuf};

/// What checking a record's signature found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked {
    /// Signed by this trusted key (its base64 form).
    Trusted(String),
    /// Signed, and no key is trusted to check it with.
    Unchecked,
    /// Not signed.
    Unsigned,
}

/// Checks `record`'s signature against `trusted` (public keys, base64 as minisign prints
/// them). A signature that no trusted key verifies is an error, and so is one that cannot be
/// read; an unsigned record is [`Checked::Unsigned`] (the caller decides whether to accept it).
pub fn check(record: &Record, trusted: &[String]) -> Result<Checked> {
    if record.signature.trim().is_empty() {
        return Ok(Checked::Unsigned);
    }
    let sig = SignatureBox::from_string(&record.signature)
        .map_err(|e| anyhow!("{}: its signature cannot be read: {e}", record.id()))?;
    if trusted.is_empty() {
        return Ok(Checked::Unchecked);
    }
    let bytes = record.signed_bytes();
    for key in trusted {
        let pk = public_key(key)?;
        if minisign::verify(&pk, &sig, Cursor::new(&bytes), true, false, false).is_ok() {
            return Ok(Checked::Trusted(key.trim().to_string()));
        }
    }
    bail!(
        "{}: its signature does not verify with any trusted key ({} trusted); the record was changed after it was signed, or signed by another key",
        record.id(),
        trusted.len()
    )
}

/// Reads a public key: its base64 form, or a minisign `.pub` file's text.
pub fn public_key(text: &str) -> Result<PublicKey> {
    let text = text.trim();
    let line = text
        .lines()
        .rfind(|l| !l.trim().is_empty() && !l.starts_with("untrusted comment:"))
        .unwrap_or(text)
        .trim();
    PublicKey::from_base64(line).map_err(|e| anyhow!("`{line}` is not a minisign public key: {e}"))
}

/// Signs `record` (its [`Record::signed_bytes`]) with `secret`, setting its signature.
pub fn sign(record: &mut Record, secret: &SecretKey) -> Result<()> {
    record.signature.clear();
    let bytes = record.signed_bytes();
    let comment = format!("openclaw-host plugin {}", record.id());
    let sig = minisign::sign(None, secret, Cursor::new(bytes), Some(&comment), None)
        .map_err(|e| anyhow!("cannot sign {}: {e}", record.id()))?;
    record.signature = sig.into_string();
    Ok(())
}

/// Reads an unencrypted minisign secret key file (as [`keygen`] writes).
pub fn read_secret_key(path: &Path) -> Result<SecretKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the secret key {}", path.display()))?;
    SecretKeyBox::from_string(&text)
        .and_then(|b| b.into_unencrypted_secret_key())
        .map_err(|e| {
            anyhow!(
                "{} is not an unencrypted minisign secret key: {e}",
                path.display()
            )
        })
}

/// Writes a new key pair as `PREFIX.key` (secret, unencrypted, mode 0600) and `PREFIX.pub`;
/// returns the public key's base64 form and the two paths. Existing files are not replaced.
pub fn keygen(prefix: &Path) -> Result<(String, PathBuf, PathBuf)> {
    let secret_path = prefix.with_extension("key");
    let public_path = prefix.with_extension("pub");
    for p in [&secret_path, &public_path] {
        if p.exists() {
            bail!("{} already exists; choose another name", p.display());
        }
    }
    let KeyPair { pk, sk } = KeyPair::generate_unencrypted_keypair()
        .map_err(|e| anyhow!("cannot make a key pair: {e}"))?;
    let secret_text = sk
        .to_box(None)
        .map_err(|e| anyhow!("cannot write the secret key: {e}"))?
        .to_string();
    let public_text = pk
        .to_box()
        .map_err(|e| anyhow!("cannot write the public key: {e}"))?
        .to_string();
    write_private(&secret_path, &secret_text)?;
    std::fs::write(&public_path, public_text)
        .with_context(|| format!("cannot write {}", public_path.display()))?;
    Ok((pk.to_base64(), secret_path, public_path))
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::tests::record;

    #[test]
    fn a_signed_record_verifies_and_any_change_breaks_it() {
        let dir = tempfile::tempdir().unwrap();
        let (public, secret_path, public_path) = keygen(&dir.path().join("me")).unwrap();
        let secret = read_secret_key(&secret_path).unwrap();
        let mut r = record("x", "1.0.0");
        assert_eq!(
            check(&r, std::slice::from_ref(&public)).unwrap(),
            Checked::Unsigned
        );
        sign(&mut r, &secret).unwrap();
        assert_eq!(
            check(&r, std::slice::from_ref(&public)).unwrap(),
            Checked::Trusted(public.clone())
        );
        // The .pub file's text is a key too.
        let pub_text = std::fs::read_to_string(&public_path).unwrap();
        assert!(matches!(
            check(&r, &[pub_text]).unwrap(),
            Checked::Trusted(_)
        ));
        assert_eq!(check(&r, &[]).unwrap(), Checked::Unchecked);
        // Another key does not verify it.
        let (other, _, _) = keygen(&dir.path().join("other")).unwrap();
        let e = check(&r, &[other]).unwrap_err();
        assert!(format!("{e}").contains("does not verify"), "{e}");
        // A changed checksum does not either.
        let mut tampered = r.clone();
        tampered.checksum = "cd".repeat(32);
        let e = check(&tampered, std::slice::from_ref(&public)).unwrap_err();
        assert!(format!("{e}").contains("does not verify"), "{e}");
        let mut garbage = r.clone();
        garbage.signature = "not a signature".into();
        let e = check(&garbage, &[public]).unwrap_err();
        assert!(format!("{e}").contains("cannot be read"), "{e}");
        let e = keygen(&dir.path().join("me")).unwrap_err();
        assert!(format!("{e}").contains("already exists"), "{e}");
    }
}
