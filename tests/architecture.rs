//! The house's rules, checked on the source: the module import graph has no
//! circle, every module of the run layer and the front ends has a floor, and
//! every import there points to the same floor or one below. That the core
//! never imports the run layer or a front end, and that no front end imports
//! another, the compiler proves (each is a package of its own, depending only
//! on those below it); the tests of it stay as checks of this reader.
//!
//! Module names: the core's as in `src/` (`vk::device`), the run layer's under
//! `run::` (crates/run), the CLI's under `cli::` (crates/cli), the Python
//! module's under `py::` (python/src).

#![allow(clippy::unwrap_used)] // a test: a failed read is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors of the run layer and the front ends, bottom (1) to top (4);
/// see `crates/run/src/lib.rs`.
const FLOORS: &[(&str, u8)] = &[
    // The run layer: a folder per topic, each on a floor (crates/run/src/lib.rs, "Floors").
    ("run", 1),
    ("run::base", 1),
    ("run::cuda", 1),
    ("run::diagnostics", 1),
    ("run::error", 1),
    ("run::kernel", 1),
    ("run::metrics", 1),
    ("run::output", 1),
    ("run::scene", 1),
    ("run::frames", 2),
    ("run::present", 3),
    ("run::drive", 4),
    // The browser view, above the run layer, below the front ends that serve it.
    ("serve", 6),
    // The front ends, above the floors of the run layer they import.
    ("cli::bench::report", 5),
    ("cli::bench::chart", 5),
    ("cli::words", 5),
    ("cli::cli", 6),
    ("cli::peers", 6),
    ("cli::peers::handover", 5),
    ("cli::checkdump", 7),
    ("cli::controls", 7),
    ("cli::headless", 7),
    ("cli::viewer", 7),
    ("cli::bench", 7),
    ("cli::main", 7),
    ("py", 7),
];

