//! Fuzzes the runtime's configuration file (`tw_runtime::Config::parse`, then the policy it
//! carries through `tw_runtime::policy::load`, the function the runtime starts with). A config
//! is trusted more than an agent's input, but it is also what a downloaded setup or a
//! colleague's dotfiles hand over, and a config that panics the CLI, `serve` or the desktop
//! app at start leaves no message to act on. Beyond "no panic":
//! - an error names the file and a line (and column) inside it;
//! - parsing is deterministic, and keeps the text (the `[policy]` table's rules are quoted
//!   from it);
//! - what `Config::parse` checks holds in every config it returns: paths are absolute (relative
//!   ones are taken from the config's directory), the schema cache holds at least one
//!   validator, the classifier's limits are in range, `[serve]` listens on loopback unless told
//!   otherwise and its hosts are lowercase names, strict tools never run as uid or gid 0, tool
//!   overrides name valid tools, upstream servers have prefix-safe names and never run with
//!   isolation "none", validation profiles have a rule and lengths in order;
//! - its validation profiles compile, or a schema file they name is refused at its place in the
//!   config (the reader the fuzzer passes finds no file);
//! - its policy compiles, or fails with errors located in the config, and then judges calls.
//!
//! `policy_files` are cleared before the policy is loaded: the fuzzer reads no files a config
//! names. Run it with `scripts/fuzz`; the seeds in `fuzz/corpus/config_file` are the README's
//! configuration examples and the configs of the tests.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tw_fuzz::{assert_located, env, judge_samples};
use tw_runtime::config::SchemaSource;
use tw_runtime::{Config, UpstreamTransport};

const FILE: &str = "/etc/toolwarden/config.toml";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let path = Path::new(FILE);
    let home = Some(Path::new("/home/u"));
    let parsed = Config::parse(&text, path, home);
    let again = Config::parse(&text, path, home);
    assert_eq!(
        format!("{parsed:?}"),
        format!("{again:?}"),
        "parsing is not deterministic"
    );
    let mut config = match parsed {
        Ok(c) => c,
        Err(e) => {
            assert_eq!(e.file, FILE, "an error names another file: {e}");
            assert_located(&text, e.line, e.column, &e);
            return;
        }
    };
    check(&text, &config);
    if let Err(e) = config.content_profiles(|_| {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "not read while fuzzing",
        ))
    }) {
        assert_eq!(e.file, FILE, "a profile error names another file: {e}");
        assert_located(&text, e.line, e.column, &e);
    }

    config.policy_files.clear();
    match tw_runtime::policy::load(&config, env()) {
        Ok(policy) => {
            let _ = judge_samples(&policy);
        }
        Err(load) => {
            assert!(!load.errors.is_empty(), "a policy refused without an error");
            for e in &load.errors {
                if e.file == FILE {
                    assert_located(&text, e.line, e.column, e);
                }
            }
        }
    }
});

fn check(text: &str, c: &Config) {
    assert_eq!(c.text, text, "the config's text is not kept");
    assert_eq!(c.source.as_deref(), Some(Path::new(FILE)));
    let mut paths: Vec<&Path> = Vec::new();
    paths.extend(c.workspace.iter().map(|p| p.as_path()));
    paths.extend(c.data_dir.as_deref());
    paths.extend(c.skills_dir.as_deref());
    paths.extend(c.policy_files.iter().map(|p| p.as_path()));
    paths.extend(c.capabilities_file.as_deref());
    paths.extend(c.sandbox.helper.as_deref());
    paths.extend(c.sandbox.read_only.iter().map(|p| p.as_path()));
    for profile in c.validation.profiles.values() {
        if let Some(SchemaSource::File { path, .. }) = &profile.schema {
            paths.push(path);
        }
    }
    for server in c.upstream.values() {
        if let UpstreamTransport::Stdio {
            cwd,
            read_only,
            read_write,
            ..
        } = &server.transport
        {
            paths.extend(cwd.as_deref());
            paths.extend(read_only.iter().map(|p| p.as_path()));
            paths.extend(read_write.iter().map(|p| p.as_path()));
        }
    }
    for p in paths {
        assert!(
            p.is_absolute(),
            "a relative path in the config: {}",
            p.display()
        );
    }

    assert!(c.schema_cache_capacity >= 1, "an empty schema cache");
    assert!(
        (100..=600_000).contains(&c.classifier.timeout_ms),
        "classifier timeout {} out of range",
        c.classifier.timeout_ms
    );
    assert!(
        (0.0..=1.0).contains(&c.classifier.min_confidence),
        "classifier min_confidence {} out of range",
        c.classifier.min_confidence
    );
    if let Some(endpoint) = &c.classifier.endpoint {
        assert!(
            endpoint.starts_with("http://") || endpoint.starts_with("https://"),
            "classifier endpoint {endpoint:?} is not http(s)"
        );
    }
    assert!(
        c.serve.listen.ip().is_loopback() || c.serve.allow_non_loopback,
        "serve listens on {} without allow_non_loopback",
        c.serve.listen
    );
    for h in &c.serve.allowed_hosts {
        assert!(
            !h.is_empty() && !h.contains(['/', ' ']) && *h == h.to_ascii_lowercase(),
            "allowed host {h:?} is not a lowercase host name"
        );
    }
    if let Some((uid, gid)) = c.sandbox.ids {
        assert!(uid != 0 && gid != 0, "strict tools would run as root");
    }
    for name in c.tools.keys() {
        assert!(
            tw_core::ToolName::new(name).is_ok(),
            "an override for the invalid tool name {name:?}"
        );
    }
    for (name, p) in &c.validation.profiles {
        let r = &p.rules;
        assert!(
            p.schema.is_some() || !r.is_empty(),
            "profile {name} has no rule"
        );
        if let (Some(min), Some(max)) = (r.min_length, r.max_length) {
            assert!(
                min <= max,
                "profile {name}: min_length {min} > max_length {max}"
            );
        }
    }
    for (name, server) in &c.upstream {
        assert_eq!(name, &server.name);
        assert!(
            (1..=24).contains(&name.len()) && !name.contains("__") && !name.ends_with('_'),
            "upstream name {name:?} cannot prefix its tools"
        );
        if let UpstreamTransport::Stdio { isolation, .. } = &server.transport {
            assert_ne!(
                *isolation,
                tw_core::IsolationLevel::None,
                "upstream {name} would run unsandboxed"
            );
        }
    }
}
