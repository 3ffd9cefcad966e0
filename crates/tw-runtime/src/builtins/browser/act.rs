//! The browser tools that act on a page (`browser_click`, `browser_type`, `browser_fill_form`,
//! `browser_select`, `browser_press_key`): side effects, so modes and confirmations apply to
//! them. An element is named by a reference from the last snapshot of the page or by a CSS
//! selector that matches exactly one element. Input is real input (mouse and keyboard events
//! through the DevTools protocol), and a click lands only where it was meant to: when another
//! element covers the target at the point it would be clicked, nothing is clicked.

use std::sync::Arc;
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::page::{
    EventFrameStartedLoading, EventFrameStoppedLoading,
};
use chromiumoxide::layout::Point;
use chromiumoxide::page::Page;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use tw_core::{ErrorCode, RiskLevel, ToolDefinition};

use super::{
    Held, cdp, cdp_failure, definition, download, hold, hold_for, in_world, url_and_title,
};
use crate::browser::{Refs, lock};
use crate::builtins::{BuiltinTool, PreviewFuture, ToolContext, ToolFailure, ToolFuture, args};

/// How long a navigation an action started may take to load.
pub(super) const NAVIGATION: Duration = Duration::from_secs(30);
/// How long after an action a navigation it caused is looked for.
const NAVIGATION_START: Duration = Duration::from_millis(200);
/// The most fields one `browser_fill_form` fills.
const MAX_FIELDS: usize = 50;

/// The element an action is aimed at: a reference from the last snapshot, or a CSS selector.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Target {
    #[serde(default, rename = "ref")]
    reference: Option<String>,
    #[serde(default)]
    selector: Option<String>,
}

/// The JSON Schema properties of a [`Target`].
pub(super) fn target_properties() -> Value {
    json!({
        "ref": {"type": "string", "pattern": "^e[0-9]{1,15}$",
                "description": "The element's reference from the last browser_snapshot (e.g. e42)."},
        "selector": {"type": "string", "minLength": 1, "maxLength": 2000,
                     "description": "A CSS selector matching exactly one element."}
    })
}

/// An element found on the page: its DOM node's backend id, and its role and accessible name.
#[derive(Debug, Clone)]
pub(super) struct Element {
    pub backend: i64,
    pub role: String,
    pub name: String,
}

impl Element {
    fn label(&self) -> String {
        if self.name.is_empty() {
            format!("the {} e{}", self.role, self.backend)
        } else {
            format!("the {} {:?} (e{})", self.role, self.name, self.backend)
        }
    }
}

fn refusal(message: impl Into<String>) -> ToolFailure {
    ToolFailure::failed(ErrorCode::INVALID_ARGUMENTS, message.into())
}

/// Finds the element `target` names on the held session's current page.
pub(super) async fn resolve(held: &Held, target: &Target) -> Result<Element, ToolFailure> {
    let refs = lock(&held.lease.tabs).refs.clone();
    resolve_on(&held.lease.page, &refs, target).await
}

/// Finds the element `target` names on `page`, whose last snapshot handed out `refs`.
async fn resolve_on(page: &Page, refs: &Refs, target: &Target) -> Result<Element, ToolFailure> {
    match (&target.reference, &target.selector) {
        (Some(r), None) => {
            let id: i64 = r
                .strip_prefix('e')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| refusal(format!("{r:?} is not an element reference (e42)")))?;
            let same_page = refs.target.as_ref() == Some(page.target_id());
            match refs.named.get(&id) {
                Some((role, name)) if same_page => Ok(Element {
                    backend: id,
                    role: role.clone(),
                    name: name.clone(),
                }),
                _ => Err(refusal(format!(
                    "{r} is not in the last snapshot of this page: take browser_snapshot again"
                ))),
            }
        }
        (None, Some(selector)) => {
            let quoted = serde_json::to_string(selector).map_err(cdp_failure)?;
            let expression = format!(
                "(() => {{ const all = document.querySelectorAll({quoted}); \
                 return all.length === 1 ? all[0] : all.length; }})()"
            );
            by_expression(page, &expression, selector).await
        }
        _ => Err(refusal(
            "name the element by exactly one of `ref` and `selector`",
        )),
    }
}

