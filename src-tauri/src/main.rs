//! The desktop app's entry point; everything lives in the library so tests can drive it.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    tw_desktop::run();
}
