//! The UI's only door to the backend: typed calls to the shell's commands and subscriptions to its
//! events, through the global API Tauri injects (`window.__TAURI__`, `withGlobalTauri`).
//!
//! Every call answers a `Result` carrying the wire's [`IpcError`]: a command that fails, a reply
//! that does not decode, or no backend at all (the page opened in a plain browser) is a value the
//! UI shows, never a panic. The JS entry points are bound with `catch`, so a missing
//! `window.__TAURI__` is an error here rather than an exception that stops the wasm.

use std::rc::Rc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tw_protocol::IpcError;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_namespace = ["window", "__TAURI__", "core"], js_name = invoke)]
    fn tauri_invoke(cmd: &str, args: JsValue) -> Result<js_sys::Promise, JsValue>;

    #[wasm_bindgen(catch, js_namespace = ["window", "__TAURI__", "event"], js_name = listen)]
    fn tauri_listen(event: &str, handler: &js_sys::Function) -> Result<js_sys::Promise, JsValue>;
}

/// The code of the error every call answers when there is no backend to call.
pub(crate) const UNAVAILABLE: &str = "unavailable";

/// The error every call answers when the page runs outside the desktop app.
pub(crate) fn unavailable() -> IpcError {
    IpcError::new(
        UNAVAILABLE,
        "backend not available: this page is not running inside the Toolwarden desktop app \
         (window.__TAURI__ is missing)",
    )
}

/// Whether Tauri's global API is there to call.
pub(crate) fn backend_available() -> bool {
    web_sys::window()
        .and_then(|w| js_sys::Reflect::get(&w, &JsValue::from_str("__TAURI__")).ok())
        .is_some_and(|t| t.is_object())
}

/// Calls a command (`tw_protocol::commands::*`) with its parameters (`()` for the commands that
/// take none) and decodes its reply.
pub(crate) async fn invoke<P: Serialize, R: DeserializeOwned>(
    cmd: &str,
    params: &P,
) -> Result<R, IpcError> {
    if !backend_available() {
        return Err(unavailable());
    }
    let args = js_sys::JSON::parse(&command_args(cmd, params)?)
        .map_err(|e| IpcError::new("internal", format!("{cmd}: {}", js_text(&e))))?;
    let promise = tauri_invoke(cmd, args).map_err(|e| rejection(cmd, &e))?;
    let reply = JsFuture::from(promise)
        .await
        .map_err(|e| rejection(cmd, &e))?;
    decode(cmd, &reply)
}

/// Calls `callback` with every payload of `event` (`tw_protocol::events::*`) for the rest of the
/// app's life; a payload that does not decode, or a subscription the backend refuses, reaches the
/// callback as an error.
pub(crate) fn listen<T: DeserializeOwned + 'static>(
    event: &'static str,
    callback: impl Fn(Result<T, IpcError>) + 'static,
) -> Result<(), IpcError> {
    if !backend_available() {
        return Err(unavailable());
    }
    let callback = Rc::new(callback);
    let on_event = Rc::clone(&callback);
    let handler = Closure::<dyn Fn(JsValue)>::new(move |ev: JsValue| {
        let payload =
            js_sys::Reflect::get(&ev, &JsValue::from_str("payload")).unwrap_or(JsValue::UNDEFINED);
        on_event(decode(event, &payload));
    });
    let promise =
        tauri_listen(event, handler.as_ref().unchecked_ref()).map_err(|e| rejection(event, &e))?;
    // The app listens until it closes, so the handler is never dropped; unlistening would need
    // the function the promise resolves to, which nothing here calls.
    handler.forget();
    leptos::task::spawn_local(async move {
        if let Err(e) = JsFuture::from(promise).await {
            callback(Err(rejection(event, &e)));
        }
    });
    Ok(())
}