/// The element `expression` evaluates to in the isolated world; a number it evaluates to is
/// how many elements `selector` matched instead of one.
async fn by_expression(
    page: &Page,
    expression: &str,
    selector: &str,
) -> Result<Element, ToolFailure> {
    let found = in_world(
        page,
        "Runtime.evaluate",
        json!({"expression": expression, "returnByValue": false}),
        "contextId",
    )
    .await?;
    if let Some(e) = found.get("exceptionDetails") {
        let why = e["exception"]["description"]
            .as_str()
            .unwrap_or("it does not parse");
        return Err(refusal(format!(
            "the selector {selector:?} is not valid CSS: {why}"
        )));
    }
    let result = &found["result"];
    let Some(object) = result["objectId"].as_str() else {
        let n = result["value"].as_u64().unwrap_or(0);
        return Err(refusal(if n == 0 {
            format!("no element on the page matches {selector:?}")
        } else {
            format!(
                "{n} elements match {selector:?}: make it match one, or use a reference from \
                 browser_snapshot"
            )
        }));
    };
    let node = cdp(page, "DOM.describeNode", json!({"objectId": object})).await?;
    release(page, object).await;
    let backend = node["node"]["backendNodeId"]
        .as_i64()
        .ok_or_else(|| cdp_failure("the element has no node id"))?;
    let (role, name) = role_and_name(page, backend).await?;
    Ok(Element {
        backend,
        role,
        name,
    })
}

/// An element's role and accessible name, as Chromium's accessibility tree has them.
pub(super) async fn role_and_name(
    page: &Page,
    backend: i64,
) -> Result<(String, String), ToolFailure> {
    let tree = cdp(
        page,
        "Accessibility.getPartialAXTree",
        json!({"backendNodeId": backend, "fetchRelatives": false}),
    )
    .await?;
    let node = &tree["nodes"][0];
    let text = |v: &Value| v["value"].as_str().unwrap_or_default().to_owned();
    Ok((text(&node["role"]), text(&node["name"])))
}

/// A handle on the element in the tools' isolated world.
async fn object(page: &Page, e: &Element) -> Result<String, ToolFailure> {
    let v = in_world(
        page,
        "DOM.resolveNode",
        json!({"backendNodeId": e.backend}),
        "executionContextId",
    )
    .await
    .map_err(|_| gone(e))?;
    v["object"]["objectId"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| gone(e))
}

fn gone(e: &Element) -> ToolFailure {
    refusal(format!(
        "{} is no longer on the page: take browser_snapshot again",
        e.label()
    ))
}

async fn release(page: &Page, object: &str) {
    if let Err(e) = cdp(page, "Runtime.releaseObject", json!({"objectId": object})).await {
        tracing::debug!(error = ?e.message, "a page object could not be released");
    }
}

/// Calls `function` with the element as `this` (in the isolated world) and returns its value.
async fn call_on(
    page: &Page,
    e: &Element,
    function: &str,
    arguments: Vec<Value>,
) -> Result<Value, ToolFailure> {
    let object = object(page, e).await?;
    let v = cdp(
        page,
        "Runtime.callFunctionOn",
        json!({
            "functionDeclaration": function,
            "objectId": object,
            "arguments": arguments.into_iter().map(|v| json!({"value": v})).collect::<Vec<_>>(),
            "returnByValue": true,
            "awaitPromise": true,
        }),
    )
    .await;
    release(page, &object).await;
    let v = v?;
    if let Some(x) = v.get("exceptionDetails") {
        return Err(cdp_failure(format!(
            "{}: {}",
            e.label(),
            x["exception"]["description"].as_str().unwrap_or("failed")
        )));
    }
    Ok(v["result"]["value"].clone())
}

