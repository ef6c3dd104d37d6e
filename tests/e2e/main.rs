//! End-to-end tests of the `vkcuda` binary: headless runs on whatever Vulkan
//! device is there (lavapipe in CI), the viewer in a real X window, the bench,
//! bad input and signals, and, where an NVIDIA GPU exists, the CUDA producer. A
//! test that needs what the machine lacks is reported as "skipped: <reason>",
//! never as passed. One file per area; shared helpers in tests/common/.
//!
//! Custom harness (`harness = false`): prints one line per test and closes
//! with "e2e: N passed, N failed, N skipped". `VKCUDA_BIN` overrides the
//! binary (scripts/gpu-test.sh runs a carried one), `VKCUDA_ROOT` the crate
//! root the scripts are found in; a filter may follow (comma-separated: a
//! part of a test's name, or `area=NAME`); `--list` prints each test's area
//! and name without running any.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod bench;
mod browser;
mod child;
mod gpus;
mod headless;
mod kernels;
mod links;
mod shard;
mod signals;
mod wayland;
mod window;

use common::{Tests, Verdict};

/// An area's registration of its tests.
type Register = fn(&mut Tests);

/// The areas, in the order their tests run: one file each.
const AREAS: [(&str, Register); 12] = [
    ("headless", headless::register),
    ("child", child::register),
    ("signals", signals::register),
    ("window", window::register),
    ("wayland", wayland::register),
    ("bench", bench::register),
    ("bad_input", bad_input::register),
    ("kernels", kernels::register),
    ("shard", shard::register),
    ("gpus", gpus::register),
    ("browser", browser::register),
    ("links", links::register),
];

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let mut tests: Tests = Vec::new();
    let mut area_of = Vec::new();
    for (area, register) in AREAS {
        register(&mut tests);
        area_of.resize(tests.len(), area);
    }
    // --list: each test's area and name, none run (docs/testing.md counts these).
    if std::env::args().any(|a| a == "--list") {
        tests.iter().zip(&area_of).for_each(|((name, _), area)| println!("{area} {name}"));
        return;
    }

    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for ((name, test), area) in tests.iter().zip(&area_of) {
        if filter.as_ref().is_some_and(|f| !chosen(f, area, name)) {
            continue;
        }
        match test() {
            Verdict::Pass => {
                passed += 1;
                println!("test {name} ... ok");
            }
            Verdict::Skip(why) => {
                skipped += 1;
                println!("test {name} ... skipped: {why}");
            }
            Verdict::Fail(why) => {
                failed += 1;
                println!("test {name} ... FAILED\n{why}");
            }
        }
    }
    println!("e2e: {passed} passed, {failed} failed, {skipped} skipped");
    std::process::exit(i32::from(failed > 0));
}

/// Whether `filter` (comma-separated: a part of a name, or `area=NAME`) picks the test.
fn chosen(filter: &str, area: &str, name: &str) -> bool {
    filter.split(',').any(|f| match f.strip_prefix("area=") {
        Some(a) => a == area,
        None => name.contains(f),
    })
}
