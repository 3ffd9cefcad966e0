//! Reading HTML a server sent, which may have been written to hurt the reader. Two things can:
//! elements nested so deep that a recursive walk (the Markdown converter's) overflows the
//! thread's stack and aborts the whole process, and nesting that makes the HTML tree builder's
//! scope checks quadratic, so a few hundred kilobytes cost minutes of CPU. So a page is fed to
//! the parser in slices, with the deepest open path, the time spent and cancellation checked
//! between them; a tree deeper than [`MAX_DEPTH`] is refused before anything walks it; and all
//! of it runs on the blocking pool, never on the runtime's async workers. Only a page that
//! passes is searched for its article (Readability, by dom_smoothie) and turned into Markdown.

use std::time::{Duration, Instant};

use html5ever::tendril::{StrTendril, TendrilSink};
use markup5ever_rcdom::{Handle, NodeData, RcDom};
use tokio_util::sync::CancellationToken;

/// The deepest nesting read. Browsers' parsers stop nesting at 512; real pages stay far below.
pub(super) const MAX_DEPTH: usize = 256;
/// How long parsing one page may take.
const BUDGET: Duration = Duration::from_secs(5);
/// How much is fed to the parser between checks.
const SLICE: usize = 16 << 10;

/// Why a page could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// Elements nest deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Parsing ran past its time budget.
    TooSlow(Duration),
    /// The call was cancelled.
    Cancelled,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::TooDeep => write!(
                f,
                "the page nests elements more than {MAX_DEPTH} deep, deeper than HTML is read; \
                 fetch it as text"
            ),
            Unreadable::TooSlow(d) => write!(
                f,
                "the page took longer than {:.0} s to read as HTML; fetch it as text",
                d.as_secs_f64()
            ),
            Unreadable::Cancelled => f.write_str("the call was cancelled"),
        }
    }
}

/// Parses `html` into a tree no deeper than [`MAX_DEPTH`]. Blocking: call it on the blocking pool.
pub(super) fn parse(html: &str, cancel: &CancellationToken) -> Result<RcDom, Unreadable> {
    parse_within(html, cancel, BUDGET)
}

fn parse_within(
    html: &str,
    cancel: &CancellationToken,
    budget: Duration,
) -> Result<RcDom, Unreadable> {
    let sink = RcDom::default();
    let document = sink.document.clone();
    let mut parser = html5ever::parse_document(sink, Default::default());
    let started = Instant::now();
    let mut rest = html;
    while !rest.is_empty() {
        let mut cut = rest.len().min(SLICE);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (slice, after) = rest.split_at(cut);
        parser.process(StrTendril::from_slice(slice));
        rest = after;
        if cancel.is_cancelled() {
            return Err(Unreadable::Cancelled);
        }
        if started.elapsed() > budget {
            return Err(Unreadable::TooSlow(budget));
        }
        // The parser inserts where its deepest open element is: the last child, all the way
        // down, in all but misnested tables (which the time budget bounds).
        if open_depth(&document) > MAX_DEPTH {
            return Err(Unreadable::TooDeep);
        }
    }
    let dom = parser.finish();
    if depth(&dom.document) > MAX_DEPTH {
        return Err(Unreadable::TooDeep);
    }
    Ok(dom)
}

/// The length of the path of last children from `node` that are elements, counted up to one
/// past the limit.
fn open_depth(node: &Handle) -> usize {
    let mut depth = 0;
    let mut at = node.clone();
    while depth <= MAX_DEPTH {
        let last = at.children.borrow().last().cloned();
        match last {
            Some(child) if matches!(child.data, NodeData::Element { .. }) => {
                depth += 1;
                at = child;
            }
            _ => break,
        }
    }
    depth
}

/// The deepest element under `node`, counted up to one past the limit, without recursion.
fn depth(node: &Handle) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(node.clone(), 0usize)];
    while let Some((n, d)) = stack.pop() {
        deepest = deepest.max(d);
        if deepest > MAX_DEPTH {
            break;
        }
        for child in n.children.borrow().iter() {
            if matches!(child.data, NodeData::Element { .. }) {
                stack.push((child.clone(), d + 1));
            }
        }
    }
    deepest
}

/// Pages with more elements than this are not searched for an article (Readability's scoring
/// grows with the tree); they are read whole.
const MAX_ARTICLE_ELEMENTS: usize = 50_000;

/// A page as Markdown: its article when Readability finds one (navigation, sidebars, footers
/// and the like left out, the title as a heading), else the whole page; scripts, styles and
/// other non-content left out either way. Blocking.
pub(crate) fn markdown(html: &str, cancel: &CancellationToken) -> Result<String, Unreadable> {
    // Parsed within the bounds first: a page that passes is no deeper than MAX_DEPTH and quick
    // to parse, so the article search, which parses it again, is safe to run on it.
    let dom = parse(html, cancel)?;
    if let Some((title, content)) = article(html) {
        let article = parse(&content, cancel)?;
        let body = to_markdown(&article);
        let body = body.trim();
        return Ok(titled(title.trim(), body));
    }
    if cancel.is_cancelled() {
        return Err(Unreadable::Cancelled);
    }
    Ok(to_markdown(&dom))
}