/// The source trees: where each package's files are, and the name its modules go by.
const TREES: &[(&str, &str)] = &[
    ("src", ""),
    ("crates/run/src", "run"),
    ("crates/serve/src", "serve"),
    ("crates/cli/src", "cli"),
    ("python/src", "py"),
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

/// `crates/run/src/drive/producer/mod.rs` → `run::drive::producer`; `src/lib.rs` → `` (the core's root);
/// `crates/cli/src/main.rs` → `cli::main`.
fn module_of(tree: &str, src: &Path, file: &Path) -> String {
    if file == src.join("main.rs") {
        return format!("{tree}::main");
    }
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let parts = parts.iter().map(String::as_str).filter(|p| *p != "mod" && *p != "lib" && *p != "main");
    [tree].into_iter().chain(parts).filter(|p| !p.is_empty()).collect::<Vec<_>>().join("::")
}

/// The crate-internal paths a file names: `crate::a::b`, `super::c`, `{x, y}` groups expanded
/// one level (enough for this code base's `use` style).
fn references(tree: &str, module: &str, text: &str) -> Vec<String> {
    // Unit tests (`#[cfg(test)] mod tests`, at the end of a file) are not part of the house.
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let code: String =
        text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut out = Vec::new();
    let parent: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
    // `super` is the parent module: for `a/b.rs` (module a::b) and for `a/b/mod.rs` alike.
    let up = parent.len().saturating_sub(1);
    let roots = [
        ("crate::", tree.to_string()),
        ("super::", parent[..up].join("::")),
        ("vkcuda_run::", "run".to_string()),
        ("vkcuda::", String::new()),
    ];
    for (prefix, root) in roots {
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
    let mut all = Vec::new();
    for (dir, tree) in TREES {
        let src = root.join(dir);
        let mut found = Vec::new();
        files(&src, &mut found);
        all.extend(found.into_iter().map(|f| (*tree, module_of(tree, &src, &f), f)));
    }
    let modules: BTreeSet<String> = all.iter().map(|(_, m, _)| m.clone()).collect();
    let mut edges = BTreeMap::new();
    for (tree, m, f) in &all {
        let text = std::fs::read_to_string(f).unwrap();
        let mut to = BTreeSet::new();
        for r in references(tree, m, &text) {
            // The longest module that prefixes the path.
            let target = modules
                .iter()
                .filter(|c| !c.is_empty() && (r == **c || r.starts_with(&format!("{c}::"))))
                .max_by_key(|c| c.len());
            if let Some(t) = target {
                if t != m {
                    to.insert(t.clone());
                }
            }
        }
        edges.insert(m.clone(), to);
    }
    edges
}

/// Whether `module` belongs to the run layer or a front end (not the core).
fn above_the_core(module: &str) -> bool {
    TREES.iter().any(|(_, t)| !t.is_empty() && (module == *t || module.starts_with(&format!("{t}::"))))
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
fn the_core_never_imports_what_stands_on_it() {
    for (from, to) in graph() {
        if above_the_core(&from) {
            continue;
        }
        let up: Vec<_> = to.iter().filter(|t| above_the_core(t)).collect();
        assert!(up.is_empty(), "core module `{from}` imports the run layer or a front end: {up:?}");
    }
}

/// The front ends: the CLI's modes (viewer, headless dump, bench, check-dump)
/// and the Python module. `cli::cli` (the command line they share) and
/// `cli::main` (which picks one) are neither.
const FRONT_ENDS: &[&str] = &["cli::viewer", "cli::headless", "cli::bench", "cli::checkdump", "py"];

#[test]
fn no_front_end_imports_another() {
    let front = |m: &str| FRONT_ENDS.iter().copied().find(|t| m == *t || m.starts_with(&format!("{t}::")));
    for (from, to) in graph() {
        let Some(mine) = front(&from) else { continue };
        let other: Vec<_> = to.iter().filter(|t| front(t).is_some_and(|f| f != mine)).collect();
        assert!(other.is_empty(), "`{from}` imports another front end: {other:?}");
    }
}

#[test]
fn every_module_above_the_core_has_a_floor() {
    let unplaced: Vec<_> = graph().into_keys().filter(|m| above_the_core(m) && floor(m).is_none()).collect();
    assert!(unplaced.is_empty(), "modules without a floor in FLOORS: {unplaced:?}");
}

/// The floors the run layer's docs (`crates/run/src/lib.rs`, "Floors") give
/// its modules: the modules named in the paragraph of floor N.
fn documented_floors() -> BTreeMap<String, u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/run/src/lib.rs");
    let text = std::fs::read_to_string(path).unwrap();
    let mut floors = BTreeMap::new();
    let mut current = None;
    for line in text.lines().filter_map(|l| l.strip_prefix("//!")) {
        let line = line.trim_start();
        if let Some((n, _)) = line.split_once(". ").filter(|(n, _)| n.parse::<u8>().is_ok()) {
            current = n.parse::<u8>().ok();
        } else if line.is_empty()
            || !line.starts_with(|c: char| c.is_lowercase() || c == '[' || c == '`' || c == '(')
        {
            current = None;
        }
        let Some(f) = current else { continue };
        for name in line.split('`').skip(1).step_by(2) {
            floors.insert(format!("run::{}", name.trim_matches(|c| c == '[' || c == ']')), f);
        }
    }
    floors
}

#[test]
fn the_floors_match_the_run_layers_docs() {
    let documented = documented_floors();
    let folders: Vec<_> =
        FLOORS.iter().filter(|(m, _)| m.starts_with("run::") && m.matches("::").count() == 1).collect();
    for (module, f) in &folders {
        let said = documented.get(*module);
        assert_eq!(said, Some(f), "`{module}` is at floor {f}; crates/run/src/lib.rs says {said:?}");
    }
    let unknown: Vec<_> = documented.keys().filter(|m| !FLOORS.iter().any(|(f, _)| f == m)).collect();
    assert!(unknown.is_empty(), "crates/run/src/lib.rs places modules the test does not: {unknown:?}");
    let floors: BTreeSet<u8> = folders.iter().map(|(_, f)| *f).collect();
    assert_eq!(floors, (1..=4).collect(), "four floors: {folders:?}");
    // Every module of the run layer is in a floor's folder.
    let g = graph();
    let top = |m: &str| m.split("::").take(2).collect::<Vec<_>>().join("::");
    let loose: Vec<_> =
        g.keys().filter(|m| m.starts_with("run::") && !folders.iter().any(|(f, _)| top(m) == *f)).collect();
    assert!(loose.is_empty(), "run-layer modules outside the floors' folders: {loose:?}");
    // Each folder's own docs open with its floor.
    for (module, f) in &folders {
        let dir = module.trim_start_matches("run::");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("crates/run/src/{dir}/mod.rs"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(&format!("//! Floor {f},")),
            "{} does not open with its floor",
            path.display()
        );
    }
}

#[test]
fn imports_point_only_down_or_sideways() {
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
    // The parser must find `crate::`, `super::` and the run layer's paths, including `{...}` groups.
    let refs = references(
        "run",
        "run::producer::cpu",
        "use super::{Job, cuda::X};\nuse crate::sync::Plan;\nuse vkcuda_run::scene;\nuse vkcuda::Format;",
    );
    for r in ["run::producer::cuda::X", "run::sync::Plan", "run::scene", "Format"] {
        assert!(refs.contains(&r.to_string()), "{r}: {refs:?}");
    }
    assert_eq!(floor("cli::bench::report"), Some(5));
    assert_eq!(floor("cli::bench"), Some(7));
    assert_eq!(floor("run::drive::session"), Some(4), "a folder's floor holds for what is in it");
    assert_eq!(floor("vk::device"), None, "the core has no floors");
    let edge = |a: &str, b: &str| (a.to_string(), BTreeSet::from([b.to_string()]));
    let circle: Graph = [edge("a", "b"), edge("b", "c"), edge("c", "a")].into();
    assert_eq!(find_circle(&circle).map(|c| c.len()), Some(4));
    let line: Graph = [edge("a", "b"), edge("b", "c")].into();
    assert_eq!(find_circle(&line), None);
}

/// The command-line flags (`--name`) inside the string literals of `code`
/// (comment lines left out; escaped quotes and quote characters ignored).
fn flags_in_strings(code: &str) -> Vec<String> {
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\"", "")
        .replace("'\"'", "");
    // The odd-numbered pieces between quotes are inside string literals.
    let mut found = Vec::new();
    for s in code.split('"').skip(1).step_by(2) {
        let mut rest = s;
        while let Some(at) = rest.find("--") {
            let name: String =
                rest[at + 2..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '-').collect();
            if !name.is_empty() {
                found.push(format!("--{name}"));
            }
            rest = &rest[at + 2..];
        }
    }
    found
}

/// NVRTC's options, which the run layer passes to NVRTC: not the CLI's flags.
const NVRTC_OPTIONS: &[&str] = &["--gpu-architecture", "--include-path"];

/// The library serves engines as much as the CLI, and the run layer serves
/// the Python module as much as the CLI: their messages say what went wrong
/// in their own terms, never which CLI flag to use (the run layer names a
/// run's fields as `usage::Field`s, which each front end words). Only the
/// CLI's own package names its flags.
#[test]
fn no_library_message_names_a_cli_flag() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    for dir in ["src", "crates/run/src", "python/src"] {
        files(root.join(dir).as_path(), &mut paths);
    }
    let mut found = Vec::new();
    for path in paths {
        // The protocol diagram's title (tests only: it draws assets/) quotes the CLI's flags.
        if path.ends_with("crates/run/src/diagnostics/diagram.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(&text);
        for flag in flags_in_strings(code).into_iter().filter(|f| !NVRTC_OPTIONS.contains(&f.as_str())) {
            found.push(format!("{}: {flag}", path.display()));
        }
    }
    assert!(found.is_empty(), "library messages naming CLI flags:\n{}", found.join("\n"));
    // The check itself sees one, on a continued line too, and not in comments or code.
    let seen = flags_in_strings("bail!(\"needs \\\n  --validate here\");\n// --size\nlet x = a--b;");
    assert_eq!(seen, ["--validate"]);
}

/// Functions longer than this many lines, with their first line: rustfmt'd
/// code, so a body ends at the first `}` at the `fn`'s own indentation.
fn long_functions(text: &str, limit: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        let head = line.trim_start();
        let name = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "unsafe fn ",
            "pub unsafe fn ",
            "const fn ",
            "pub const fn ",
        ]
        .iter()
        .find_map(|p| head.strip_prefix(p))
        .map(|rest| rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>());
        let Some(name) = name.filter(|_| !head.ends_with(';')) else {
            i += 1;
            continue;
        };
        let close = format!("{}}}", " ".repeat(indent));
        let end = (i..lines.len()).find(|&k| lines[k] == close || (k == i && line.trim_end().ends_with('}')));
        let Some(end) = end else {
            i += 1;
            continue;
        };
        if end + 1 - i > limit {
            out.push((i + 1, name, end + 1 - i));
        }
        i = end + 1;
    }
    out
}

