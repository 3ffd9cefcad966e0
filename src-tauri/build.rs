//! Tauri's build step, with an app manifest naming every command the UI may call (from
//! tw-protocol), so that only the commands the capability file grants are reachable.
fn main() {
    let manifest = tauri_build::AppManifest::new().commands(&tw_protocol::commands::ALL);
    tauri_build::try_build(tauri_build::Attributes::new().app_manifest(manifest)).unwrap_or_else(
        |e| {
            println!("cargo:warning=tauri build step failed: {e:#}");
            std::process::exit(1);
        },
    );
}