/// What an action on `targets` would touch, for the person asked to approve it: the page's
/// address and each element's role and accessible name (or why it cannot be found). Only
/// looks; the session's network stays closed.
fn preview(ctx: &ToolContext, targets: Vec<Target>) -> Option<PreviewFuture<'_>> {
    Some(Box::pin(async move {
        let net = ctx.net.as_ref()?;
        let (page, refs) = net.browsers.peek(&net.owner).await?;
        let (url, title) = url_and_title(&page).await.ok()?;
        let mut elements = Vec::with_capacity(targets.len());
        for t in &targets {
            elements.push(match resolve_on(&page, &refs, t).await {
                Ok(e) => e.label(),
                Err(f) => f.message,
            });
        }
        if targets.is_empty() {
            let focused = by_expression(&page, "document.activeElement", "the focus").await;
            elements.extend(focused.ok().map(|e| e.label()));
        }
        Some(json!({"page": url, "title": title, "elements": elements}))
    }))
}

fn targets_of(args: &Value) -> Vec<Target> {
    let one = |v: &Value| Target {
        reference: v["ref"].as_str().map(str::to_owned),
        selector: v["selector"].as_str().map(str::to_owned),
    };
    match args["fields"].as_array() {
        Some(fields) => fields.iter().map(one).collect(),
        None if args.get("ref").is_some() || args.get("selector").is_some() => vec![one(args)],
        None => Vec::new(),
    }
}

/// Runs `act`, then waits for a navigation it started (a link, a form's submission) to load.
pub(super) async fn settled<T>(
    page: &Page,
    act: impl Future<Output = Result<T, ToolFailure>>,
) -> Result<T, ToolFailure> {
    Ok(navigated(page, act).await?.0)
}

/// Like [`settled`], saying too whether the action started a navigation.
async fn navigated<T>(
    page: &Page,
    act: impl Future<Output = Result<T, ToolFailure>>,
) -> Result<(T, bool), ToolFailure> {
    let mut started = page
        .event_listener::<EventFrameStartedLoading>()
        .await
        .map_err(cdp_failure)?;
    let mut stopped = page
        .event_listener::<EventFrameStoppedLoading>()
        .await
        .map_err(cdp_failure)?;
    let out = act.await?;
    let Ok(Some(start)) = tokio::time::timeout(NAVIGATION_START, started.next()).await else {
        return Ok((out, false));
    };
    // Loaded (or failed) when the frame that started stops loading.
    let done = async {
        while let Some(stop) = stopped.next().await {
            if stop.frame_id == start.frame_id {
                return;
            }
        }
    };
    match tokio::time::timeout(NAVIGATION, done).await {
        Ok(()) => Ok((out, true)),
        Err(_) => Err(cdp_failure(format!(
            "the page the action opened did not load within {} s",
            NAVIGATION.as_secs()
        ))),
    }
}

/// Clicks the middle of the element with the mouse, if the element is what is there.
async fn click(page: &Page, e: &Element) -> Result<(), ToolFailure> {
    cdp(
        page,
        "DOM.scrollIntoViewIfNeeded",
        json!({"backendNodeId": e.backend}),
    )
    .await
    .map_err(|_| gone(e))?;
    let quads = cdp(
        page,
        "DOM.getContentQuads",
        json!({"backendNodeId": e.backend}),
    )
    .await
    .map_err(|_| gone(e))?;
    let point = quads["quads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|q| {
            let q: Vec<f64> = q.as_array()?.iter().filter_map(Value::as_f64).collect();
            (q.len() == 8).then_some(q)
        })
        .find(|q| area(q) > 1.0)
        .map(|q| Point {
            x: (q[0] + q[2] + q[4] + q[6]) / 4.0,
            y: (q[1] + q[3] + q[5] + q[7]) / 4.0,
        })
        .ok_or_else(|| {
            refusal(format!(
                "{} is not visible, so it cannot be clicked",
                e.label()
            ))
        })?;
    let hit = cdp(
        page,
        "DOM.getNodeForLocation",
        json!({"x": point.x.round() as i64, "y": point.y.round() as i64,
               "includeUserAgentShadowDOM": false}),
    )
    .await?;
    let hit = hit["backendNodeId"].as_i64();
    if hit != Some(e.backend) {
        let inside = match hit {
            Some(h) => {
                let other = object(
                    page,
                    &Element {
                        backend: h,
                        role: String::new(),
                        name: String::new(),
                    },
                )
                .await?;
                let object = object(page, e).await?;
                let v = cdp(
                    page,
                    "Runtime.callFunctionOn",
                    json!({
                        "functionDeclaration": "function(o) { return this === o || this.contains(o); }",
                        "objectId": object,
                        "arguments": [{"objectId": other}],
                        "returnByValue": true,
                    }),
                )
                .await;
                release(page, &object).await;
                release(page, &other).await;
                v?["result"]["value"].as_bool() == Some(true)
            }
            None => false,
        };
        if !inside {
            return Err(refusal(format!(
                "{} is covered by another element where it would be clicked, so nothing was \
                 clicked",
                e.label()
            )));
        }
    }
    page.click(point).await.map_err(cdp_failure)?;
    Ok(())
}

