//! The argument rules' domain lists as the egress gatekeeper's layers: the rules that apply to a
//! tool, each a layer of its own, so what judges a call's URL arguments also judges every host
//! and address its connections reach.

use pretty_assertions::assert_eq;

use super::*;
use crate::target::{Egress, parse_host};

#[test]
fn each_applying_rule_with_domain_lists_is_one_layer() {
    let p = policy(HOSTS);
    let layers = |name: &str| {
        p.rules
            .egress_layers(&tools()[name])
            .iter()
            .map(|l| l.source.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        layers("http_fetch"),
        [
            "policy rule wikipedia only",
            "policy rule no internal hosts"
        ]
    );
    assert_eq!(layers("echo"), ["policy rule no internal hosts"]);

    let egress = Egress::new(p.rules.egress_layers(&tools()["http_fetch"]));
    let rule = |url: &str| egress.url(url).map(|_| ()).map_err(|r| r.rule);
    assert_eq!(rule("https://en.wikipedia.org/wiki/Rust"), Ok(()));
    assert_eq!(
        rule("https://example.org/"),
        Err("policy rule wikipedia only allow_domains".to_owned())
    );
    // A wikipedia name that resolves to a private address is refused by the other rule.
    let refused = egress
        .address(
            &parse_host("en.wikipedia.org").unwrap(),
            "10.1.2.3".parse().unwrap(),
        )
        .unwrap_err();
    assert_eq!(
        refused.rule,
        "policy rule no internal hosts block_domains \"private\""
    );
}

#[test]
fn a_policy_without_domain_lists_adds_no_layer() {
    let p = policy("default = \"allow\"\n");
    assert!(p.rules.egress_layers(&tools()["http_fetch"]).is_empty());
}
