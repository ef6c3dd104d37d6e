//! More than one GPU: `--list-gpus` (both orders, paired by UUID), `--gpu
//! all` (one interop per device, frames split, merged byte-equal to one
//! device's run). Without two GPUs, lavapipe's driver listed twice
//! (`VK_ICD_FILENAMES`) makes two Vulkan devices of one process; on NVIDIA
//! machines with two or more GPUs, `CUDA_VISIBLE_DEVICES` is permuted,
//! restricted and given as UUIDs, and every run must pair by UUID.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;

pub fn register(t: &mut Tests) {
    t.push(gated("gpu_all_splits_the_frames_over_two_devices_and_merges_byte_equal", no_lavapipe, || {
        gpu_all_on_two_lavapipes(&[])
    }));
    t.push(gated("gpu_all_within_a_shard", no_lavapipe, || gpu_all_on_two_lavapipes(&["--shard", "1/2"])));
    t.push(gated("list_gpus_shows_every_device", no_lavapipe, list_gpus_lavapipe));
    t.push(("gpu_all_bad_input".into(), Box::new(|| pass(gpu_all_bad_input()))));
    t.push(gated("bench_gpu_all_on_two_devices", no_lavapipe, bench_on_two_lavapipes));
    t.push(gated("cuda_pairing_survives_cuda_visible_devices", fewer_than_two_nvidia, cuda_pairing));
    t.push(gated("cuda_gpu_all_one_interop_per_gpu", fewer_than_two_nvidia, cuda_gpu_all));
}

/// Mesa's lavapipe ICD file, if installed (`lvp_icd.x86_64.json` in Mesa 22, `lvp_icd.json` in 25).
fn lavapipe_icd() -> Option<PathBuf> {
    ["lvp_icd.x86_64.json", "lvp_icd.json"]
        .iter()
        .map(|name| PathBuf::from("/usr/share/vulkan/icd.d").join(name))
        .find(|icd| icd.is_file())
}

fn no_lavapipe() -> Option<String> {
    lavapipe_icd().is_none().then(|| "no lavapipe ICD (mesa-vulkan-drivers)".into())
}

/// `VK_ICD_FILENAMES` naming lavapipe twice (the loader then lists two devices).
fn two_lavapipes() -> Result<String, String> {
    let icd = lavapipe_icd().ok_or("no lavapipe")?;
    let copy = tmp("lvp-twin.json");
    std::fs::copy(&icd, &copy).map_err(|e| e.to_string())?;
    Ok(format!("{}:{}", icd.display(), copy.display()))
}

fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(bin()).args(args).envs(env.iter().copied()).output().expect("cannot start vkcuda")
}

/// 9 verified, validated frames with `--gpu all` over two lavapipe devices:
/// a line per device naming its part, and the files byte-equal to the same
/// run on one device.
fn gpu_all_on_two_lavapipes(extra: &[&str]) -> Outcome {
    let icds = two_lavapipes()?;
    let env = [("VK_ICD_FILENAMES", icds.as_str())];
    let (all, one) = (tmp("gpu-all"), tmp("gpu-one"));
    let base =
        ["--headless", "--producer", "cpu", "--size", "61x33", "--frames", "9", "--verify", "--validate"];
    let dump = |out: &Path, more: &[&str]| -> Result<String, String> {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        args.extend_from_slice(more);
        args.extend(["--out", out.to_str().ok_or("path")?]);
        let o = run_env(&args, &env);
        let (stdout, stderr) = text(&o);
        if !o.status.success()
            || !stdout.contains("validation: 0 errors, 0 warnings")
            || !stdout.contains(" 0 mismatches")
        {
            return Err(format!("{more:?}: exit {:?}\n{stdout}{stderr}", o.status.code()));
        }
        Ok(stdout)
    };
    let said = dump(&all, &["--gpu", "all"])?;
    dump(&one, &["--gpu", "0"])?;
    // 9 frames (or the shard's 4..9) in two equal, contiguous parts.
    let parts = match extra.is_empty() {
        true => ["GPU 0: frames 0..4: 4 frames", "GPU 1: frames 4..9: 5 frames"],
        false => ["GPU 0: frames 4..6: 2 frames", "GPU 1: frames 6..9: 3 frames"],
    };
    if !parts.iter().all(|p| said.contains(p)) {
        return Err(format!("expected {parts:?}\n{said}"));
    }
    let (got, want) = (files(&all)?, files(&one)?);
    if got != want {
        let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
        return Err(format!(
            "--gpu all wrote {:?}, one device {:?} (or other bytes)",
            names(&got),
            names(&want)
        ));
    }
    let _ = std::fs::remove_dir_all(&all);
    let _ = std::fs::remove_dir_all(&one);
    Ok(())
}