fn area(q: &[f64]) -> f64 {
    let mut a = 0.0;
    for i in 0..4 {
        let (x1, y1, x2, y2) = (
            q[2 * i],
            q[2 * i + 1],
            q[(2 * i + 2) % 8],
            q[(2 * i + 3) % 8],
        );
        a += x1 * y2 - x2 * y1;
    }
    (a / 2.0).abs()
}

/// Replaces the element's text with `text`, as typing it would.
async fn fill(page: &Page, e: &Element, text: &str, slowly: bool) -> Result<(), ToolFailure> {
    cdp(page, "DOM.focus", json!({"backendNodeId": e.backend}))
        .await
        .map_err(|_| refusal(format!("{} cannot take text", e.label())))?;
    call_on(
        page,
        e,
        "function() { if (this.select) { this.select(); return; } \
         const r = document.createRange(); r.selectNodeContents(this); \
         const s = getSelection(); s.removeAllRanges(); s.addRange(r); }",
        vec![],
    )
    .await?;
    if text.is_empty() {
        return press(page, "Delete").await;
    }
    if slowly {
        for c in text.chars() {
            let mut buf = [0u8; 4];
            let s = c.encode_utf8(&mut buf);
            if chromiumoxide::keys::get_key_definition(&*s).is_some() {
                press(page, s).await?;
            } else {
                cdp(page, "Input.insertText", json!({"text": s})).await?;
            }
        }
        Ok(())
    } else {
        cdp(page, "Input.insertText", json!({"text": text}))
            .await
            .map(|_| ())
    }
}

/// Presses and releases one key (`Enter`, `ArrowDown`, `a`).
async fn press(page: &Page, key: &str) -> Result<(), ToolFailure> {
    let Some(k) = chromiumoxide::keys::get_key_definition(key) else {
        return Err(refusal(format!(
            "{key:?} is not a key this browser knows (Enter, Tab, Escape, Backspace, ArrowDown, \
             PageDown, a, 1 ...)"
        )));
    };
    let text = k.text.or((k.key.chars().count() == 1).then_some(k.key));
    let mut down = json!({
        "type": if text.is_some() { "keyDown" } else { "rawKeyDown" },
        "key": k.key, "code": k.code,
        "windowsVirtualKeyCode": k.key_code, "nativeVirtualKeyCode": k.key_code,
    });
    if let Some(t) = text {
        down["text"] = json!(t);
    }
    cdp(page, "Input.dispatchKeyEvent", down).await?;
    cdp(
        page,
        "Input.dispatchKeyEvent",
        json!({"type": "keyUp", "key": k.key, "code": k.code,
               "windowsVirtualKeyCode": k.key_code, "nativeVirtualKeyCode": k.key_code}),
    )
    .await
    .map(|_| ())
}

