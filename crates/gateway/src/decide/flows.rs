//! Flow control decisions: what a flow is, what has entered it (labels),
//! and what a call of a class may do after that (`[flows]`).
//!
//! A flow is one conversation as the gateway can tell it apart: by
//! default every call of one caller on one endpoint within `window`
//! (hosts that carry a conversation-wide W3C trace id can ask for it,
//! `key = "auto"` or `"trace"`). A flow never joins two callers: the
//! caller is part of its key whatever the trace id says. Content enters a
//! flow when a call of an `untrusted` or `private` tool succeeds; a later
//! call of a `sink` or `destructive` tool is then held by the first rule
//! that matches.
//!
//! Layer: `decide`.

use std::time::Duration;

use toolgate_review::flows::{ClassedTool, FlowClass, FlowClasses, combinations};

use crate::config::{Action, ConfigError, FlowKey, FlowRule, FlowsConfig};

/// One class of content that entered a flow, and the call that brought it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    /// Its class (`untrusted` or `private`).
    pub class: FlowClass,
    /// The gateway tool that returned it.
    pub tool: String,
    /// When (ms since the Unix epoch).
    pub time_ms: i64,
    /// Where it came from, when the call said (`example.com`).
    pub from: Option<String>,
}

impl Label {
    /// `web.fetch at 14:02 UTC returned content from example.com`.
    pub fn said(&self) -> String {
        // `1970-01-01 14:02:00` → `14:02 UTC`.
        let full = crate::base::duration::utc(self.time_ms, false);
        let at = format!("{} UTC", full.get(11..16).unwrap_or(&full));
        let what = match self.class {
            FlowClass::Private => "read private data",
            _ => "returned content from outside the user's control",
        };
        match (&self.from, self.class) {
            (Some(from), FlowClass::Untrusted) => {
                format!("{} at {at} returned content from {from}", self.tool)
            }
            _ => format!("{} at {at} {what}", self.tool),
        }
    }
}

/// Which flow a call is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowId {
    /// What the audit row shows: `trace <id>` or `caller`.
    pub shown: String,
    /// The store's key: the caller, the endpoint and the id, each
    /// length-prefixed, so no part of it can be chosen to reach another
    /// caller's flow.
    pub key: String,
}

/// What holds a call because of its flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// `confirm` or `deny` (an `allow` rule holds nothing).
    pub action: Action,
    /// The rule (`built-in rule 1`, `flows rule 2`).
    pub rule: String,
    /// Why, for the person or the model: the earlier calls and what this
    /// one could do.
    pub why: String,
}

/// The running `[flows]`: its rules, what a flow is, how long it lasts.
#[derive(Debug)]
pub struct Flows {
    rules: Vec<FlowRule>,
    key: FlowKey,
    window: Duration,
}

impl Flows {
    /// The flows of `config`; `None` when they are off.
    pub fn new(config: &FlowsConfig) -> Result<Option<Self>, ConfigError> {
        if !config.on() {
            return Ok(None);
        }
        Ok(Some(Self {
            rules: config.rules()?,
            key: config.key,
            window: config.window()?,
        }))
    }

    /// How long labels last after they were added.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Whether any rule can hold a call of `classes`.
    pub fn may_hold(&self, classes: &[FlowClass]) -> bool {
        self.rules
            .iter()
            .any(|r| r.action != Action::Allow && r.calls.iter().any(|c| classes.contains(c)))
    }

    /// The flow of a call by `caller` (its verified subject) on `endpoint`
    /// (empty: the default one) carrying `trace` (a W3C trace id, already
    /// checked well formed); `None` when it is not tracked (`key =
    /// "trace"` and no trace id).
    pub fn flow_of(
        &self,
        caller: Option<&str>,
        endpoint: &str,
        trace: Option<&str>,
    ) -> Option<FlowId> {
        let trace = match self.key {
            FlowKey::Caller => None,
            FlowKey::Auto => trace,
            FlowKey::Trace => Some(trace?),
        };
        // Each part length-prefixed (and an anonymous caller marked apart
        // from an empty subject): no two different triples read alike, so
        // no id or endpoint can be chosen to reach another caller's flow.
        // Kept as text, not hashed: it is on every call of a classed tool.
        let key = match caller {
            Some(c) => format!(
                "s{}:{c}|{}:{endpoint}|{}",
                c.len(),
                endpoint.len(),
                trace.unwrap_or("")
            ),
            None => format!("a|{}:{endpoint}|{}", endpoint.len(), trace.unwrap_or("")),
        };
        Some(FlowId {
            shown: trace.map_or_else(|| "caller".to_owned(), |t| format!("trace {t}")),
            key,
        })
    }

