//! Each provider's request and answer, read from pages shaped like the real ones.

use pretty_assertions::assert_eq;

use super::*;

fn settings(provider: SearchProvider, url: &str) -> SearchSettings {
    SearchSettings {
        provider,
        url: url.to_owned(),
        api_key_env: (provider == SearchProvider::Brave).then(|| "BRAVE_KEY".to_owned()),
    }
}

fn go() -> CancellationToken {
    CancellationToken::new()
}

fn key(name: &str) -> Option<String> {
    (name == "BRAVE_KEY").then(|| "k-1".to_owned())
}

#[test]
fn each_provider_is_asked_in_its_own_terms() {
    let cases = [
        (
            settings(SearchProvider::Searxng, "http://127.0.0.1:8888"),
            "http://127.0.0.1:8888/search?q=rust+async+site%3Adocs.rs&format=json&time_range=week",
            vec![("Accept", "application/json")],
        ),
        (
            settings(SearchProvider::Searxng, "https://searx.example/search"),
            "https://searx.example/search?q=rust+async+site%3Adocs.rs&format=json&time_range=week",
            vec![("Accept", "application/json")],
        ),
        (
            settings(
                SearchProvider::Brave,
                "https://api.search.brave.com/res/v1/web/search",
            ),
            "https://api.search.brave.com/res/v1/web/search?q=rust+async+site%3Adocs.rs&count=3&freshness=pw",
            vec![
                ("Accept", "application/json"),
                ("X-Subscription-Token", "k-1"),
            ],
        ),
        (
            settings(
                SearchProvider::Duckduckgo,
                "https://html.duckduckgo.com/html/",
            ),
            "https://html.duckduckgo.com/html/?q=rust+async+site%3Adocs.rs&df=w",
            vec![("Accept", "text/html")],
        ),
    ];
    for (s, url, headers) in cases {
        let req = request(&s, "rust async site:docs.rs", 3, Some(TimeRange::Week), key).unwrap();
        assert_eq!(req.url, url);
        for (name, value) in headers {
            assert!(
                req.headers.iter().any(|(k, v)| k == name && v == value),
                "{url}: {:?}",
                req.headers
            );
        }
    }
    let e = request(
        &settings(SearchProvider::Brave, "https://b.example/"),
        "q",
        3,
        None,
        |_| None,
    )
    .err()
    .unwrap();
    assert_eq!(e.code, NOT_CONFIGURED);
    assert!(e.message.contains("BRAVE_KEY"), "{}", e.message);
}

fn hit(title: &str, url: &str, snippet: &str) -> Hit {
    Hit {
        title: title.to_owned(),
        url: url.to_owned(),
        snippet: snippet.to_owned(),
    }
}

#[test]
fn searxng_and_brave_answers_are_read_in_order() {
    let searx = br#"{"query": "q", "number_of_results": 0, "results": [
        {"title": "Tokio", "url": "https://tokio.rs/", "content": "An async runtime", "engine": "ddg"},
        {"title": "No snippet", "url": "https://example.org/x", "content": null}
    ], "answers": [], "suggestions": []}"#;
    assert_eq!(
        parse(SearchProvider::Searxng, searx, &go()).unwrap(),
        vec![
            hit("Tokio", "https://tokio.rs/", "An async runtime"),
            hit("No snippet", "https://example.org/x", ""),
        ]
    );
    let brave =
        br#"{"type": "search", "query": {"original": "q"}, "web": {"type": "search", "results": [
        {"title": "The <strong>Rust</strong> Book", "url": "https://doc.rust-lang.org/book/",
         "description": "Learn <strong>Rust</strong>  from   the start", "page_age": "2024"}
    ]}}"#;
    assert_eq!(
        parse(SearchProvider::Brave, brave, &go()).unwrap(),
        vec![hit(
            "The Rust Book",
            "https://doc.rust-lang.org/book/",
            "Learn Rust from the start"
        )]
    );
    assert_eq!(
        parse(SearchProvider::Brave, br#"{"type": "search"}"#, &go()).unwrap(),
        vec![]
    );
    assert!(parse(SearchProvider::Searxng, b"<html>rate limited</html>", &go()).is_err());
}

/// Shaped like html.duckduckgo.com's answer: an ad first, then organic results whose links go
/// through the redirector.
const DDG: &str = r#"<!DOCTYPE html><html><body><div id="links" class="results">
<div class="result results_links results_links_deep result--ad">
  <h2 class="result__title"><a class="result__a" href="https://duckduckgo.com/y.js?ad_provider=x">Buy now</a></h2>
  <a class="result__snippet" href="https://ads.example/">An ad</a>
</div>
<div class="result results_links results_links_deep web-result">
  <div class="links_main links_deep result__body">
    <h2 class="result__title">
      <a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fdocs.rs%2Ftokio%2Flatest%2Ftokio%2F&amp;rut=abc">tokio - <b>Rust</b></a>
    </h2>
    <div class="result__extras"><a class="result__url" href="x">docs.rs/tokio</a></div>
    <a class="result__snippet" href="x">A runtime for writing <b>reliable</b>,
       asynchronous applications.</a>
  </div>
</div>
<div class="result results_links web-result"><div class="result__body">
  <h2 class="result__title"><a class="result__a" href="https://example.org/direct">Direct link</a></h2>
</div></div>
<div class="result web-result"><h2><a class="result__a" href="javascript:alert(1)">Not a page</a></h2></div>
</div></body></html>"#;

#[test]
fn duckduckgo_results_skip_ads_and_follow_the_redirector() {
    assert_eq!(
        parse(SearchProvider::Duckduckgo, DDG.as_bytes(), &go()).unwrap(),
        vec![
            hit(
                "tokio - Rust",
                "https://docs.rs/tokio/latest/tokio/",
                "A runtime for writing reliable, asynchronous applications."
            ),
            hit("Direct link", "https://example.org/direct", ""),
        ]
    );
}
