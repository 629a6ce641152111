//! Names: the spec's rules, and names that will collide.

use toolgate_protocol::names::validate_tool_name;

use super::Subject;
use crate::Finding;

/// Names so generic that two servers are likely to both offer them.
const GENERIC: &[&str] = &[
    "search",
    "query",
    "get",
    "list",
    "create",
    "delete",
    "update",
    "run",
    "execute",
    "exec",
    "fetch",
    "read",
    "write",
    "send",
    "open",
    "close",
    "find",
    "call",
    "invoke",
    "tool",
    "do",
    "help",
    "info",
    "status",
    "lookup",
    "echo",
    "ping",
    "add",
    "remove",
    "cleanup",
    "reset",
    "sync",
    "upload",
    "download",
    "shell",
    "bash",
    "eval",
    "calculate",
    "translate",
    "summarize",
    "health",
    "version",
    "test",
    "time",
    "weather",
    "browse",
    "navigate",
    "click",
    "screenshot",
    "notify",
    "message",
    "email",
    "post",
    "share",
    "save",
    "load",
    "edit",
];

pub(crate) fn check(s: &Subject<'_>, out: &mut Vec<Finding>) {
    let name = &s.tool.name;
    if let Err(e) = validate_tool_name(name) {
        out.push(s.finding(
            "TG-N001",
            format!("the name breaks the naming rules: {e}"),
            format!("name: {name:?}"),
            "rename the tool to 1-128 characters of letters, digits, '_', '-' and '.'",
        ));
    }
    if GENERIC.contains(&name.to_ascii_lowercase().as_str()) {
        out.push(s.finding(
            "TG-N003",
            "the name is generic and will collide with other servers' tools",
            format!("name: {name:?}"),
            format!("namespace it, e.g. \"<service>.{name}\" or \"{name}_<object>\""),
        ));
    }
}