/// Functions read top to bottom as the protocol: at most 80 lines, in every
/// package and example (the test suites' registers are lists, not protocol).
#[test]
fn functions_are_at_most_80_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    for dir in ["src", "crates", "python/src", "examples"] {
        files(&root.join(dir), &mut paths);
    }
    let mut found = Vec::new();
    for path in paths {
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        for (line, name, len) in long_functions(&std::fs::read_to_string(&path).unwrap(), 80) {
            found.push(format!("{rel}:{line}: fn {name}: {len} lines"));
        }
    }
    assert!(found.is_empty(), "functions over 80 lines:\n{}", found.join("\n"));
    // The integrator's first read, kernels and engine plumbing beside it.
    let minimal = std::fs::read_to_string(root.join("examples/minimal.rs")).unwrap().lines().count();
    assert!(minimal <= 250, "examples/minimal.rs has {minimal} lines (at most 250)");
    let long = format!("fn f() {{\n{}}}\n", "    x();\n".repeat(81));
    assert_eq!(long_functions(&long, 80), [(1, "f".to_string(), 83)]);
    assert!(long_functions("fn g() {}\nfn h();\n", 80).is_empty());
}

/// Raw results stay beside a README each, and docs/results/README.md indexes every folder.
#[test]
fn every_results_folder_has_a_readme_and_is_indexed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/results");
    let index = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut problems = Vec::new();
    let mut folders = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        folders += 1;
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !path.join("README.md").is_file() {
            problems.push(format!("{name}: no README.md"));
        }
        if !index.contains(&format!("]({name}/README.md)")) {
            problems.push(format!("{name}: not in docs/results/README.md"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(folders > 10, "only {folders} results folders found");
}

/// docs/integrating.md's code map names every source file of the packages
/// (by its path, or its name under its folder's heading or line).
#[test]
fn the_code_map_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/integrating.md")).unwrap();
    let map = doc.split("```\nThe core (package vkcuda, src/)").nth(1).unwrap().split("```").next().unwrap();
    let mut paths = Vec::new();
    for dir in ["src", "crates", "python/src", "examples"] {
        files(&root.join(dir), &mut paths);
    }
    let missing: Vec<String> = paths
        .iter()
        .map(|p| p.strip_prefix(root).unwrap().display().to_string())
        .filter(|rel| {
            let name = rel.rsplit('/').next().unwrap();
            let stem = name.trim_end_matches(".rs");
            // The path itself, or the file's name (a line of its folder's section, or a folder's list).
            !(map.contains(rel.as_str())
                || map.contains(&format!("{name} "))
                || map.contains(&format!("{stem}.rs")))
        })
        .collect();
    assert!(missing.is_empty(), "docs/integrating.md's code map does not name: {missing:?}");
    assert!(paths.len() > 60, "only {} files read", paths.len());
}

/// Every `[text](path#Lnn)` link in `doc`: (link, why it misses) for each
/// whose text names no item in backticks, or that does not land on a line
/// holding that item (with the lines that do).
fn line_links_that_miss(doc: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(doc).unwrap();
    let mut misses = Vec::new();
    for (at, _) in text.match_indices("](") {
        let label = text[..at].rsplit_once('[').map_or("", |(_, l)| l);
        let target = text[at + 2..].split(')').next().unwrap_or("");
        let Some((path, line)) = target.split_once("#L") else { continue };
        let link = format!("[{label}]({target})");
        let Some(item) = label.split('`').nth(1) else {
            misses.push((link, "its text names no item in backticks".into()));
            continue;
        };
        let file = doc.parent().unwrap().join(path);
        let Ok(source) = std::fs::read_to_string(&file) else {
            misses.push((link, format!("{} does not exist", file.display())));
            continue;
        };
        let want: usize = line.parse().unwrap_or(0);
        let holds = |(_, l): &(usize, &str)| l.contains(item);
        let lines: Vec<(usize, &str)> = source.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
        if !lines.get(want.wrapping_sub(1)).is_some_and(holds) {
            let found: Vec<usize> = lines.iter().filter(|l| holds(l)).map(|(n, _)| *n).take(5).collect();
            misses.push((link, format!("line {want} has no `{item}`; it is on lines {found:?}")));
        }
    }
    misses
}

/// Links to a line of code in the docs land on the item their text names
/// (integrators follow them to the code that handles a pitfall): a line
/// number that drifted when the code moved fails here, and says where the
/// item is now.
#[test]
fn line_links_in_the_docs_land_where_they_say() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md"), root.join("python/README.md")];
    files_with(&root.join("docs"), "md", &mut docs);
    let (mut links, mut misses) = (0, Vec::new());
    for doc in docs.iter().filter(|d| d.exists()) {
        links += std::fs::read_to_string(doc).unwrap().matches("#L").count();
        misses.extend(line_links_that_miss(doc));
    }
    let fix = "python3 scripts/doc-links.py FILE moves them";
    assert!(misses.is_empty(), "{} line links miss ({fix}):\n{misses:#?}", misses.len());
    assert!(links >= 20, "only {links} line links read");
    // The checker itself: a drifted line and an unnamed link are both caught.
    let probe = std::env::temp_dir().join(format!("vkcuda-links-{}.md", std::process::id()));
    let here = root.join("tests/architecture.rs").display().to_string();
    std::fs::write(&probe, format!("[`files_with`]({here}#L1) [plain]({here}#L1)")).unwrap();
    let caught = line_links_that_miss(&probe);
    let _ = std::fs::remove_file(&probe);
    assert_eq!(caught.len(), 2, "{caught:?}");
}