/// Selects the options of a `<select>` whose value or label is in `values`; the values chosen.
async fn choose(page: &Page, e: &Element, values: &[String]) -> Result<Vec<Value>, ToolFailure> {
    let v = call_on(
        page,
        e,
        // A single select re-selects its first option the moment none is selected, so the
        // options wanted are found first and then chosen, never read back mid-way.
        "function(want) { if (this.tagName !== 'SELECT') return null; \
         const opts = Array.from(this.options); \
         const hits = opts.filter(o => !o.disabled && (want.includes(o.value) || \
           want.includes(o.label) || want.includes(o.text.trim()))); \
         if (hits.length === 0) return []; \
         if (this.multiple) { for (const o of opts) o.selected = hits.includes(o); } \
         else { this.selectedIndex = hits[0].index; } \
         this.dispatchEvent(new Event('input', {bubbles: true})); \
         this.dispatchEvent(new Event('change', {bubbles: true})); \
         return opts.filter(o => o.selected).map(o => o.value); }",
        vec![json!(values)],
    )
    .await?;
    match v {
        Value::Array(chosen) if !chosen.is_empty() => Ok(chosen),
        Value::Array(_) => Err(refusal(format!("{} has no option {values:?}", e.label()))),
        _ => Err(refusal(format!("{} is not a <select>", e.label()))),
    }
}

/// What kind of form control the element is: `select`, `checkbox`, `radio` or `text`, and
/// whether a checkbox or radio button is checked.
async fn control(page: &Page, e: &Element) -> Result<(String, bool), ToolFailure> {
    let v = call_on(
        page,
        e,
        "function() { if (this.tagName === 'SELECT') return ['select', false]; \
         if (this.tagName === 'INPUT' && (this.type === 'checkbox' || this.type === 'radio')) \
           return [this.type, this.checked]; \
         const role = this.getAttribute && this.getAttribute('role'); \
         if (role === 'checkbox' || role === 'switch') \
           return ['checkbox', this.getAttribute('aria-checked') === 'true']; \
         return ['text', false]; }",
        vec![],
    )
    .await?;
    Ok((
        v[0].as_str().unwrap_or("text").to_owned(),
        v[1].as_bool().unwrap_or(false),
    ))
}

/// The page's address and title after an action.
async fn after(page: &Page, mut out: Value) -> Result<Value, ToolFailure> {
    let (url, title) = url_and_title(page).await?;
    out["url"] = json!(url);
    out["title"] = json!(title);
    Ok(out)
}

fn action(
    name: &str,
    description: &str,
    params: Value,
    extra: Value,
) -> Result<ToolDefinition, tw_core::CoreError> {
    let mut properties = json!({
        "url": {"type": "string", "description": "The page's address afterwards."},
        "title": {"type": "string"}
    });
    if let (Some(p), Value::Object(more)) = (properties.as_object_mut(), extra) {
        p.extend(more);
    }
    let mut d = definition(
        name,
        description,
        params,
        json!({"type": "object", "required": ["url", "title"], "properties": properties}),
    )?;
    d.constraints.side_effects = true;
    d.risk_level = RiskLevel::Medium;
    Ok(d)
}

fn with_target(mut more: Value, required: &[&str]) -> Value {
    let mut properties = target_properties();
    if let (Some(p), Some(m)) = (properties.as_object_mut(), more.as_object_mut()) {
        p.append(m);
    }
    let mut schema = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": properties,
        "oneOf": [{"required": ["ref"]}, {"required": ["selector"]}],
    });
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

#[derive(Deserialize)]
struct ClickArgs {
    #[serde(flatten)]
    target: Target,
}

struct Click;