    /// What the first matching rule does to a call of `tool` with
    /// `classes` after `entered` (the flow's labels); `None`: nothing
    /// holds it.
    pub fn decide(&self, tool: &str, classes: &[FlowClass], entered: &[Label]) -> Option<Hold> {
        let rule = self.rules.iter().find(|r| {
            r.calls.iter().any(|c| classes.contains(c))
                && r.after
                    .iter()
                    .all(|a| entered.iter().any(|l| l.class == *a))
        })?;
        if rule.action == Action::Allow {
            return None;
        }
        // The earliest call of each class the rule names.
        let mut because: Vec<String> = Vec::new();
        for class in &rule.after {
            if let Some(l) = entered
                .iter()
                .filter(|l| l.class == *class)
                .min_by_key(|l| l.time_ms)
            {
                because.push(l.said());
            }
        }
        let could = if classes.contains(&FlowClass::Sink) && rule.calls.contains(&FlowClass::Sink) {
            "could carry it out"
        } else {
            "could act on its instructions"
        };
        Some(Hold {
            action: rule.action,
            rule: rule.name.clone(),
            why: format!("{}; this call of {tool} {could}", because.join("; ")),
        })
    }
}

/// The flow classes of every tool of `servers` (listed as each upstream
/// of `config` lists them, by its key), and the combinations that can
/// leak or destroy, each saying what holds it at run time: what `toolgate
/// audit --flows` and `serve --check` report.
pub fn report(
    config: &crate::config::GatewayConfig,
    servers: &[toolgate_review::ServerTools],
) -> Result<(Vec<ClassedTool>, Vec<toolgate_review::Finding>), ConfigError> {
    let mut classed = Vec::new();
    for server in servers {
        let upstream = config.servers.get(&server.server);
        let prefix = upstream.map(|u| u.prefix()).unwrap_or_default();
        let trusted = upstream.is_some_and(|u| u.trusted);
        for tool in &server.tools {
            let name = crate::base::names::qualify(&prefix, &tool.name);
            let classes = match config.flows.classes_of(&name) {
                Some((given, why)) => FlowClasses::configured(&given, &why),
                None => FlowClasses::of(tool, trusted),
            };
            classed.push(ClassedTool {
                server: server.server.clone(),
                tool: name,
                classes,
            });
        }
    }
    let flows = Flows::new(&config.flows)?;
    let held = |class: FlowClass| -> String {
        // What entered the flow for the combination this class ends.
        let entered: &[FlowClass] = match class {
            FlowClass::Sink => &[FlowClass::Untrusted, FlowClass::Private],
            _ => &[FlowClass::Untrusted],
        };
        let rule = flows.as_ref().and_then(|f| {
            f.rules
                .iter()
                .find(|r| r.calls.contains(&class) && r.after.iter().all(|a| entered.contains(a)))
        });
        match rule {
            Some(r) if r.action != Action::Allow => format!(
                "held at run time by [flows] {} (a {class} call after {} content: {}); keep it, or take one of the tools away from the agents that have the others",
                r.name,
                r.after.iter().map(|c| c.label()).collect::<Vec<_>>().join(" and "),
                r.action
            ),
            Some(r) => format!(
                "[flows] {} allows it at run time: nothing holds this combination; make that rule `confirm`",
                r.name
            ),
            None => "nothing holds it at run time ([flows] is off): turn it on, or take one of the tools away".to_owned(),
        }
    };
    let findings = combinations(&classed, held);
    Ok((classed, findings))
}

