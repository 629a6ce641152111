//! The policy's tests: first match, defaults, endpoints, shadowing.
//!
//! Layer: `decide`.

use super::*;
#[test]
fn a_hosts_disabled_entries_stay_off_and_its_auto_approved_tools_are_allowed() {
    use crate::config::GatewayConfig;
    let env = |_: &str| None;
    let c = GatewayConfig::parse_json(
        r#"{"mcpServers": {"fs": {"command": "npx", "autoApprove": ["read_file", "list[1]"]},
                           "old": {"command": "x", "disabled": true}}}"#,
        env,
    )
    .unwrap();
    assert!(!c.servers["old"].enabled && c.servers["fs"].enabled);
    let policy = Policy::new(&c.policy).unwrap();
    let decide = |name: &str| {
        let tool = name.split_once('.').unwrap().1;
        policy.decide(&ToolFacts::new(name, tool, None, None, false), None)
    };
    let read = decide("fs.read_file");
    assert_eq!(read.action, Action::Allow);
    assert_eq!(
        read.rule,
        r#"rule 1 (tools ["fs.read_file", "fs.list[[]1[]]"])"#
    );
    // Exactly those names: a glob character in a name is literal.
    assert_eq!(decide("fs.list[1]").action, Action::Allow);
    assert_eq!(decide("fs.list1").action, Action::Confirm);
    assert_eq!(decide("fs.write_file").action, Action::Confirm);
    for (text, says) in [
        (
            r#"{"mcpServers": {"a": {"command": "x", "disabled": "yes"}}}"#,
            "mcpServers.a.disabled is not true or false",
        ),
        (
            r#"{"mcpServers": {"a": {"command": "x", "autoApprove": "all"}}}"#,
            "mcpServers.a.autoApprove is not a list of tool names",
        ),
    ] {
        assert_eq!(
            GatewayConfig::parse_json(text, env)
                .unwrap_err()
                .to_string(),
            says
        );
    }
}

#[test]
fn the_first_matching_rule_decides_and_default_catches_the_rest() {
    let config: PolicyConfig = toml::from_str(
        r#"
        default = "confirm"
        [[rules]]
        tools = ["basket.get_*"]
        action = "allow"
        [[rules]]
        effects = ["delete"]
        action = "deny"
        "#,
    )
    .unwrap();
    let policy = Policy::new(&config).unwrap();
    let tool =
        |name: &str| ToolFacts::new(name, name.split('.').nth(1).unwrap(), None, None, false);
    assert_eq!(
        policy.decide(&tool("basket.get_cart"), None).action,
        Action::Allow
    );
    assert_eq!(
        policy.decide(&tool("files.remove_file"), None).action,
        Action::Deny
    );
    assert_eq!(
        policy.decide(&tool("basket.checkout"), None).action,
        Action::Confirm
    );
}

fn policy(text: &str) -> Policy {
    let config: PolicyConfig = toml::from_str(text).unwrap();
    Policy::new(&config).unwrap()
}

fn facts(name: &str, read_only: Option<bool>, trusted: bool) -> ToolFacts {
    let upstream = name.rsplit('.').next().unwrap();
    ToolFacts::new(name, upstream, None, read_only, trusted)
}

#[test]
fn without_a_default_only_trusted_read_only_tools_are_allowed() {
    let p = policy("");
    let decide = |f: ToolFacts| p.decide(&f, None).action;
    assert_eq!(decide(facts("a.list", Some(true), true)), Action::Allow);
    assert_eq!(decide(facts("a.list", Some(true), false)), Action::Confirm);
    assert_eq!(decide(facts("a.list", None, true)), Action::Confirm);
    assert_eq!(decide(facts("a.list", Some(false), true)), Action::Confirm);
}

#[test]
fn the_first_matching_rule_wins_and_names_itself() {
    let p = policy(
        "default = \"deny\"\n[[rules]]\ntools = [\"b.get_*\", \"b.quote\"]\naction = \"allow\"\n[[rules]]\ntools = [\"b.*\"]\naction = \"confirm\"\n",
    );
    let d = p.decide(&facts("b.get_cart", None, false), None);
    assert_eq!((d.action, d.reason.as_str()), (Action::Allow, "rule 1"));
    let d = p.decide(&facts("b.checkout", None, false), None);
    assert_eq!((d.action, d.reason.as_str()), (Action::Confirm, "rule 2"));
    let d = p.decide(&facts("c.x", None, true), None);
    assert_eq!((d.action, d.reason.as_str()), (Action::Deny, "default"));
}

#[test]
fn effect_classes_match_whatever_the_name() {
    let p = policy(
        "default = \"allow\"\n[[rules]]\neffects = [\"spend\", \"delete\"]\naction = \"deny\"\n",
    );
    assert_eq!(
        p.decide(&facts("shop.purchase_item", None, false), None)
            .action,
        Action::Deny
    );
    assert_eq!(
        p.decide(&facts("fs.delete_file", None, false), None).action,
        Action::Deny
    );
    assert_eq!(
        p.decide(&facts("fs.read_file", None, false), None).action,
        Action::Allow
    );
}

