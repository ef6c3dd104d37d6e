//! SIGINT and SIGTERM mid-run, and graceful stops repeated at varying points.

use std::process::Command;

use crate::common::scene::{Scene, SceneKind};

use crate::common::*;

/// A graceful stop (SIGINT) at a random point, 30 times, each under
/// validation: the stop consumes what the producer made beyond it, a race
/// between the two sides that one run cannot cover.
pub fn stop_repeatedly(producer: &str) -> Outcome {
    for run in 0..30 {
        let out = tmp(&format!("stop-{producer}-{run}"));
        let child = Command::new(bin())
            .args([
                "--headless",
                "--producer",
                producer,
                "--frames",
                "1000000",
                "--size",
                "64x36",
                "--validate",
            ])
            .args(["--buffers", ["1", "2", "3"][run % 3], "--sync", ["split", "shared"][run % 2]])
            .args(["--dump-every", "1", "--out", out.to_str().ok_or("path")?])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        // Vary the stop point: after 1 to 15 frames were written.
        let result = wait_for_pngs(&out, 1 + (run * 7) % 15, 30);
        // The run may have ended by itself already: then kill fails, and the exit code tells.
        let _ = send_signal(child.id(), "INT");
        let o = wait_bounded(child, 30)?;
        let (stdout, stderr) = text(&o);
        let _ = std::fs::remove_dir_all(&out);
        result?;
        if o.status.code() != Some(130) || !stdout.contains("validation: 0 errors, 0 warnings") {
            return Err(format!("stop {run}: exit {:?}\n{stdout}{stderr}", o.status.code()));
        }
    }
    Ok(())
}

pub fn interrupt(producer: &str, signal: &str, number: i32) -> Outcome {
    let out = tmp(&format!("{signal}-{producer}"));
    let child = Command::new(bin())
        .args(["--headless", "--producer", producer, "--frames", "1000000", "--size", "160x90", "--validate"])
        .args(["--out", out.to_str().ok_or("path")?])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Stop it mid-run: once frames are flowing (the first whole PNG is there), not after a time.
    let result = wait_for_pngs(&out, 1, 30).and_then(|()| send_signal(child.id(), signal));
    let o = child.wait_with_output().map_err(|e| e.to_string())?;
    let (stdout, _) = ended_by_signal(&o, result, number)?;
    let mut frames: Vec<u64> = Vec::new();
    for e in std::fs::read_dir(&out).map_err(|e| e.to_string())? {
        let name = e.map_err(|e| e.to_string())?.file_name().to_string_lossy().into_owned();
        let frame =
            name.strip_prefix("frame_").and_then(|n| n.strip_suffix(".png")).and_then(|n| n.parse().ok());
        frames.push(frame.ok_or_else(|| format!("stray file {name} in --out"))?);
    }
    frames.sort_unstable();
    if frames.is_empty() {
        return Err("no frame written before the signal".into());
    }
    if frames.iter().enumerate().any(|(i, &f)| f != i as u64) {
        return Err(format!("frames missing: {} files up to frame {:?}", frames.len(), frames.last()));
    }
    // Every consumed frame was dumped, and the summary counts exactly those.
    let said = format!("stopped after {} frames", frames.len());
    if !stdout.contains(&said) {
        return Err(format!("{} PNGs, but the summary does not say '{said}':\n{stdout}", frames.len()));
    }
    let scene = Scene { kind: SceneKind::Gradient, width: 160, height: 90, cost: 64 };
    check_pngs(&out, scene, &frames)?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// Registers this area's tests.
pub fn register(tests: &mut Tests) {
    tests.push(("graceful_stop_30_times_validated_cpu".into(), Box::new(|| pass(stop_repeatedly("cpu")))));
    tests.push(gated("cuda_graceful_stop_30_times_validated", no_nvidia, || stop_repeatedly("cuda")));
    tests.push(("sigint_stops_cleanly_cpu".into(), Box::new(|| pass(interrupt("cpu", "INT", 2)))));
    tests.push(("sigterm_stops_cleanly_cpu".into(), Box::new(|| pass(interrupt("cpu", "TERM", 15)))));
    tests.push(gated("sigint_stops_cleanly_cuda", no_nvidia, || interrupt("cuda", "INT", 2)));
    tests.push(gated("sigterm_stops_cleanly_cuda", no_nvidia, || interrupt("cuda", "TERM", 15)));
}
