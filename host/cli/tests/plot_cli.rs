//! `openclaw-host plot` as a user runs it: the real binary on training logs written to a
//! temporary folder, checked by the PNG it writes and what it prints.

mod common;

use std::path::Path;
use std::process::Output;

fn plot(dir: &Path, args: &[&str]) -> Output {
    common::host_command(dir)
        .arg("plot")
        .args(args)
        .output()
        .expect("run openclaw-host")
}

fn training_log(path: &Path, steps: u32, scale: f64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text: String = (1..=steps)
        .map(|s| {
            format!(
                "{{\"step\":{s},\"samples\":4,\"loss\":{},\"metrics\":{{\"clip_frac\":0.0,\"kl\":{}}},\"grad_norm\":0.8,\"lr\":0.0001,\"tokens\":300,\"trained_tokens\":120,\"micro_batches\":1,\"split_groups\":0,\"logprob_diff\":0.001,\"staleness\":0.0,\"step_time_s\":0.05}}\n",
                scale / s as f64,
                0.001 * s as f64
            )
        })
        .collect();
    // A log cut mid-write: plotted anyway, with a warning.
    text.push_str("{\"step\":");
    std::fs::write(path, text).unwrap();
}

/// Width and height from the PNG's IHDR chunk, after checking the signature.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is no PNG",
        path.display()
    );
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn plot_writes_a_png_next_to_the_log_and_prints_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs/opd/training.log");
    training_log(&log, 20, 1.0);

    let o = plot(dir.path(), &["runs/opd/training.log"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "stderr: {stderr}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "runs/opd/training.png"
    );
    assert!(
        stderr.contains("runs/opd/training.log:21: malformed JSON"),
        "stderr: {stderr}"
    );
    // 7 default panels (5 training fields, metrics.clip_frac, metrics.kl): a 3x3 grid.
    assert_eq!(
        png_size(&dir.path().join("runs/opd/training.png")),
        (3 * 560, 3 * 380)
    );
}

#[test]
fn plot_compares_runs_with_chosen_metrics() {
    let dir = tempfile::tempdir().unwrap();
    for (run, scale) in [("binary-rl", 1.0), ("opd", 0.5), ("combine", 0.25)] {
        training_log(&dir.path().join(run).join("training.log"), 10, scale);
    }
    let logs = [
        "binary-rl/training.log",
        "opd/training.log",
        "combine/training.log",
    ];
    let mut args = logs.to_vec();
    args.extend(["--metrics", "loss,metrics.kl", "--out", "out/compare.png"]);
    let o = plot(dir.path(), &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "out/compare.png");
    assert_eq!(
        png_size(&dir.path().join("out/compare.png")),
        (2 * 560, 380)
    );

    let mut args = logs.to_vec();
    args.extend(["--metrics", "loss,kl"]);
    let o = plot(dir.path(), &args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("unknown metric `kl`") && stderr.contains("metrics.kl"),
        "stderr: {stderr}"
    );

    let o = plot(dir.path(), &["missing/training.log"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("missing/training.log"), "stderr: {stderr}");
}