impl BuiltinTool for Click {
    fn preview<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> Option<PreviewFuture<'a>> {
        preview(ctx, targets_of(args))
    }

    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        action(
            "browser_click",
            "Click an element of your browser session's current page with the mouse, by its \
             reference from browser_snapshot or a CSS selector, and wait for a page it opens. \
             Nothing is clicked when another element covers it. A download it begins is saved \
             only where policy names a workspace folder for downloads.",
            with_target(json!({}), &[]),
            json!({
                "element": {"type": "string", "description": "What was clicked (page text)."},
                "download": {
                    "type": "object",
                    "description": "A download the click began: where it was saved in the \
                                    workspace, or why it was not (`refused`).",
                    "properties": {
                        "path": {"type": "string"},
                        "bytes": {"type": "integer"},
                        "sha256": {"type": "string"},
                        "rule": {"type": "string"},
                        "url": {"type": "string"},
                        "refused": {"type": "string"}
                    }
                }
            }),
        )
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: ClickArgs = super::super::args(args)?;
            let held = hold_for(ctx, true).await?;
            let page = &held.lease.page;
            let e = resolve(&held, &a.target).await?;
            let watch = download::Watch::start(&held).await?;
            let (_, before) = super::main_frame(page).await?;
            let ((), started) = navigated(page, click(page, &e)).await?;
            // A navigation that ended with the document it left is most likely a download,
            // whose news comes on the browser's connection, in no set order with the frame's:
            // it is waited for (see `Watch::outcome`).
            let unfinished = started && super::main_frame(page).await?.1 == before;
            let mut out = after(page, json!({"element": e.label()})).await?;
            if let Some(download) = watch.outcome(&held, unfinished).await {
                out["download"] = download;
            }
            Ok(out)
        })
    }
}

#[derive(Deserialize)]
struct TypeArgs {
    #[serde(flatten)]
    target: Target,
    text: String,
    #[serde(default)]
    submit: bool,
    #[serde(default)]
    slowly: bool,
}

struct Type;

impl BuiltinTool for Type {
    fn preview<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> Option<PreviewFuture<'a>> {
        preview(ctx, targets_of(args))
    }

    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        action(
            "browser_type",
            "Type text into an editable element (replacing what it holds), by reference or CSS \
             selector; `submit` presses Enter afterwards, `slowly` types key by key for pages \
             that listen to keys.",
            with_target(
                json!({
                    "text": {"type": "string", "maxLength": 100000},
                    "submit": {"type": "boolean"},
                    "slowly": {"type": "boolean"}
                }),
                &["text"],
            ),
            json!({"element": {"type": "string"}}),
        )
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: TypeArgs = super::super::args(args)?;
            let held = hold(ctx).await?;
            let page = &held.lease.page;
            let e = resolve(&held, &a.target).await?;
            fill(page, &e, &a.text, a.slowly).await?;
            if a.submit {
                settled(page, press(page, "Enter")).await?;
            }
            after(page, json!({"element": e.label()})).await
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Field {
    #[serde(default, rename = "ref")]
    reference: Option<String>,
    #[serde(default)]
    selector: Option<String>,
    value: Value,
}

#[derive(Deserialize)]
struct FillArgs {
    fields: Vec<Field>,
}

struct FillForm;

impl BuiltinTool for FillForm {
    fn preview<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> Option<PreviewFuture<'a>> {
        preview(ctx, targets_of(args))
    }

    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut field = with_target(
            json!({"value": {"type": ["string", "boolean"],
                             "description": "Text for a text field, the option for a select, \
                                             true or false for a checkbox or radio button."}}),
            &["value"],
        );
        field["description"] = json!("One form control and what it should hold.");
        action(
            "browser_fill_form",
            "Fill several form controls at once: text fields, selects, checkboxes and radio \
             buttons, each by reference or CSS selector. Does not submit the form.",
            json!({
                "type": "object",
                "required": ["fields"],
                "additionalProperties": false,
                "properties": {"fields": {"type": "array", "minItems": 1,
                                          "maxItems": MAX_FIELDS, "items": field}}
            }),
            json!({"filled": {"type": "array", "items": {"type": "string"}}}),
        )
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(fill_form(ctx, args))
    }
}

