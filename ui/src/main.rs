//! Entry point of Toolwarden's desktop UI: a Leptos app rendered client-side in the Tauri
//! webview (or, without a backend, in any browser, where it says so instead of failing).
//!
//! The code is split so that what can be tested on the host is plain Rust: `logic` holds the pure
//! parts (time formatting, JSON highlighting, paging, filters, schema rows, the live log), `ipc`
//! is the only module that talks to the backend, and `app`/`pages`/`widgets` are the views.

mod app;
mod browser;
mod ipc;
mod logic;
mod pages;
mod widgets;

fn main() {
    leptos::mount::mount_to_body(app::App);
}