#[test]
fn caller_rules_need_a_verified_subject_or_scopes() {
    let p = policy(
        "default = \"deny\"\n[[rules]]\nsubjects = [\"ops-*\"]\naction = \"allow\"\n[[rules]]\nscopes = [\"tools:write\"]\naction = \"confirm\"\n",
    );
    let tool = facts("a.deploy", None, false);
    assert_eq!(p.decide(&tool, None).action, Action::Deny);
    let ops = AuthContext::new("ops-alice");
    assert_eq!(p.decide(&tool, Some(&ops)).action, Action::Allow);
    let writer = AuthContext::new("bob").with_scopes(["tools:write"]);
    assert_eq!(p.decide(&tool, Some(&writer)).action, Action::Confirm);
    assert_eq!(
        p.decide(&tool, Some(&AuthContext::new("bob"))).action,
        Action::Deny
    );
    // Which rule applies depends on the caller: the tool stays listed.
    assert_eq!(p.decide_for_all(&tool), None);
}

#[test]
fn a_deny_for_everyone_is_known_before_any_call() {
    let p = policy(
        "[[rules]]\ntools = [\"*.delete_*\"]\naction = \"deny\"\n[[rules]]\nsubjects = [\"x\"]\naction = \"allow\"\n",
    );
    let d = p
        .decide_for_all(&facts("fs.delete_file", None, false))
        .unwrap();
    assert_eq!(d.action, Action::Deny);
}

#[test]
fn remember_is_for_confirm_rules_and_bounded() {
    let p = policy("[[rules]]\ntools = [\"b.*\"]\naction = \"confirm\"\nremember = \"1h\"\n");
    let d = p.decide(&facts("b.pay", None, false), None);
    assert_eq!(d.remember, Some(Duration::from_secs(3600)));
    assert_eq!(p.decide(&facts("c.pay", None, false), None).remember, None);
    let error = |text: &str| {
        let config: PolicyConfig = toml::from_str(text).unwrap();
        Policy::new(&config).err().unwrap().to_string()
    };
    assert_eq!(
        error("[[rules]]\naction = \"allow\"\nremember = \"1h\"\n"),
        "policy rule 1: remember applies to approvals, so only to action = \"confirm\" (this rule says \"allow\")"
    );
    assert_eq!(
        error("[[rules]]\naction = \"confirm\"\nremember = \"2d\"\n"),
        "policy rule 1: remember = \"2d\": give between 1m and 24h (a longer approval is an allow rule)"
    );
    assert!(
        error("[[rules]]\naction = \"confirm\"\nremember = \"an hour\"\n")
            .starts_with("policy rule 1: remember: \"an hour\" is not a duration")
    );
}

#[test]
fn a_bad_glob_names_its_rule() {
    let config: PolicyConfig =
        toml::from_str("[[rules]]\ntools = [\"a\"]\naction = \"allow\"\n[[rules]]\ntools = [\"[\"]\naction = \"deny\"\n")
            .unwrap();
    let e = Policy::new(&config).err().unwrap();
    assert!(
        e.to_string().starts_with("policy rule 2: glob \"[\""),
        "{e}"
    );
}

#[test]
fn a_rule_that_earlier_rules_decide_entirely_is_named_with_them() {
    let config: PolicyConfig = toml::from_str(
        r#"
        [[rules]]
        tools = ["fs.*"]
        action = "confirm"
        [[rules]]
        tools = ["fs.delete_*"]
        action = "deny"
        [[rules]]
        tools = ["web.*"]
        subjects = ["ann"]
        action = "allow"
        [[rules]]
        tools = ["web.fetch"]
        action = "deny"
        [[rules]]
        tools = ["web.fetch"]
        subjects = ["ann"]
        scopes = ["web:write"]
        action = "deny"
        [[rules]]
        tools = ["db.read", "fs.read"]
        action = "allow"
        "#,
    )
    .unwrap();
    let policy = Policy::new(&config).unwrap();
    let tools: Vec<ToolFacts> = ["fs.read", "fs.delete_file", "web.fetch", "db.read"]
        .iter()
        .map(|n| ToolFacts::new(n, n.split('.').nth(1).unwrap(), None, None, false))
        .collect();
    let shadowed = policy.shadowed(&tools);
    assert_eq!(
        shadowed,
        [
            r#"rule 2 (tools ["fs.delete_*"]) never applies: rule 1 (tools ["fs.*"]) decides every call it would"#,
            r#"rule 5 (tools ["web.fetch"]; subjects ["ann"]; scopes ["web:write"]) never applies: rule 3 (tools ["web.*"]; subjects ["ann"]) decides every call it would"#,
        ],
        "rule 4 holds for callers other than ann, and rule 6 still decides db.read"
    );
}