async fn fill_form(ctx: &ToolContext, raw: &Value) -> Result<Value, ToolFailure> {
    let a: FillArgs = args(raw)?;
    let held = hold(ctx).await?;
    let page = &held.lease.page;
    // Every field is found before any is touched: a wrong one changes nothing.
    let mut found = Vec::with_capacity(a.fields.len());
    for f in &a.fields {
        let target = Target {
            reference: f.reference.clone(),
            selector: f.selector.clone(),
        };
        found.push((resolve(&held, &target).await?, &f.value));
    }
    let mut filled = Vec::new();
    for (e, value) in found {
        let (kind, checked) = control(page, &e).await?;
        match (kind.as_str(), value) {
            ("checkbox" | "radio", Value::Bool(want)) => {
                if *want != checked {
                    if kind == "radio" && !want {
                        return Err(refusal(format!(
                            "{} is a radio button: choose another one rather than unchecking it",
                            e.label()
                        )));
                    }
                    click(page, &e).await?;
                }
            }
            ("select", Value::String(s)) => {
                choose(page, &e, std::slice::from_ref(s)).await?;
            }
            ("text", Value::String(s)) => fill(page, &e, s, false).await?,
            (kind, v) => {
                return Err(refusal(format!(
                    "{} is a {kind} control and cannot take {v}",
                    e.label()
                )));
            }
        }
        filled.push(e.label());
    }
    after(page, json!({"filled": filled})).await
}

#[derive(Deserialize)]
struct SelectArgs {
    #[serde(flatten)]
    target: Target,
    values: Vec<String>,
}

struct Select;

impl BuiltinTool for Select {
    fn preview<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> Option<PreviewFuture<'a>> {
        preview(ctx, targets_of(args))
    }

    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        action(
            "browser_select",
            "Choose options of a <select> by their value or label, by reference or CSS selector.",
            with_target(
                json!({"values": {"type": "array", "minItems": 1, "maxItems": 100,
                                  "items": {"type": "string", "maxLength": 1000}}}),
                &["values"],
            ),
            json!({"selected": {"type": "array", "items": {"type": "string"}}}),
        )
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: SelectArgs = super::super::args(args)?;
            let held = hold(ctx).await?;
            let page = &held.lease.page;
            let e = resolve(&held, &a.target).await?;
            let chosen = settled(page, choose(page, &e, &a.values)).await?;
            after(page, json!({"selected": chosen})).await
        })
    }
}

#[derive(Deserialize)]
struct KeyArgs {
    key: String,
}

struct PressKey;

impl BuiltinTool for PressKey {
    fn preview<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> Option<PreviewFuture<'a>> {
        preview(ctx, targets_of(args))
    }

    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        action(
            "browser_press_key",
            "Press a key on your browser session's current page (Enter, Tab, Escape, ArrowDown, \
             PageDown, a ...), where its focus is, and wait for a page it opens.",
            json!({
                "type": "object",
                "required": ["key"],
                "additionalProperties": false,
                "properties": {"key": {"type": "string", "minLength": 1, "maxLength": 32}}
            }),
            json!({}),
        )
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(async move {
            let a: KeyArgs = super::super::args(args)?;
            let held = hold(ctx).await?;
            let page = &held.lease.page;
            settled(page, press(page, &a.key)).await?;
            after(page, json!({})).await
        })
    }
}

pub(super) fn tools() -> Vec<Arc<dyn BuiltinTool>> {
    vec![
        Arc::new(Click),
        Arc::new(Type),
        Arc::new(FillForm),
        Arc::new(Select),
        Arc::new(PressKey),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quad_has_the_area_it_covers() {
        assert_eq!(area(&[0.0, 0.0, 10.0, 0.0, 10.0, 5.0, 0.0, 5.0]), 50.0);
        assert_eq!(area(&[3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]), 0.0);
    }

    #[test]
    fn the_actions_are_side_effects_aimed_by_ref_or_selector() {
        for t in tools() {
            let d = t.definition().unwrap_or_else(|e| panic!("{e}"));
            assert!(d.constraints.side_effects, "{}", d.name);
        }
        let schema = with_target(json!({}), &[]);
        assert_eq!(schema["oneOf"].as_array().map(Vec::len), Some(2));
    }
}
