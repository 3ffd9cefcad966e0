//! The few things the views need from the browser besides the DOM: its clock and its time zone.
//! Kept apart from `logic` (which must run on the host in tests) and from `ipc` (the backend).

use crate::logic::time::WallTime;

/// The browser's clock, milliseconds since the epoch.
pub(crate) fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// Microseconds since the epoch, the wire's unit.
pub(crate) fn ms_to_us(ms: f64) -> i64 {
    (ms * 1000.0) as i64
}

/// Minutes east of UTC of the browser's zone at instant `us` (JS counts the other way).
fn offset_at_us(us: i64) -> i64 {
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(us as f64 / 1000.0));
    -(date.get_timezone_offset() as i64)
}

/// Minutes east of UTC of the browser's zone at a local wall time (for `datetime-local` inputs).
pub(crate) fn offset_at_wall(w: WallTime) -> i64 {
    // Guess with the offset of the same wall time read as UTC, then correct once: right
    // everywhere except inside the hour a DST change skips or repeats.
    let guess = offset_at_us(w.to_us(0));
    offset_at_us(w.to_us(guess))
}

/// A wire timestamp as local `YYYY-MM-DD HH:MM:SS`.
pub(crate) fn local_time(us: i64) -> String {
    WallTime::from_us(us, offset_at_us(us)).display()
}
