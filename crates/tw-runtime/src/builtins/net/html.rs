//! Reading HTML a server sent, which may have been written to hurt the reader. Two things can:
//! elements nested so deep that a recursive walk (the Markdown converter's) overflows the
//! thread's stack and aborts the whole process, and nesting that makes the HTML tree builder's
//! scope checks quadratic, so a few hundred kilobytes cost minutes of CPU. So a page is fed to
//! the parser in slices, with the deepest open path, the time spent and cancellation checked
//! between them; a tree deeper than [`MAX_DEPTH`] is refused before anything walks it; and all
//! of it runs on the blocking pool, never on the runtime's async workers.

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
pub(super) enum Unreadable {
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

/// A page as Markdown (scripts, styles and other non-content left out). Blocking.
pub(super) fn markdown(html: &str, cancel: &CancellationToken) -> Result<String, Unreadable> {
    let dom = parse(html, cancel)?;
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(vec![
            "script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas",
        ])
        .build();
    Ok(converter.tree_to_markdown(&dom.document))
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