/// Every file under `dir` whose name ends in `.{ext}`, recursively.
fn files_with(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_with(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// Where `code` calls the CUDA driver itself: a `sys::cuXxx` function, or
/// cudarc's `result` module (its thin wrappers of the driver's functions).
fn raw_cuda_calls(code: &str) -> Vec<String> {
    let code: String =
        code.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut found = Vec::new();
    for (at, _) in code.match_indices("sys::cu") {
        if code[at + 7..].starts_with(|c: char| c.is_ascii_uppercase()) {
            found.push(
                code[at..].chars().take_while(|c| c.is_alphanumeric() || *c == ':' || *c == '_').collect(),
            );
        }
    }
    let imports_result = |line: &str| {
        line.contains("cudarc::driver::result")
            || (line.contains("cudarc::driver::{") && line.contains("result"))
    };
    found.extend(code.lines().filter(|l| imports_result(l)).map(|l| l.trim().to_string()));
    found
}

#[test]
fn raw_cuda_calls_stay_in_the_core_and_one_run_layer_module() {
    assert_eq!(
        raw_cuda_calls("use cudarc::driver::{result, sys};\nlet r = unsafe { sys::cuStreamQuery(s) };\n")
            .len(),
        2
    );
    assert!(raw_cuda_calls("let e: sys::CUevent = x; // sys::cuEventQuery\nuse cudarc::nvrtc::result;")
        .is_empty());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // This file names the calls it looks for.
    let allowed = [root.join("src/cuda"), root.join("crates/run/src/cuda/driver.rs"), root.join(file!())];
    let mut paths = Vec::new();
    for dir in ["src", "crates", "python/src", "examples", "tests"] {
        files(&root.join(dir), &mut paths);
    }
    let mut found = Vec::new();
    for path in paths.iter().filter(|p| !allowed.iter().any(|a| p.starts_with(a))) {
        let calls = raw_cuda_calls(&std::fs::read_to_string(path).unwrap());
        found.extend(
            calls.into_iter().map(|c| format!("{}: {c}", path.strip_prefix(root).unwrap().display())),
        );
    }
    assert!(
        found.is_empty(),
        "raw CUDA driver calls outside src/cuda and crates/run/src/cuda/driver.rs: {found:#?}"
    );
    assert!(paths.len() > 60, "only {} files read", paths.len());
}

/// The README is the reading path's first page: at most 250 lines, and its
/// first screen (60 lines) holds the two commands, the files that hold the
/// sync pattern an integrator copies, and the command that proves it.
#[test]
fn the_readme_is_short_and_its_first_screen_says_where_to_start() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines (at most 250)");
    let screen: String = readme.lines().take(60).collect::<Vec<_>>().join("\n");
    let wanted = ["scripts/demo.sh", "scripts/test.sh", "src/sync.rs", "src/interop.rs", "--example minimal"];
    let missing: Vec<&str> = wanted.into_iter().filter(|w| !screen.contains(w)).collect();
    assert!(missing.is_empty(), "README.md's first 60 lines do not name {missing:?}");
    let streaming = std::fs::read_to_string(root.join("docs/streaming.md")).unwrap().lines().count();
    assert!(streaming <= 400, "docs/streaming.md has {streaming} lines (at most 400)");
}

/// GitHub's anchor of a Markdown heading: lower case, punctuation dropped
/// (but `-` and `_`), spaces as `-`.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every relative link of `doc` (`[text](path)`, `[text](path#anchor)`,
/// `[text](#anchor)`) whose file does not exist, or whose anchor is no
/// heading of the Markdown file it names.
fn links_that_break(doc: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(doc).unwrap();
    let headings = |md: &str| -> BTreeSet<String> {
        let mut fenced = false;
        md.lines()
            .filter(|l| {
                fenced ^= l.starts_with("```");
                !fenced && l.starts_with('#')
            })
            .map(|l| anchor_of(l.trim_start_matches('#')))
            .collect()
    };
    let mut broken = Vec::new();
    for (at, _) in text.match_indices("](") {
        let target = text[at + 2..].split([')', ' ']).next().unwrap_or("");
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
        let file = if path.is_empty() { doc.to_path_buf() } else { doc.parent().unwrap().join(path) };
        if !file.exists() {
            broken.push(format!("{target}: {} does not exist", file.display()));
        } else if !anchor.is_empty()
            && !anchor.starts_with('L')
            && file.extension().is_some_and(|e| e == "md")
            && !headings(&std::fs::read_to_string(&file).unwrap()).contains(anchor)
        {
            broken.push(format!("{target}: no heading #{anchor}"));
        }
    }
    broken
}

/// Every relative link in the README, the docs, the results' READMEs, the
/// changelog and the contributing guide lands on a file that exists (and a
/// heading that exists, where it names one).
#[test]
fn doc_links_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<PathBuf> = ["README.md", "CHANGELOG.md", "CONTRIBUTING.md", "python/README.md"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    files_with(&root.join("docs"), "md", &mut docs);
    let mut broken = Vec::new();
    for doc in docs.iter().filter(|d| d.exists()) {
        let rel = doc.strip_prefix(root).unwrap().display().to_string();
        broken.extend(links_that_break(doc).into_iter().map(|b| format!("{rel}: {b}")));
    }
    assert!(broken.is_empty(), "{} links break:\n{}", broken.len(), broken.join("\n"));
    assert!(docs.len() > 20, "only {} docs read", docs.len());
    assert_eq!(anchor_of(" Why VP8, and its licence"), "why-vp8-and-its-licence");
}

/// The Rust source files a comment in `text` names (`src/...rs`, `crates/...rs`,
/// `python/...rs`), each with the item it says is there: the backticked name just
/// before "in PATH" ("Mirrors `Out` in crates/run/src/scene/kernels.rs"), if any.
fn named_sources(text: &str) -> Vec<(String, Option<String>)> {
    let mut named = Vec::new();
    for line in text.lines() {
        let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_/.-".contains(c);
        let mut at = 0;
        while let Some(skip) = line[at..].find(is_path_char) {
            let start = at + skip;
            let len = line[start..].find(|c: char| !is_path_char(c)).unwrap_or(line.len() - start);
            let token = line[start..start + len].trim_end_matches('.');
            let rooted = ["src/", "crates/", "python/"].iter().any(|r| token.starts_with(r));
            if rooted && token.ends_with(".rs") {
                let before = line[..start].trim_end();
                let item = before
                    .strip_suffix(" in")
                    .and_then(|b| b.trim_end().strip_suffix('`'))
                    .and_then(|b| b.rsplit_once('`'))
                    .map(|(_, name)| name.to_string());
                named.push((token.to_string(), item));
            }
            at = start + len;
        }
    }
    named
}

/// Whether Rust `source` defines an item called `name`.
fn defines(source: &str, name: &str) -> bool {
    ["struct", "enum", "fn", "type", "const", "static", "trait", "union", "mod"].iter().any(|kind| {
        source.match_indices(&format!("{kind} {name}")).any(|(at, found)| {
            let after = source[at + found.len()..].chars().next();
            !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    })
}

/// What `text` names that is not there, relative to `root`: a missing file, or
/// an item its file does not define.
fn stale_names(root: &Path, text: &str) -> Vec<String> {
    let mut stale = Vec::new();
    for (path, item) in named_sources(text) {
        let Ok(source) = std::fs::read_to_string(root.join(&path)) else {
            stale.push(format!("{path} does not exist"));
            continue;
        };
        if let Some(name) = item.filter(|name| !defines(&source, name)) {
            stale.push(format!("{path} defines no `{name}`"));
        }
    }
    stale
}

/// The kernels' contract (shaders/vkcuda.h) and the shaders name the Rust
/// types and functions they mirror, by file: a file moved or an item renamed
/// fails here, so the comment an author of a kernel follows stays true.
#[test]
fn the_shaders_name_rust_files_and_items_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut shaders = Vec::new();
    for ext in ["h", "cu", "wgsl", "inc"] {
        files_with(&root.join("shaders"), ext, &mut shaders);
    }
    let (mut named, mut stale) = (0, Vec::new());
    for file in &shaders {
        let text = std::fs::read_to_string(file).unwrap();
        named += named_sources(&text).len();
        let at = file.strip_prefix(root).unwrap().display().to_string();
        stale.extend(stale_names(root, &text).into_iter().map(|s| format!("{at}: {s}")));
    }
    assert!(stale.is_empty(), "stale names in the shaders' comments:\n{stale:#?}");
    assert!(named >= 6, "only {named} Rust paths named in {} shader files", shaders.len());
    // The checker itself: a missing file and a missing item are both caught; a type that is there is not.
    let probe = "// Mirrors `Out` in src/app/kernels.rs; `Nowhere` in crates/run/src/scene/kernels.rs\n\
                 // (`KernelFrame` in crates/run/src/kernel/user.rs.)";
    assert_eq!(named_sources(probe).len(), 3, "{:?}", named_sources(probe));
    let caught = stale_names(root, probe);
    assert_eq!(caught.len(), 2, "{caught:?}");
    assert!(
        caught[0].contains("src/app/kernels.rs does not exist") && caught[1].contains("`Nowhere`"),
        "{caught:?}"
    );
}
