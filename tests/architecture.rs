//! The house's rules, checked on the source: the module import graph has no
//! circle, and inside the application every import points to the same floor
//! or one below. That the core never imports the application the compiler
//! proves now (the application is the binary's own module tree); the test of
//! it stays as a check of this reader.

#![allow(clippy::unwrap_used)] // a test: a failed read is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The application's floors, bottom (1) to top (4); see `src/app/mod.rs`.
const FLOORS: &[(&str, u8)] = &[
    ("app::scene", 1),
    ("app::kernels", 1),
    ("app::nvrtc", 1),
    ("app::userkernel", 1),
    ("app::reload", 1),
    ("app::director", 1),
    ("app::clock", 1),
    ("app::stats", 1),
    ("app::footprint", 1),
    ("app::diagram", 1),
    ("app::logger", 1),
    ("app::outfile", 1),
    ("app::inject", 1),
    ("app::encode", 1),
    ("app::kinds", 1),
    ("app", 1),
    ("app::producer", 2),
    ("app::consumer", 2),
    ("app::present", 2),
    ("app::sink", 2),
    ("app::display", 2),
    ("app::setup", 2),
    ("app::session", 2),
    ("app::peers", 2),
    ("app::measure", 2),
    ("app::bench::report", 2),
    ("app::bench::chart", 2),
    ("app::cli", 3),
    ("app::headless", 4),
    ("app::viewer", 4),
    ("app::bench", 4),
    ("app::main", 4),
];

fn floor(module: &str) -> Option<u8> {
    // The longest listed prefix decides (app::bench::report before app::bench).
    FLOORS
        .iter()
        .filter(|(m, _)| module == *m || module.starts_with(&format!("{m}::")))
        .max_by_key(|(m, _)| m.len())
        .map(|(_, f)| *f)
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/app/producer/mod.rs` → `app::producer`; `src/lib.rs` → `` (the crate root).
fn module_of(src: &Path, file: &Path) -> String {
    // The binary's root is the application's top: `crate::app::…` there names the app.
    if file == src.join("main.rs") {
        return "app::main".into();
    }
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let parts: Vec<&str> =
        parts.iter().map(String::as_str).filter(|p| *p != "mod" && *p != "lib" && *p != "main").collect();
    parts.join("::")
}

/// The crate-internal paths a file names: `crate::a::b`, `super::c`, `{x, y}` groups expanded
/// one level (enough for this code base's `use` style).
fn references(module: &str, is_mod_rs: bool, text: &str) -> Vec<String> {
    // Unit tests (`#[cfg(test)] mod tests`, at the end of a file) are not part of the house.
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let code: String =
        text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut out = Vec::new();
    let parent: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
    // `super` is the parent module: for `a/b.rs` (module a::b) and for `a/b/mod.rs` alike.
    let _ = is_mod_rs;
    let up = parent.len().saturating_sub(1);
    for (prefix, root) in [("crate::", String::new()), ("super::", parent[..up].join("::"))] {
        let mut rest = code.as_str();
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let path: String =
                rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            let path = path.trim_end_matches(':');
            let full = [root.as_str(), path].iter().filter(|p| !p.is_empty()).copied().collect::<Vec<_>>();
            let full = full.join("::");
            out.push(full.clone());
            // `crate::a::{b, c::d}` and `super::{b, c}`: name each member too.
            let after = &rest[path.len()..];
            let group =
                after.strip_prefix("::{").or_else(|| after.strip_prefix('{').filter(|_| path.is_empty()));
            if let Some(group) = group {
                let group = &group[..group.find('}').unwrap_or(0)];
                for member in group.split(',') {
                    let m: String = member
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    if !m.is_empty() && m != "self" {
                        out.push(if full.is_empty() { m } else { format!("{full}::{m}") });
                    }
                }
            }
        }
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let modules: BTreeSet<String> = all.iter().map(|f| module_of(&src, f)).collect();
    let mut edges = BTreeMap::new();
    for f in &all {
        let m = module_of(&src, f);
        let is_mod = f.file_name().is_some_and(|n| n == "mod.rs");
        let text = std::fs::read_to_string(f).unwrap();
        let mut to = BTreeSet::new();
        for r in references(&m, is_mod, &text) {
            // The longest module that prefixes the path.
            let target = modules
                .iter()
                .filter(|c| !c.is_empty() && (r == **c || r.starts_with(&format!("{c}::"))))
                .max_by_key(|c| c.len());
            if let Some(t) = target {
                if *t != m {
                    to.insert(t.clone());
                }
            }
        }
        edges.insert(m, to);
    }
    edges
}

type Graph = BTreeMap<String, BTreeSet<String>>;

/// A circle in `g`, if there is one (depth-first search with colours).
fn find_circle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        n: &str,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|s| s == m).unwrap_or(0);
                    let mut circle = stack[from..].to_vec();
                    circle.push(m.clone());
                    return Some(circle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(g, m, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    g.keys()
        .filter_map(|n| match state.contains_key(n) {
            true => None,
            false => visit(g, n, &mut state, &mut Vec::new()),
        })
        .next()
}

#[test]
fn no_import_circles() {
    let g = graph();
    assert!(g.len() > 30, "the graph was not read: {} modules", g.len());
    if let Some(c) = find_circle(&g) {
        panic!("import circle: {}", c.join(" → "));
    }
}

#[test]
fn the_core_never_imports_the_application() {
    for (from, to) in graph() {
        if from == "app" || from.starts_with("app::") {
            continue;
        }
        let up: Vec<_> = to.iter().filter(|t| *t == "app" || t.starts_with("app::")).collect();
        assert!(up.is_empty(), "core module `{from}` imports the application: {up:?}");
    }
}

#[test]
fn the_application_imports_only_down_or_sideways() {
    let mut checked = 0;
    for (from, to) in graph() {
        let Some(f) = floor(&from) else { continue };
        for t in &to {
            if let Some(ft) = floor(t) {
                assert!(ft <= f, "`{from}` (floor {f}) imports `{t}` (floor {ft}), which is above it");
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "only {checked} imports checked");
}

#[test]
fn the_checker_sees_circles_and_upward_imports() {
    // The parser must find `crate::` and `super::` paths, including `{...}` groups.
    let refs = references("app::producer::cpu", false, "use super::{Job, cuda::X};\nuse crate::sync::Plan;");
    assert!(refs.contains(&"app::producer::cuda::X".to_string()), "{refs:?}");
    assert!(refs.contains(&"sync::Plan".to_string()), "{refs:?}");
    assert_eq!(floor("app::bench::report"), Some(2));
    assert_eq!(floor("app::bench"), Some(4));
    let edge = |a: &str, b: &str| (a.to_string(), BTreeSet::from([b.to_string()]));
    let circle: Graph = [edge("a", "b"), edge("b", "c"), edge("c", "a")].into();
    assert_eq!(find_circle(&circle).map(|c| c.len()), Some(4));
    let line: Graph = [edge("a", "b"), edge("b", "c")].into();
    assert_eq!(find_circle(&line), None);
}
