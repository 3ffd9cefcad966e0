//! Keeps ARCHITECTURE.md's dependency rules true: reads every workspace crate's Cargo.toml and fails
//! on a dependency edge between workspace crates that the architecture does not allow.

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
            deps.extend(t.keys().filter(|k| k.starts_with("tw-")).cloned());
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