/// `--list-gpus` lists both lavapipe devices, says CUDA has none, exits 0.
fn list_gpus_lavapipe() -> Outcome {
    let icds = two_lavapipes()?;
    let o = run_env(&["--list-gpus"], &[("VK_ICD_FILENAMES", icds.as_str())]);
    let (stdout, stderr) = text(&o);
    let rows = stdout.lines().filter(|l| l.contains("llvmpipe")).count();
    if !o.status.success()
        || rows != 2
        || !stdout.contains("Vulkan order")
        || !stdout.contains("CUDA: no device")
    {
        return Err(format!("exit {:?}, {rows} llvmpipe rows\n{stdout}{stderr}", o.status.code()));
    }
    Ok(())
}

/// `--gpu all` in the viewer: exit 2, one clear line.
fn gpu_all_bad_input() -> Outcome {
    let o = run(&["--gpu", "all", "--producer", "cpu"]);
    let (stdout, stderr) = text(&o);
    if o.status.code() != Some(2)
        || !stderr.contains("--gpu all runs one interop per GPU in a --headless run")
    {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    Ok(())
}

/// `vkcuda --gpu all bench` on two devices: each repeat runs on both at once;
/// the report names both GPUs and measures a rate.
fn bench_on_two_lavapipes() -> Outcome {
    let icds = two_lavapipes()?;
    let json = tmp("bench-two.json");
    let args = [
        "--producer",
        "cpu",
        "--gpu",
        "all",
        "--validate",
        "bench",
        "--variants",
        "cpu",
        "--loads",
        "cheap",
        "--queues",
        "compute",
        "--sizes",
        "64x48",
        "--repeats",
        "2",
        "--seconds",
        "0.2",
        "--json",
        json.to_str().ok_or("path")?,
    ];
    let o = run_env(&args, &[("VK_ICD_FILENAMES", icds.as_str())]);
    let (stdout, stderr) = text(&o);
    let report = std::fs::read_to_string(&json).map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    let _ = std::fs::remove_file(&json);
    let report: serde_json::Value = serde_json::from_str(&report).map_err(|e| e.to_string())?;
    let fps = report["rows"][0]["fps"].as_f64().unwrap_or(0.0);
    let named = report["device"].as_str().is_some_and(|d| d.starts_with("2 GPUs: llvmpipe"));
    if !o.status.success() || !named || fps <= 0.0 || !stdout.contains("validation: 0 errors, 0 warnings") {
        return Err(format!(
            "exit {:?}, device named: {named}, fps {fps}\n{stdout}{stderr}",
            o.status.code()
        ));
    }
    Ok(())
}

/// Why the multi-GPU tests cannot run here.
fn fewer_than_two_nvidia() -> Option<String> {
    no_nvidia().or_else(|| {
        let o = Command::new(bin()).arg("--list-gpus").output().ok()?;
        let cuda = table(&text(&o).0).1.len();
        (cuda < 2).then(|| format!("{cuda} CUDA device(s): needs 2"))
    })
}

/// `--list-gpus`' two tables: (Vulkan index, UUID, CUDA twin) rows and
/// (CUDA ordinal, UUID, Vulkan twin) rows; twins `None` for "-".
type Row = (usize, String, Option<usize>);

fn table(out: &str) -> (Vec<Row>, Vec<Row>) {
    let (mut vulkan, mut cuda) = (Vec::new(), Vec::new());
    let mut into_cuda = false;
    for line in out.lines() {
        if line.starts_with("CUDA order") {
            into_cuda = true;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let (Some(first), Some(last)) = (words.first(), words.last()) else { continue };
        let Ok(index) = first.parse::<usize>() else { continue };
        let Some(uuid) = words.iter().find(|w| w.len() == 36 && w.matches('-').count() == 4) else {
            continue;
        };
        let row = (index, uuid.to_string(), last.parse().ok());
        if into_cuda {
            cuda.push(row);
        } else {
            vulkan.push(row);
        }
    }
    (vulkan, cuda)
}

/// Under each `CUDA_VISIBLE_DEVICES` (unset, `1,0`, `1`, the second GPU's
/// UUID, both UUIDs swapped): every pair in `--list-gpus` has one UUID on
/// both sides, the CUDA order is the one asked for, hidden NVIDIA devices are
/// named in one line; and a verified run on each Vulkan device with a twin
/// imports and renders (a wrong pair fails the import or the pixels).
fn cuda_pairing() -> Outcome {
    let plain = Command::new(bin()).arg("--list-gpus").output().map_err(|e| e.to_string())?;
    let (_, cuda) = table(&text(&plain).0);
    let uuid_of = |ordinal: usize| cuda.iter().find(|r| r.0 == ordinal).map(|r| format!("GPU-{}", r.1));
    let (u0, u1) = (uuid_of(0).ok_or("no CUDA 0")?, uuid_of(1).ok_or("no CUDA 1")?);
    let settings = ["1,0".to_string(), "1".into(), u1.clone(), format!("{u1},{u0}")];
    for cvd in std::iter::once(None).chain(settings.iter().map(Some)) {
        let env: Vec<(&str, &str)> = cvd.map(|v| ("CUDA_VISIBLE_DEVICES", v.as_str())).into_iter().collect();
        let o = Command::new(bin())
            .arg("--list-gpus")
            .envs(env.iter().copied())
            .output()
            .map_err(|e| e.to_string())?;
        let (stdout, stderr) = text(&o);
        let (vk, cu) = table(&stdout);
        let why = |w: &str| format!("CUDA_VISIBLE_DEVICES={cvd:?}: {w}\n{stdout}{stderr}");
        for (index, uuid, twin) in &vk {
            if let Some(t) = twin {
                let row = cu.iter().find(|r| r.0 == *t).ok_or_else(|| why("a twin CUDA lists no row for"))?;
                if &row.1 != uuid || row.2 != Some(*index) {
                    return Err(why(&format!("Vulkan {index} paired with CUDA {t} of another UUID")));
                }
            }
        }
        // The CUDA order asked for: `1,0` and the swapped UUIDs put the second GPU first.
        let first = cu.first().map(|r| format!("GPU-{}", r.1));
        let expected_first = if cvd.is_some() { Some(u1.clone()) } else { Some(u0.clone()) };
        if first != expected_first {
            return Err(why(&format!("CUDA 0 is {first:?}, expected {expected_first:?}")));
        }
        // `1` and one UUID hide the other GPU: named in one line.
        let restricted = cvd.is_some_and(|v| !v.contains(','));
        if restricted && stdout.lines().filter(|l| l.contains("no visible CUDA twin")).count() != 1 {
            return Err(why("the hidden device is not named"));
        }
        for (index, _, twin) in vk.iter().filter(|r| r.2.is_some()) {
            let out = tmp(&format!("pair-{index}"));
            let args = ["--headless", "--gpu", &index.to_string(), "--producer", "cuda", "--frames", "12"];
            let o = Command::new(bin())
                .args(args)
                .args(["--size", "97x61", "--verify", "--validate", "--out", out.to_str().ok_or("path")?])
                .envs(env.iter().copied())
                .output()
                .map_err(|e| e.to_string())?;
            let (so, se) = text(&o);
            if !o.status.success()
                || !so.contains(" 0 mismatches")
                || !so.contains("validation: 0 errors, 0 warnings")
            {
                return Err(why(&format!(
                    "Vulkan {index} (CUDA {twin:?}): exit {:?}\n{so}{se}",
                    o.status.code()
                )));
            }
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    Ok(())
}

/// `--gpu all` with the CUDA producer on every GPU: a line per GPU, the
/// frames split, verified and validated, the files byte-equal to one GPU's.
fn cuda_gpu_all() -> Outcome {
    let (all, one) = (tmp("cuda-gpu-all"), tmp("cuda-gpu-one"));
    let base =
        ["--headless", "--producer", "cuda", "--size", "97x61", "--frames", "40", "--verify", "--validate"];
    let dump = |out: &Path, gpu: &str| -> Result<String, String> {
        let o = run(&[&base[..], &["--gpu", gpu, "--out", out.to_str().ok_or("path")?]].concat());
        let (stdout, stderr) = text(&o);
        if !o.status.success()
            || !stdout.contains(" 0 mismatches")
            || !stdout.contains("validation: 0 errors, 0 warnings")
        {
            return Err(format!("--gpu {gpu}: exit {:?}\n{stdout}{stderr}", o.status.code()));
        }
        Ok(stdout)
    };
    let said = dump(&all, "all")?;
    dump(&one, "0")?;
    let gpus = said.lines().filter(|l| l.trim_start().starts_with("GPU ")).count();
    if gpus < 2 {
        return Err(format!("{gpus} GPU lines\n{said}"));
    }
    if files(&all)? != files(&one)? {
        return Err("--gpu all wrote other files than one GPU".into());
    }
    let _ = std::fs::remove_dir_all(&all);
    let _ = std::fs::remove_dir_all(&one);
    Ok(())
}