/// Where content came from, as a label says it: the host of the first
/// URL among the arguments.
pub fn origin(args: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    args.values()
        .filter_map(serde_json::Value::as_str)
        .find_map(|s| {
            let rest = s
                .strip_prefix("https://")
                .or_else(|| s.strip_prefix("http://"))?;
            let authority = rest.split(['/', '?', '#']).next()?;
            // Past any user info; before any port.
            let host = authority.rsplit('@').next()?.split(':').next()?;
            let printable = !host.is_empty()
                && host.len() <= 253
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
            printable.then(|| host.to_ascii_lowercase())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(toml: &str) -> Flows {
        let config: FlowsConfig = toml::from_str(toml).unwrap();
        Flows::new(&config).unwrap().unwrap()
    }

    fn label(class: FlowClass, tool: &str, time_ms: i64) -> Label {
        Label {
            class,
            tool: tool.into(),
            time_ms,
            from: Some("example.com".into()),
        }
    }

    use FlowClass::{Destructive, Private, Sink, Untrusted};

    #[test]
    fn the_built_in_rules_hold_a_sink_after_untrusted_content() {
        let f = flows("");
        let fetched = label(Untrusted, "web.fetch", 50_520_000);
        let read = label(Private, "files.read", 50_580_000);
        assert_eq!(f.decide("mail.send", &[Sink], &[]), None);
        assert_eq!(
            f.decide("mail.send", &[Sink], std::slice::from_ref(&read)),
            None
        );
        let hold = f
            .decide("mail.send", &[Sink], &[fetched.clone(), read])
            .unwrap();
        assert_eq!(hold.action, Action::Confirm);
        assert_eq!(hold.rule, "built-in rule 1");
        assert_eq!(
            hold.why,
            "web.fetch at 14:02 UTC returned content from example.com; files.read at 14:03 UTC read private data; this call of mail.send could carry it out"
        );
        let hold = f
            .decide("fs.delete", &[Destructive], std::slice::from_ref(&fetched))
            .unwrap();
        assert_eq!(hold.rule, "built-in rule 2");
        assert!(
            hold.why
                .ends_with("this call of fs.delete could act on its instructions")
        );
        // A tool of no class is never held.
        assert_eq!(f.decide("calc.add", &[], &[fetched]), None);
    }

    #[test]
    fn the_files_rules_come_first() {
        let f = flows(
            "[[rules]]\nafter = [\"untrusted\"]\ncalls = [\"sink\"]\naction = \"deny\"\n\
             [[rules]]\nafter = [\"private\"]\ncalls = [\"destructive\"]\naction = \"allow\"\n",
        );
        let fetched = label(Untrusted, "web.fetch", 0);
        assert_eq!(
            f.decide("mail.send", &[Sink], &[fetched]).unwrap().action,
            Action::Deny
        );
        let read = label(Private, "files.read", 0);
        assert_eq!(f.decide("fs.delete", &[Destructive], &[read]), None);
    }

    #[test]
    fn a_flow_is_the_callers_whatever_trace_id_it_sends() {
        let f = flows("key = \"auto\"\n");
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let alice = f.flow_of(Some("alice"), "", Some(trace)).unwrap();
        let bob = f.flow_of(Some("bob"), "", Some(trace)).unwrap();
        assert_ne!(alice.key, bob.key);
        assert_eq!(alice.shown, format!("trace {trace}"));
        // Nor can parts be shifted between caller and endpoint.
        let a = f.flow_of(Some("ab"), "c", None).unwrap();
        let b = f.flow_of(Some("a"), "bc", None).unwrap();
        assert_ne!(a.key, b.key);
        // By default the caller's flow, trace or not.
        let caller = flows("");
        assert_eq!(
            caller.flow_of(Some("alice"), "", Some(trace)),
            caller.flow_of(Some("alice"), "", None)
        );
        // `trace`: calls without one are not tracked.
        assert_eq!(
            flows("key = \"trace\"\n").flow_of(Some("alice"), "", None),
            None
        );
    }

    #[test]
    fn a_rule_naming_an_unknown_class_is_refused() {
        let config: FlowsConfig = toml::from_str(
            "[[rules]]\nafter = [\"tainted\"]\ncalls = [\"sink\"]\naction = \"deny\"\n",
        )
        .unwrap();
        assert_eq!(
            config.check().unwrap_err().to_string(),
            "flows rule 1: unknown class \"tainted\" (the classes are untrusted, private, sink, destructive)"
        );
    }

    #[test]
    fn the_origin_is_the_host_of_a_url_argument() {
        let args = serde_json::json!({"url": "https://example.com/a?b", "n": 1});
        assert_eq!(
            origin(args.as_object().unwrap()).as_deref(),
            Some("example.com")
        );
        let args = serde_json::json!({"path": "/etc/passwd"});
        assert_eq!(origin(args.as_object().unwrap()), None);
    }
}
