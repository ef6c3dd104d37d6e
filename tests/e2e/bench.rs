//! `vkcuda bench`: its outputs, SIGINT, and bad options.

use std::process::Command;

use crate::common::*;

/// `vkcuda bench` at small sizes: a table, JSON with every measure, an SVG
/// chart, and the README table script on that JSON. `cuda` says whether the
/// CUDA variants must run (else they must say "skipped: no CUDA device").
pub fn bench(cuda: bool) -> Outcome {
    let dir = tmp(if cuda { "bench-cuda" } else { "bench" });
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (json, chart) = (dir.join("bench.json"), dir.join("bench.svg"));
    let variants = "split-1,split-2,shared-2,staging,cpu";
    let o = run(&[
        "--validate",
        "bench",
        "--variants",
        variants,
        "--sizes",
        "96x64,128x72",
        "--queues",
        "compute,transfer",
        "--repeats",
        "2",
        "--seconds",
        "0.1",
        "--warmup",
        "0.05",
        "--json",
        json.to_str().ok_or("path")?,
        "--chart",
        chart.to_str().ok_or("path")?,
    ]);
    let (stdout, stderr) = text(&o);
    if !o.status.success() || stderr.contains("panicked") {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let rows = report["rows"].as_array().ok_or("no rows")?;
    if rows.len() != 2 * 2 * 2 * 5 {
        return Err(format!("{} rows, expected 40", rows.len()));
    }
    let mut measured = 0;
    for r in rows {
        let needs_cuda = r["variant"] != "cpu";
        if needs_cuda && !cuda {
            if r["skipped"] != "no CUDA device" {
                return Err(format!("{r} was not skipped"));
            }
            continue;
        }
        for key in [
            "fps",
            "us_per_frame",
            "render_us",
            "vulkan_us",
            "producer_cpu_us",
            "consumer_cpu_us",
            "latency_us",
        ] {
            let v = r[key].as_f64().ok_or_else(|| format!("{key} missing in {r}"))?;
            if !(v > 0.0 && v < 1e7) {
                return Err(format!("{key} = {v} in {r}"));
            }
        }
        let fps = r["fps"].as_f64().unwrap_or(0.0);
        let us = r["us_per_frame"].as_f64().unwrap_or(0.0);
        if (fps * us - 1e6).abs() > 1.0 || r["fps_repeats"].as_array().map(Vec::len) != Some(2) {
            return Err(format!("inconsistent row {r}"));
        }
        if r["load"] == "balanced" && r["copies"].as_u64().unwrap_or(0) < 1 {
            return Err(format!("balanced row without copies: {r}"));
        }
        measured += 1;
        let text = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_string();
        let frame = format!("{}/{}", text(&r["format"]), text(&r["layout"]));
        let want = [text(&r["queue"]), text(&r["variant"]), frame, text(&r["size"])];
        let found = stdout.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.len() > 5 && words[..4] == want && words[5].parse::<f64>().is_ok()
        });
        if !found {
            return Err(format!("the table lacks a row for {want:?}:\n{stdout}"));
        }
    }
    if !stdout.contains("validation: 0 errors, 0 warnings") {
        return Err(format!("validation messages:\n{stdout}{stderr}"));
    }
    let svg = std::fs::read_to_string(&chart).map_err(|e| e.to_string())?;
    if !svg.starts_with("<svg")
        || !svg.trim_end().ends_with("</svg>")
        || svg.matches("<rect").count() != measured + 1
    {
        return Err(format!(
            "chart has {} bars for {measured} measured rows",
            svg.matches("<rect").count() - 1
        ));
    }
    // The README table script, on a copy of a README with the markers.
    let readme = dir.join("README.md");
    std::fs::write(
        &readme,
        "# x
<!-- bench-table:begin -->
old
<!-- bench-table:end -->
tail
",
    )
    .map_err(|e| e.to_string())?;
    let script = crate_root().join("scripts/bench-table.py");
    let o = Command::new("python3")
        .arg(&script)
        .arg(&json)
        .arg("--readme")
        .arg(&readme)
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    let table = std::fs::read_to_string(&readme).map_err(|e| e.to_string())?;
    let cpu_rows = table.lines().filter(|l| l.contains("| cpu |")).count();
    if !o.status.success() || table.contains("\nold\n") || !table.ends_with("tail\n") || cpu_rows != 8 {
        return Err(format!("bench-table.py: {:?}\n{table}", text(&o)));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Bad bench input: exit 2, one line naming the problem, no file written.
pub fn bench_usage_error(args: &[&str], needle: &str) -> Outcome {
    let mut all = vec!["bench", "--sizes", "32x32", "--repeats", "1", "--seconds", "0.01"];
    all.extend(args);
    let o = run(&all);
    let (stdout, stderr) = text(&o);
    if o.status.code() != Some(2) || !stderr.to_lowercase().contains(&needle.to_lowercase()) {
        return Err(format!("exit {:?}, expected 2 naming '{needle}'\n{stdout}{stderr}", o.status.code()));
    }
    if stderr.contains("panicked") || !stdout.is_empty() {
        return Err(format!("panicked or printed a table: {stdout}{stderr}"));
    }
    Ok(())
}

/// SIGINT during a bench, once its first row is measured (stderr says
/// "[1/N]"): exit 130 and no JSON (never a partial one).
pub fn bench_interrupt() -> Outcome {
    use std::io::{BufRead, BufReader};
    let dir = tmp("bench-sigint");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let json = dir.join("b.json");
    let mut child = Command::new(bin())
        .args(["bench", "--variants", "cpu", "--sizes", "64x64", "--seconds", "1", "--repeats", "20"])
        .arg("--json")
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // stderr line by line on a thread, so the test can wait for the state "a row is done".
    let err = child.stderr.take().ok_or("no stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut stderr = String::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let first_row = line.starts_with("[1/");
                stderr += &(line + "\n");
                if first_row {
                    break;
                }
            }
            Err(_) => {
                let o = wait_bounded(child, 1)?;
                return Err(format!("no '[1/' progress line within 60 s\n{}{stderr}", text(&o).0));
            }
        }
    }
    send_signal(child.id(), "INT")?;
    let o = wait_bounded(child, 60)?;
    let _ = reader.join();
    stderr.extend(rx.try_iter().map(|l| l + "\n"));
    let stdout = text(&o).0;
    let left: Vec<_> = std::fs::read_dir(&dir).map_err(|e| e.to_string())?.collect();
    if o.status.code() != Some(130) || !left.is_empty() || !stderr.contains("interrupted by signal 2") {
        return Err(format!("exit {:?}, {} files left\n{stdout}{stderr}", o.status.code(), left.len()));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Registers this area's tests.
pub fn register(tests: &mut Tests) {
    // With an NVIDIA GPU every variant must run; without, the CUDA ones must say why not.
    tests.push((
        "bench_writes_table_json_chart_and_readme_table".into(),
        Box::new(|| pass(bench(no_nvidia().is_none()))),
    ));
    tests.push(("bench_sigint_writes_nothing".into(), Box::new(|| pass(bench_interrupt()))));
    let bad_bench: Vec<(Vec<&'static str>, &'static str)> = vec![
        (vec!["--chart", "/tmp/vkcuda-chart.png"], "svg"),
        (vec!["--variants", "split-9"], "split-9"),
        (vec!["--variants", "teapot"], "teapot"),
        (vec!["--seconds=-1"], "seconds"),
        (vec!["--sizes", "10"], "WIDTHxHEIGHT"),
        (vec!["--queues", "video"], "video"),
        (vec!["--json", "/proc/vkcuda-no/b.json"], "cannot write"),
        (vec!["--json", "/tmp"], "folder"),
    ];
    for (args, needle) in bad_bench {
        let name = format!("bad_bench_input_{}", args.join("_").replace(['/', '-', '.'], ""));
        tests.push((name, Box::new(move || pass(bench_usage_error(&args, needle)))));
    }
}
