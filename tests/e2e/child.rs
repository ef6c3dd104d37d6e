//! The producer in a child process (`--producer-process child`) on any
//! Vulkan device that exports memory: the CPU reference child imports the
//! frames into a Vulkan device of its own and writes them; the run signals
//! for it. Frames verified, validated; a child killed at any frame ends the
//! run with its cause (exit 1), leaving only whole, correct files. (A CUDA
//! child, and a served run that recovers from a kernel's fault, need an
//! NVIDIA GPU: docs/results/2026-11-27-compute-draw/gpu.sh.)

use crate::common::scene::{Scene, SceneKind};
use crate::common::*;
use crate::headless::headless;

/// The child's frames in both schemes, copied and drawn, verified and validated.
fn reference_child(sync: &str, extra: &[&str]) -> Outcome {
    let mut args = vec!["--producer-process", "child", "--layout", "buffer"];
    args.extend(extra);
    headless("cpu", sync, "2", SceneKind::Julia, &args)
}

/// A child killed before frame `kill`: exit 1, the cause named, no
/// validation message, and only frames before `kill` on disk, each whole and
/// equal to the reference.
fn killed_child(kill: u64) -> Outcome {
    let out = tmp(&format!("child-killed-{kill}"));
    let (w, h) = (48, 32);
    let inject = format!("child-kill@{kill}");
    let o = run(&[
        "--headless",
        "--producer",
        "cpu",
        "--producer-process",
        "child",
        "--layout",
        "buffer",
        "--scene",
        "julia",
        "--cost",
        "48",
        "--size",
        &format!("{w}x{h}"),
        "--frames",
        "24",
        "--validate",
        "--verify",
        "--out",
        out.to_str().ok_or("path")?,
        "--inject",
        &inject,
    ]);
    let (stdout, stderr) = text(&o);
    let cause = format!("the producer's process ended before it made frame {kill} (killed by signal 9)");
    if o.status.code() != Some(1) || !stderr.contains(&cause) || stderr.contains("panicked") {
        return Err(format!("exit {:?}, expected 1 and '{cause}'\n{stdout}{stderr}", o.status.code()));
    }
    if stderr.contains("validation error") || stderr.contains("validation warning") {
        return Err(format!("validation messages:\n{stderr}"));
    }
    let written: Vec<u64> = match std::fs::read_dir(&out) {
        Ok(dir) => dir
            .filter_map(|e| {
                e.ok()?.file_name().to_str()?.strip_prefix("frame_")?.strip_suffix(".png")?.parse().ok()
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    let mut written = written;
    written.sort_unstable();
    if written.iter().any(|&f| f >= kill) {
        return Err(format!("frames at or past the kill at {kill} written: {written:?}"));
    }
    if !written.is_empty() {
        check_pngs(&out, Scene { kind: SceneKind::Julia, width: w, height: h, cost: 48 }, &written)?;
    }
    println!("  killed before frame {kill}: exit 1, {} whole frames verified", written.len());
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

pub fn register(tests: &mut Tests) {
    for sync in ["split", "shared"] {
        tests.push((
            format!("child_reference_{sync}_copied"),
            Box::new(move || pass(reference_child(sync, &[]))),
        ));
        tests.push((
            format!("child_reference_{sync}_drawn_rgba16f"),
            Box::new(move || {
                pass(reference_child(
                    sync,
                    &["--format", "rgba16f", "--consume", "draw", "--target-size", "97x61"],
                ))
            }),
        ));
    }
    // Killed at 18 different frames: a hazard of the stop that hits one kill in six shows.
    tests.push((
        "a_killed_child_ends_the_run_with_its_cause_18_frames".into(),
        Box::new(|| {
            pass((0..18).map(|k| killed_child(k * 13 % 23)).collect::<Result<Vec<()>, String>>().map(|_| ()))
        }),
    ));
}
