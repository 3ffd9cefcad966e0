//! `web_search`: one query to the search provider the config names (a SearXNG instance's JSON
//! API, the Brave Search API, or DuckDuckGo's HTML endpoint), answered as title, URL and snippet.
//! The provider's request goes through the gatekeeper like any fetch, under a rule of its own:
//! the administrator named that host, so it is reachable even on a private address. The policy's
//! and the skill's domain rules for the call judge the results instead: a result on a host the
//! call's rules would refuse is withheld, and the answer says how many were.

use std::cell::RefCell;

use markup5ever_rcdom::{Handle, NodeData};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tw_core::target::{DomainList, Egress, EgressLayer, parse_host};
use tw_core::{ErrorCode, RiskLevel, ToolCategory, ToolDefinition};

use super::super::{BuiltinTool, ToolContext, ToolFailure, ToolFuture, args, lit, output};
use super::{failure, html, invalid, net_context};
use crate::config::{SearchProvider, SearchSettings};
use crate::net::{Limits, Request};

/// Results returned unless the call asks for another number.
const DEFAULT_COUNT: u64 = 5;
/// The most results a call may ask for.
const MAX_COUNT: u64 = 20;
/// The most of a provider's answer read.
const MAX_ANSWER_BYTES: usize = 2 << 20;
/// The code of the failure when no provider is configured.
const NOT_CONFIGURED: &str = "not_configured";

pub(super) struct WebSearch;

#[derive(Deserialize)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    count: Option<u64>,
    #[serde(default)]
    site: Option<String>,
    #[serde(default)]
    time_range: Option<TimeRange>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum TimeRange {
    Day,
    Week,
    Month,
    Year,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Hit {
    title: String,
    url: String,
    snippet: String,
}

#[derive(Serialize)]
struct SearchOutput {
    provider: &'static str,
    query: String,
    results: Vec<Hit>,
    #[serde(skip_serializing_if = "is_zero")]
    withheld: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl BuiltinTool for WebSearch {
    fn definition(&self) -> Result<ToolDefinition, tw_core::CoreError> {
        let mut d = ToolDefinition::new(
            lit::name("web_search")?,
            "Search the web through the configured search provider and return results as \
             title, URL and snippet. Results on hosts the network rules refuse are withheld.",
            ToolCategory::Network,
            lit::group("net")?,
            lit::params(json!({
                "type": "object",
                "required": ["query"],
                "additionalProperties": false,
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 2000,
                              "description": "What to search for."},
                    "count": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT,
                              "description": "How many results (5 unless given)."},
                    "site": {"type": "string", "minLength": 1, "maxLength": 253,
                             "description": "Only results from this host, like docs.rs."},
                    "time_range": {"type": "string", "enum": ["day", "week", "month", "year"],
                                   "description": "Only results from the last day, week, month or year."}
                }
            }))?,
        );
        d.output_schema = lit::output(json!({
            "type": "object",
            "required": ["provider", "query", "results"],
            "properties": {
                "provider": {"type": "string"},
                "query": {"type": "string"},
                "results": {"type": "array", "items": {
                    "type": "object",
                    "required": ["title", "url", "snippet"],
                    "properties": {
                        "title": {"type": "string"},
                        "url": {"type": "string"},
                        "snippet": {"type": "string"}
                    }
                }},
                "withheld": {"type": "integer", "minimum": 1,
                             "description": "Results left out because the call's rules refuse their hosts."}
            }
        }))?;
        d.risk_level = RiskLevel::Low;
        d.constraints.max_execution_time_ms = 65_000;
        d.constraints.max_output_bytes = 1 << 20;
        Ok(d)
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: &'a Value) -> ToolFuture<'a> {
        Box::pin(search(ctx, args))
    }
}

