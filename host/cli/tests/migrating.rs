//! `docs/migrating.md` typed as written: `scripts/migrating.sh` runs every step of the
//! original's how-to with this binary and checks what each does (works, or is refused by name).

mod common;

use common::{bin, workspace};

/// The slow tier (a minute of launch scripts): `scripts/test.sh --fast` leaves it out.
mod slow {
    use super::*;

    #[test]
    fn every_step_of_the_original_how_to_does_what_the_migration_page_says() {
        let work = tempfile::tempdir().unwrap();
        let o = std::process::Command::new("bash")
            .arg(workspace().join("scripts/migrating.sh"))
            .current_dir(workspace())
            .env("OPENCLAW_HOST_BIN", bin())
            .env("WORK", work.path())
            // Plugins the page names are built when missing or stale, as a user's run would.
            .env("ALLOW_CARGO", "1")
            .env("OPENCLAW_HOME", work.path().join("home"))
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{out}\n{err}");
        let summary = out
            .lines()
            .find(|l| l.starts_with("migrating: ") && l.contains(" steps typed, "))
            .unwrap_or_else(|| panic!("no summary line: {out}"));
        // Every numbered step of the how-to is accounted for.
        let counts: Vec<u32> = summary
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect();
        assert_eq!(counts.iter().sum::<u32>(), 45, "{summary}");
    }
}
