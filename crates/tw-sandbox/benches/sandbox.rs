//! Hot paths of tw-sandbox: what one governed file operation and one process run cost. The file
//! operations run inline on async workers for small files, so their cost is what a call adds to
//! the pipeline; process spawning has its own bench (`spawn`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use tw_sandbox::Workspace;
use tw_sandbox::fs::{self, ListOptions, ReadOptions, SearchOptions, WriteMode};

fn workspace() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::TempDir::new().unwrap();
    let root = dir.path();
    std::fs::write(root.join("four_k.txt"), "x".repeat(4095) + "\n").unwrap();
    let lines: String = (1..=10_000).map(|i| format!("line number {i}\n")).collect();
    std::fs::write(root.join("lines.txt"), lines).unwrap();
    for d in 0..10 {
        let sub = root.join(format!("dir{d}"));
        std::fs::create_dir(&sub).unwrap();
        for f in 0..10 {
            let body = format!("fn f{f}() {{}}\n// needle {d} {f}\n");
            std::fs::write(sub.join(format!("file{f}.rs")), body).unwrap();
        }
    }
    let ws = Workspace::open(&[PathBuf::from(root)]).unwrap();
    (dir, ws)
}

fn file_ops(c: &mut Criterion) {
    let (_dir, ws) = workspace();
    c.bench_function("resolve a relative path", |b| {
        b.iter(|| ws.resolve(black_box("src/module/file.rs")).unwrap())
    });
    c.bench_function("read_file 4 KiB", |b| {
        b.iter(|| fs::read_file(&ws, black_box("four_k.txt"), ReadOptions::default()).unwrap())
    });
    let range = ReadOptions {
        start_line: Some(5000),
        end_line: Some(5010),
        ..ReadOptions::default()
    };
    c.bench_function("read_file lines 5000-5010 of 10,000", |b| {
        b.iter(|| fs::read_file(&ws, black_box("lines.txt"), range).unwrap())
    });
    c.bench_function("read_file refused (../ escape)", |b| {
        b.iter(|| {
            fs::read_file(&ws, black_box("../etc/passwd"), ReadOptions::default()).unwrap_err()
        })
    });
    let list = ListOptions {
        depth: 2,
        ..ListOptions::default()
    };
    c.bench_function("list_directory 110 entries, depth 2", |b| {
        b.iter(|| fs::list_directory(&ws, ".", list).unwrap())
    });
    let search = SearchOptions {
        glob: Some("*.rs".into()),
        content: Some("needle 7".into()),
        ..SearchOptions::default()
    };
    c.bench_function("file_search content in 100 files", |b| {
        b.iter(|| fs::file_search(&ws, ".", search.clone(), &|| false).unwrap())
    });
    c.bench_function("write_file overwrite 4 KiB (with fsync)", |b| {
        let content = "y".repeat(4096);
        b.iter(|| fs::write_file(&ws, "out.txt", &content, WriteMode::Overwrite, false).unwrap())
    });
}

criterion_group!(benches, file_ops);
criterion_main!(benches);