/// An article's Markdown under its title as the one top heading. Readability turns the page's
/// own top heading into a second-level one; when that heading is the title, it is lifted back.
fn titled(title: &str, body: &str) -> String {
    let (first, rest) = body.split_once('\n').unwrap_or((body, ""));
    let heading = first
        .starts_with('#')
        .then(|| first.trim_start_matches('#').trim());
    match heading {
        Some(h) if h == title || title.is_empty() => format!("# {h}\n{rest}").trim_end().to_owned(),
        _ if title.is_empty() => body.to_owned(),
        _ => format!("# {title}\n\n{body}"),
    }
}

/// The page's article by Readability: its title and its content as HTML, when it has one.
fn article(html: &str) -> Option<(String, String)> {
    let config = dom_smoothie::Config {
        max_elements_to_parse: MAX_ARTICLE_ELEMENTS,
        ..Default::default()
    };
    let mut readability = dom_smoothie::Readability::new(html, None, Some(config)).ok()?;
    let article = readability.parse().ok()?;
    (!article.text_content.trim().is_empty()).then(|| (article.title, article.content.to_string()))
}

fn to_markdown(dom: &RcDom) -> String {
    htmd::HtmlToMarkdown::builder()
        .skip_tags(vec![
            "script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas",
        ])
        .build()
        .tree_to_markdown(&dom.document)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn nested(depth: usize) -> String {
        format!(
            "{}<p>deep</p>{}",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        )
    }

    #[test]
    fn a_page_reads_as_markdown_without_its_scripts() {
        let page = "<html><head><style>p{}</style></head><body><h1>Title</h1>\
                    <script>alert(1)</script><p>A <a href=\"/x\">link</a>.</p></body></html>";
        let md = markdown(page, &CancellationToken::new()).unwrap();
        assert_eq!(md, "# Title\n\nA [link](/x).");
    }

    /// A news page: navigation, a sidebar of links, a footer, and the article between them.
    #[test]
    fn an_article_page_reads_as_its_article_under_its_title() {
        let paragraph = |n: usize| {
            format!(
                "<p>Paragraph {n} of the story, long enough to be read as prose by anyone \
                 scoring a page for its content: it has sentences, commas, and a point to make \
                 about the governed tools that agents call.</p>"
            )
        };
        let story: String = (1..=6).map(paragraph).collect();
        let page = format!(
            "<html><head><title>Agents and their tools</title></head><body>\
             <nav><a href=\"/\">Home</a> <a href=\"/news\">News</a> <a href=\"/about\">About</a></nav>\
             <aside class=\"sidebar\"><ul><li><a href=\"/a\">Related one</a></li>\
             <li><a href=\"/b\">Related two</a></li></ul></aside>\
             <article><h1>Agents and their tools</h1>{story}</article>\
             <footer>Copyright nobody, all rights reserved. <a href=\"/terms\">Terms</a></footer>\
             </body></html>"
        );
        let md = markdown(&page, &CancellationToken::new()).unwrap();
        assert!(
            md.starts_with("# Agents and their tools\n\nParagraph 1 of the story"),
            "{md}"
        );
        for n in 1..=6 {
            assert_eq!(md.matches(&format!("Paragraph {n} of")).count(), 1, "{md}");
        }
        for chrome in ["Home", "Related one", "Copyright", "Terms"] {
            assert!(!md.contains(chrome), "{chrome:?} in {md}");
        }
    }

    #[test]
    fn nesting_up_to_the_limit_is_read_and_beyond_it_refused() {
        let cancel = CancellationToken::new();
        // html and body are two levels of the tree.
        assert!(markdown(&nested(MAX_DEPTH - 3), &cancel).is_ok());
        assert_eq!(
            markdown(&nested(MAX_DEPTH), &cancel),
            Err(Unreadable::TooDeep)
        );
    }

    /// A page nested 400,000 deep (2 MB) would abort the process through the recursive walk,
    /// and cost the tree builder minutes; it is refused after the first slices, on a stack far
    /// smaller than a worker's.
    #[test]
    fn a_page_nested_deeper_than_any_stack_is_refused_early() {
        let page = nested(400_000);
        let outcome = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || markdown(&page, &CancellationToken::new()).map(|_| ()))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(outcome, Err(Unreadable::TooDeep));
    }

    /// Misnested table content is inserted before the table, off the path of last children,
    /// so only the time budget stops it.
    #[test]
    fn nesting_hidden_from_the_depth_check_runs_into_the_time_budget() {
        let page = format!("<table>{}", "<div>".repeat(400_000));
        let outcome =
            parse_within(&page, &CancellationToken::new(), Duration::from_millis(200)).map(|_| ());
        assert_eq!(
            outcome,
            Err(Unreadable::TooSlow(Duration::from_millis(200)))
        );
    }

    #[test]
    fn a_cancelled_call_stops_reading() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let page = "<p>x</p>".repeat(10_000);
        assert_eq!(
            parse(&page, &cancel).map(|_| ()),
            Err(Unreadable::Cancelled)
        );
    }
}
