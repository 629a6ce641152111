//! `docs/audit-rules.md` and `toolgate_review::RULES` say the same thing:
//! every rule, in the same order, at the same severity.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use toolgate_review::{RULES, Severity};

#[test]
fn the_rules_page_lists_every_rule_at_its_severity() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/audit-rules.md");
    let page = std::fs::read_to_string(path).unwrap();
    let documented: Vec<(String, Severity)> = page
        .lines()
        .filter(|l| l.starts_with("| TG-"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let severity =
                Severity::parse(cells[2]).unwrap_or_else(|| panic!("unknown severity in {l:?}"));
            (cells[1].to_owned(), severity)
        })
        .collect();
    let coded: Vec<(String, Severity)> = RULES
        .iter()
        .map(|r| (r.id.to_owned(), r.severity))
        .collect();
    assert_eq!(
        documented, coded,
        "docs/audit-rules.md and RULES disagree; update the page's table"
    );
}
