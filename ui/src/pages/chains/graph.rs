//! A chain's steps drawn as a graph in SVG, left to right in layers (`logic::chains::layout`):
//! one box per step with its id and tool, an arrow from each step to every step that needs it
//! (solid for `depends_on`, dashed for a reference).

use leptos::prelude::*;
use tw_protocol::ChainStepInfo;

use crate::logic::chains::{EdgeKind, NODE_H, NODE_W, layout};

/// Longest tool name drawn whole in a box; longer ones are cut (the full name is the tooltip).
const TOOL_CHARS: usize = 24;

fn cut(text: &str) -> String {
    if text.chars().count() <= TOOL_CHARS {
        text.to_owned()
    } else {
        let head: String = text.chars().take(TOOL_CHARS - 1).collect();
        format!("{head}…")
    }
}

#[allow(unreachable_pub, reason = "#[component] expands to `pub` items")]
#[component]
pub(crate) fn ChainGraph(steps: Vec<ChainStepInfo>) -> impl IntoView {
    let g = layout(&steps);
    let edges = g
        .edges
        .iter()
        .map(|e| {
            let class = match e.kind {
                EdgeKind::DependsOn => "chain-edge depends",
                EdgeKind::Reference => "chain-edge reference",
            };
            // A gentle S-curve between the two boxes.
            let mid = (e.x1 + e.x2) / 2.0;
            let d = format!(
                "M{:.1},{:.1} C{mid:.1},{:.1} {mid:.1},{:.1} {:.1},{:.1}",
                e.x1, e.y1, e.y1, e.y2, e.x2, e.y2
            );
            view! {
                <path
                    class=class
                    d=d
                    data-from=e.from.clone()
                    data-to=e.to.clone()
                    marker-end="url(#chain-arrow)"
                ></path>
            }
        })
        .collect_view();
    let nodes = g
        .nodes
        .iter()
        .map(|n| {
            let tool = cut(&n.tool);
            view! {
                <g
                    class="chain-node"
                    data-step=n.id.clone()
                    data-layer=n.layer.to_string()
                    transform=format!("translate({:.1},{:.1})", n.x, n.y)
                >
                    <title>{format!("{}: {}", n.id, n.tool)}</title>
                    <rect width=NODE_W height=NODE_H rx="4"></rect>
                    <text class="chain-node-id" x="10" y="19">{n.id.clone()}</text>
                    <text class="chain-node-tool" x="10" y="37">{tool}</text>
                </g>
            }
        })
        .collect_view();
    view! {
        <div class="chain-graph-wrap">
            <svg
                id="chain-graph"
                class="chain-graph"
                width=g.width
                height=g.height
                viewBox=format!("0 0 {:.1} {:.1}", g.width, g.height)
                role="img"
                aria-label="The chain's steps and what each waits for"
            >
                <defs>
                    <marker
                        id="chain-arrow"
                        viewBox="0 0 10 10"
                        refX="10"
                        refY="5"
                        markerWidth="7"
                        markerHeight="7"
                        orient="auto-start-reverse"
                    >
                        <path d="M0,0 L10,5 L0,10 z"></path>
                    </marker>
                </defs>
                {edges}
                {nodes}
            </svg>
        </div>
        <p class="muted small">"Arrows: solid for depends_on, dashed where a step reads another's output."</p>
    }
}