/// The `args` object for `invoke`: the shell's commands take their parameters as one argument
/// named `params`, and the commands without parameters take an empty object.
fn command_args<P: Serialize>(cmd: &str, params: &P) -> Result<String, IpcError> {
    let value = serde_json::to_value(params)
        .map_err(|e| IpcError::new("internal", format!("{cmd}: cannot encode parameters: {e}")))?;
    let args = match value {
        Value::Null => serde_json::json!({}),
        v => serde_json::json!({ "params": v }),
    };
    Ok(args.to_string())
}

/// A reply decoded through its JSON text (`undefined`, a command's `()`, reads as `null`).
fn decode<R: DeserializeOwned>(what: &str, value: &JsValue) -> Result<R, IpcError> {
    let text = if value.is_undefined() {
        "null".to_owned()
    } else {
        js_sys::JSON::stringify(value)
            .map(String::from)
            .map_err(|e| IpcError::new("internal", format!("{what}: {}", js_text(&e))))?
    };
    decode_text(what, &text)
}

fn decode_text<R: DeserializeOwned>(what: &str, text: &str) -> Result<R, IpcError> {
    serde_json::from_str(text).map_err(|e| {
        IpcError::new(
            "internal",
            format!("{what}: the backend's reply does not match this UI: {e}"),
        )
    })
}

/// A rejected call as an [`IpcError`]: the shell's own errors come as the wire's `IpcError`
/// object; Tauri's (unknown command, not permitted) as a string; JS exceptions as `Error`s.
fn rejection(what: &str, e: &JsValue) -> IpcError {
    let json = js_sys::JSON::stringify(e).ok().map(String::from);
    rejection_from(what, json.as_deref(), &js_text(e))
}

fn rejection_from(what: &str, json: Option<&str>, text: &str) -> IpcError {
    if let Some(json) = json {
        if let Ok(err) = serde_json::from_str::<IpcError>(json) {
            return err;
        }
        if let Ok(Value::String(message)) = serde_json::from_str::<Value>(json) {
            return IpcError::new("backend", format!("{what}: {message}"));
        }
    }
    IpcError::new("backend", format!("{what}: {text}"))
}

/// A JS value in words: an `Error`'s message, a string itself, anything else as wasm-bindgen
/// describes it.
fn js_text(e: &JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use tw_protocol::{ListToolsParams, Settings};

    use super::*;

    #[test]
    fn parameters_travel_as_params_and_none_as_an_empty_object() {
        let with = command_args(
            "list_tools",
            &ListToolsParams {
                search: Some("file".into()),
            },
        );
        assert_eq!(with, Ok(r#"{"params":{"search":"file"}}"#.to_owned()));
        assert_eq!(command_args("get_settings", &()), Ok("{}".to_owned()));
    }

    #[test]
    fn rejections_keep_the_backends_error_or_say_what_failed() {
        let wire = r#"{"code":"invalid","message":"unknown tier","field":"/tier"}"#;
        assert_eq!(
            vec![
                rejection_from("set_tool_enabled", Some(wire), "[object Object]"),
                rejection_from(
                    "get_tool",
                    Some(r#""get_tool not allowed""#),
                    "get_tool not allowed"
                ),
                rejection_from("list_tools", Some("{}"), "TypeError: x is undefined"),
                rejection_from("list_tools", None, "boom"),
            ],
            vec![
                IpcError {
                    code: "invalid".into(),
                    message: "unknown tier".into(),
                    field: Some("/tier".into()),
                },
                IpcError::new("backend", "get_tool: get_tool not allowed"),
                IpcError::new("backend", "list_tools: TypeError: x is undefined"),
                IpcError::new("backend", "list_tools: boom"),
            ]
        );
    }

    #[test]
    fn replies_that_do_not_match_the_contract_are_errors() {
        assert_eq!(decode_text::<bool>("cancel_execution", "true"), Ok(true));
        let err = decode_text::<Settings>("get_settings", r#"{"mode":"normal"}"#).unwrap_err();
        assert_eq!(
            err,
            IpcError::new(
                "internal",
                "get_settings: the backend's reply does not match this UI: \
                 missing field `modes` at line 1 column 17"
            )
        );
    }
}