async fn search(ctx: &ToolContext, raw: &Value) -> Result<Value, ToolFailure> {
    let a: SearchArgs = args(raw)?;
    let net = net_context(ctx)?;
    let Some(settings) = &net.settings.search else {
        return Err(ToolFailure::failed(
            NOT_CONFIGURED,
            "no web search provider is configured: add a [network.search] table to the config \
             with provider = \"searxng\" and the url of an instance, provider = \"brave\" and \
             api_key_env naming the variable that holds the key, or provider = \"duckduckgo\"",
        ));
    };
    let mut query = a.query.trim().to_owned();
    if query.is_empty() {
        return Err(invalid("query: the query is blank".to_owned()));
    }
    if let Some(site) = &a.site {
        let host = parse_host(site).map_err(|e| invalid(format!("site: {e}")))?;
        query.push_str(&format!(" site:{host}"));
    }
    let count =
        usize::try_from(a.count.unwrap_or(DEFAULT_COUNT).clamp(1, MAX_COUNT)).unwrap_or(usize::MAX);
    let req = request(settings, &query, count, a.time_range, |v| {
        std::env::var(v).ok()
    })?;
    let host = reqwest::Url::parse(&settings.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let provider_rule = Egress::new(vec![EgressLayer {
        source: "config network.search".to_owned(),
        allow: DomainList::parse([host.as_str()]).map_err(|e| {
            ToolFailure::failed(
                ErrorCode::EXECUTION_FAILED,
                format!("network.search.url: {e}"),
            )
        })?,
        ..EgressLayer::default()
    }]);
    let limits = Limits {
        max_response_bytes: MAX_ANSWER_BYTES.min(net.settings.limits.max_response_bytes),
        ..net.settings.limits
    };
    let name = settings.provider.as_str();
    let response = net
        .fetch_under(&provider_rule, req, &limits)
        .await
        .map_err(failure)?;
    if !(200..300).contains(&response.status) {
        let hint = match (settings.provider, response.status) {
            (SearchProvider::Searxng, 403) => {
                ": the instance does not serve JSON; add json to search.formats in its settings.yml"
            }
            (SearchProvider::Brave, 401 | 403 | 422) => ": check the subscription token",
            (_, 429) | (SearchProvider::Duckduckgo, 202) => ": the provider is limiting requests",
            _ => "",
        };
        return Err(ToolFailure::failed(
            ErrorCode::EXECUTION_FAILED,
            format!(
                "the search provider ({name} at {host}) answered {}{hint}",
                response.status
            ),
        ));
    }
    let provider = settings.provider;
    let cancel = ctx.cancel.clone();
    let read = tokio::task::spawn_blocking(move || parse(provider, &response.body, &cancel))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
    let hits = read.map_err(|e| {
        ToolFailure::failed(
            ErrorCode::EXECUTION_FAILED,
            format!(
                "the search provider ({name} at {host}) sent an answer that could not be read: {e}"
            ),
        )
    })?;
    let mut results = Vec::new();
    let mut withheld = 0;
    for hit in hits {
        if results.len() == count {
            break;
        }
        if net.egress.url(&hit.url).is_err() {
            withheld += 1;
            continue;
        }
        results.push(hit);
    }
    output(&SearchOutput {
        provider: name,
        query,
        results,
        withheld,
    })
}

/// The provider's request for `query`.
fn request(
    s: &SearchSettings,
    query: &str,
    count: usize,
    time: Option<TimeRange>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Request, ToolFailure> {
    let mut url = reqwest::Url::parse(&s.url).map_err(|e| {
        ToolFailure::failed(
            ErrorCode::EXECUTION_FAILED,
            format!("network.search.url: {e}"),
        )
    })?;
    let mut headers = vec![("Accept".to_owned(), "application/json".to_owned())];
    let time = |day: &'static str, week, month, year| {
        time.map(|t| match t {
            TimeRange::Day => day,
            TimeRange::Week => week,
            TimeRange::Month => month,
            TimeRange::Year => year,
        })
    };
    match s.provider {
        SearchProvider::Searxng => {
            if !url.path().ends_with("/search") {
                let path = format!("{}/search", url.path().trim_end_matches('/'));
                url.set_path(&path);
            }
            let mut q = url.query_pairs_mut();
            q.append_pair("q", query).append_pair("format", "json");
            if let Some(t) = time("day", "week", "month", "year") {
                q.append_pair("time_range", t);
            }
        }
        SearchProvider::Brave => {
            let var = s.api_key_env.as_deref().unwrap_or_default();
            let key = env(var).filter(|k| !k.is_empty()).ok_or_else(|| {
                ToolFailure::failed(
                    NOT_CONFIGURED,
                    format!(
                        "the Brave Search API needs its subscription token in the environment \
                         variable {var}, which is not set in the runtime's environment"
                    ),
                )
            })?;
            headers.push(("X-Subscription-Token".to_owned(), key));
            let mut q = url.query_pairs_mut();
            q.append_pair("q", query)
                .append_pair("count", &count.to_string());
            if let Some(t) = time("pd", "pw", "pm", "py") {
                q.append_pair("freshness", t);
            }
        }
        SearchProvider::Duckduckgo => {
            headers = vec![
                ("Accept".to_owned(), "text/html".to_owned()),
                (
                    "User-Agent".to_owned(),
                    concat!(
                        "Mozilla/5.0 (compatible; Toolwarden/",
                        env!("CARGO_PKG_VERSION"),
                        ")"
                    )
                    .to_owned(),
                ),
            ];
            let mut q = url.query_pairs_mut();
            q.append_pair("q", query);
            if let Some(t) = time("d", "w", "m", "y") {
                q.append_pair("df", t);
            }
        }
    }
    Ok(Request {
        url: url.to_string(),
        headers,
        ..Request::default()
    })
}

/// Reads a provider's answer into results, in its order. Blocking (HTML is parsed).
fn parse(
    provider: SearchProvider,
    body: &[u8],
    cancel: &CancellationToken,
) -> Result<Vec<Hit>, String> {
    #[derive(Deserialize)]
    struct Searx {
        #[serde(default)]
        results: Vec<SearxHit>,
    }
    #[derive(Deserialize)]
    struct SearxHit {
        #[serde(default)]
        title: String,
        url: String,
        #[serde(default)]
        content: Option<String>,
    }
    #[derive(Deserialize)]
    struct Brave {
        web: Option<BraveWeb>,
    }
    #[derive(Deserialize)]
    struct BraveWeb {
        #[serde(default)]
        results: Vec<BraveHit>,
    }
    #[derive(Deserialize)]
    struct BraveHit {
        #[serde(default)]
        title: String,
        url: String,
        #[serde(default)]
        description: String,
    }
    Ok(match provider {
        SearchProvider::Searxng => serde_json::from_slice::<Searx>(body)
            .map_err(|e| e.to_string())?
            .results
            .into_iter()
            .map(|h| Hit {
                title: h.title,
                url: h.url,
                snippet: h.content.unwrap_or_default(),
            })
            .collect(),
        SearchProvider::Brave => serde_json::from_slice::<Brave>(body)
            .map_err(|e| e.to_string())?
            .web
            .map(|w| w.results)
            .unwrap_or_default()
            .into_iter()
            .map(|h| Hit {
                title: plain(&h.title, cancel),
                url: h.url,
                snippet: plain(&h.description, cancel),
            })
            .collect(),
        SearchProvider::Duckduckgo => duckduckgo(body, cancel)?,
    })
}

/// The text of a snippet that may hold markup (`<strong>`), whitespace collapsed.
fn plain(snippet: &str, cancel: &CancellationToken) -> String {
    if !snippet.contains('<') {
        return snippet.to_owned();
    }
    match html::parse(snippet, cancel) {
        Ok(dom) => text(&dom.document),
        Err(_) => snippet.to_owned(),
    }
}

/// DuckDuckGo's HTML results: each `a.result__a` is a result (its link goes through
/// DuckDuckGo's redirector, whose `uddg` parameter holds the target) and the `.result__snippet`
/// after it is its snippet; ads (`.result--ad`) are skipped.
fn duckduckgo(body: &[u8], cancel: &CancellationToken) -> Result<Vec<Hit>, String> {
    let dom = html::parse(&String::from_utf8_lossy(body), cancel).map_err(|e| e.to_string())?;
    let mut hits: Vec<Hit> = Vec::new();
    // `dom` keeps the tree alive: dropping the last handle of a node empties the child lists
    // of everything under it.
    let mut stack: Vec<(Handle, bool)> = vec![(dom.document.clone(), false)];
    while let Some((node, mut in_ad)) = stack.pop() {
        if let NodeData::Element { attrs, .. } = &node.data {
            let attr = |name: &str| {
                attrs
                    .borrow()
                    .iter()
                    .find(|a| &*a.name.local == name)
                    .map(|a| a.value.to_string())
            };
            let class = attr("class").unwrap_or_default();
            let has = |c: &str| class.split_ascii_whitespace().any(|x| x == c);
            in_ad |= has("result--ad");
            if !in_ad && has("result__a") {
                if let Some(url) = attr("href").and_then(|h| ddg_target(&h)) {
                    hits.push(Hit {
                        title: text(&node),
                        url,
                        snippet: String::new(),
                    });
                }
                continue;
            }
            if !in_ad && has("result__snippet") {
                if let Some(last) = hits.last_mut().filter(|h| h.snippet.is_empty()) {
                    last.snippet = text(&node);
                }
                continue;
            }
        }
        let children: &RefCell<Vec<Handle>> = &node.children;
        for child in children.borrow().iter().rev() {
            stack.push((child.clone(), in_ad));
        }
    }
    Ok(hits)
}

/// Where a DuckDuckGo result link leads: the `uddg` target of its redirector, or the link itself;
/// only http and https.
fn ddg_target(href: &str) -> Option<String> {
    let full = if href.starts_with("//") {
        format!("https:{href}")
    } else {
        href.to_owned()
    };
    let url = reqwest::Url::parse(&full).ok()?;
    let target = match url.query_pairs().find(|(k, _)| k == "uddg") {
        Some((_, v)) if url.path() == "/l/" => v.into_owned(),
        _ => full,
    };
    let scheme_ok = target.starts_with("https://") || target.starts_with("http://");
    scheme_ok.then_some(target)
}

/// The text under `node`, whitespace collapsed.
fn text(node: &Handle) -> String {
    let mut raw = String::new();
    let mut stack = vec![node.clone()];
    while let Some(n) = stack.pop() {
        if let NodeData::Text { contents } = &n.data {
            raw.push_str(&contents.borrow());
        }
        for child in n.children.borrow().iter().rev() {
            stack.push(child.clone());
        }
    }
    raw.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
