//! Keeps ARCHITECTURE.md's rules true: every workspace crate's Cargo.toml against the allowed
//! dependency edges; tw-runtime's modules against its shape (only the facade imports the facade,
//! no import circle between its top-level modules); and no non-test source file over 1,000 lines.

use std::collections::BTreeMap;
use std::path::Path;

/// crate -> the workspace crates it may depend on (normal and dev dependencies alike).
fn allowed() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("tw-core", &[][..]),
        ("tw-protocol", &[][..]),
        ("tw-store", &["tw-core"][..]),
        ("tw-sandbox", &["tw-core"][..]),
        ("tw-runtime", &["tw-core", "tw-store", "tw-sandbox"][..]),
        ("tw-mcp", &["tw-core", "tw-runtime"][..]),
        (
            "tw-server",
            &["tw-core", "tw-mcp", "tw-runtime", "tw-store"][..],
        ),
        (
            "tw-cli",
            &["tw-core", "tw-mcp", "tw-runtime", "tw-server", "tw-store"][..],
        ),
        (
            "tw-desktop",
            &[
                "tw-core",
                "tw-mcp",
                "tw-protocol",
                "tw-runtime",
                "tw-server",
                "tw-store",
            ][..],
        ),
        ("tw-ui", &["tw-protocol"][..]),
        (
            "tw-tests",
            &["tw-core", "tw-store", "tw-runtime", "tw-sandbox"][..],
        ),
    ])
}

fn workspace_deps(manifest: &Path) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(manifest).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    let name = doc["package"]["name"].as_str().unwrap().to_owned();
    let mut deps = Vec::new();
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(t) = doc.get(table).and_then(|t| t.as_table()) {
            // A crate's dev-dependency on itself only turns on a feature for its own tests
            // and benches (tw-store's `testing`): no edge between crates.
            deps.extend(
                t.keys()
                    .filter(|k| k.starts_with("tw-") && **k != name)
                    .cloned(),
            );
        }
    }
    (name, deps)
}

#[test]
fn crate_dependencies_follow_architecture_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut manifests = vec![
        root.join("tests/Cargo.toml"),
        root.join("src-tauri/Cargo.toml"),
        root.join("ui/Cargo.toml"),
    ];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        manifests.push(entry.unwrap().path().join("Cargo.toml"));
    }
    let allowed = allowed();
    let mut violations = Vec::new();
    let mut seen = Vec::new();
    for m in manifests {
        let (name, deps) = workspace_deps(&m);
        let Some(ok) = allowed.get(name.as_str()) else {
            violations.push(format!("{name}: not in ARCHITECTURE.md's dependency rules"));
            continue;
        };
        seen.push(name.clone());
        for d in deps {
            if !ok.contains(&d.as_str()) {
                violations.push(format!(
                    "{name} depends on {d}, which ARCHITECTURE.md does not allow"
                ));
            }
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(seen.len() >= 10, "found only {seen:?}");
}

/// Whether `path` is test code: `tests.rs`, `*_tests.rs`, or anything under a `tests` folder.
fn is_test_file(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || path.components().any(|c| c.as_os_str() == "tests")
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's code without comments and without its inline test module.
fn code_of(text: &str) -> String {
    let text = text
        .split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| match l.find(" // ") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names `crate::` paths in `code` start with: `crate::a::b` gives `a`, and each item of
/// `crate::{a::b, C}` gives `a` and `C`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or_default();
            names.extend(
                inner
                    .split(',')
                    .map(|item| ident(item.trim()))
                    .filter(|n| !n.is_empty()),
            );
        } else {
            names.push(ident(rest));
        }
    }
    names
}

/// tw-runtime's top-level modules, and what each name re-exported from its `lib.rs` comes from.
fn runtime_modules(src: &Path) -> (Vec<String>, BTreeMap<String, String>) {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut modules = Vec::new();
    let mut reexports = BTreeMap::new();
    for statement in code_of(&lib).split(';') {
        let s = statement.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(m) = s
            .strip_prefix("pub mod ")
            .or_else(|| s.strip_prefix("mod "))
            .or_else(|| s.strip_prefix("pub(crate) mod "))
        {
            modules.push(m.trim().to_owned());
        } else if let Some(used) = s.strip_prefix("pub use ") {
            let Some((module, items)) = used.split_once("::") else {
                continue;
            };
            let items = items.trim_start_matches('{').trim_end_matches('}');
            for item in items.split(',') {
                let name = item.split(" as ").last().unwrap_or(item).trim();
                if !name.is_empty() {
                    reexports.insert(name.to_owned(), module.to_owned());
                }
            }
        }
    }
    (modules, reexports)
}

/// For each non-test file of tw-runtime: its top-level module and the other top-level modules
/// it names (directly, or through a name `lib.rs` re-exports).
fn runtime_imports() -> Vec<(
    std::path::PathBuf,
    String,
    std::collections::BTreeSet<String>,
)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let src = root.join("crates/tw-runtime/src");
    let (modules, reexports) = runtime_modules(&src);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files.into_iter().filter(|f| !is_test_file(f)) {
        let rel = file.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let imports = crate_paths(&code)
            .into_iter()
            .filter_map(|name| {
                if modules.contains(&name) {
                    Some(name)
                } else {
                    reexports.get(&name).cloned()
                }
            })
            .filter(|m| *m != top)
            .collect();
        out.push((rel.to_path_buf(), top, imports));
    }
    out
}

#[test]
fn no_module_of_tw_runtime_but_the_facade_imports_it() {
    let offenders: Vec<String> = runtime_imports()
        .into_iter()
        .filter(|(_, top, imports)| top != "runtime" && imports.contains("runtime"))
        .map(|(file, _, _)| file.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "these modules import the facade (crate::runtime, crate::Runtime); services are given \
         what they need instead: {offenders:?}"
    );
}

#[test]
fn tw_runtime_modules_import_each_other_in_no_circle() {
    let mut graph: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for (_, top, imports) in runtime_imports() {
        graph.entry(top).or_default().extend(imports);
    }
    // Depth-first search; a module met again on the current path closes a circle.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
        circles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_owned());
            circles.push(circle.join(" -> "));
            return;
        }
        if !done.insert(node.to_owned()) {
            return;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, path, done, circles);
        }
        path.pop();
    }
    let mut circles = Vec::new();
    let mut done = std::collections::BTreeSet::new();
    for node in graph.keys() {
        visit(node, &graph, &mut Vec::new(), &mut done, &mut circles);
    }
    assert!(circles.is_empty(), "import circles: {circles:#?}");
    // The check itself sees the crate's structure: the facade imports the services.
    assert!(
        graph["runtime"].contains("pipeline") && graph["pipeline"].contains("settings"),
        "{graph:?}"
    );
}

/// The longest a non-test source file may be: past it, a file holds more than one idea.
const MAX_FILE_LINES: usize = 1000;

#[test]
fn no_source_file_is_over_a_thousand_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for dir in ["crates", "src-tauri/src", "ui/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut long: Vec<(usize, String)> = files
        .iter()
        .filter(|f| !is_test_file(f))
        .map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines, f.strip_prefix(root).unwrap().display().to_string())
        })
        .filter(|(lines, _)| *lines > MAX_FILE_LINES)
        .collect();
    long.sort();
    assert!(long.is_empty(), "over {MAX_FILE_LINES} lines: {long:?}");
    assert!(files.len() > 100, "found only {} files", files.len());
}
