//! The search's vocabulary: words that name the same thing in the
//! definitions servers write and the questions models ask. Plain BM25
//! misses "what meetings do I have tomorrow" against `list_events`; with
//! these, both carry the concept `event`. Each group is a meaning, never
//! a topic: a word joins a group only where either word could stand for
//! the other in a tool's name.
//!
//! Layer: `decide`.

/// `(concept, words)`: words are stemmed when the table is built.
#[rustfmt::skip]
pub const CONCEPTS: &[(&str, &[&str])] = &[
    // Reading and finding.
    ("show", &["get", "show", "read", "view", "fetch", "retrieve", "display", "open", "see", "look", "describe", "details", "info", "inspect", "contents", "print"]),
    ("list", &["list", "enumerate", "all", "browse", "index", "what", "which"]),
    ("find", &["mention", "mentions", "contain", "containing", "contains", "occurrence", "find", "search", "lookup", "query", "locate", "grep", "match", "filter", "discover", "seek"]),
    // Changing.
    ("create", &["create", "new", "add", "make", "insert", "open", "start", "register", "post", "file", "raise", "set", "up"]),
    ("update", &["reschedule", "postpone", "delay", "bump", "tweak", "update", "edit", "modify", "change", "patch", "rename", "set", "replace", "adjust", "amend", "alter", "fix"]),
    ("delete", &["forget", "cancel", "revoke", "delete", "remove", "erase", "destroy", "drop", "purge", "trash", "discard", "rm", "unlink", "wipe", "clear", "terminate", "kill", "uninstall"]),
    ("write", &["write", "save", "store", "put", "upload", "persist", "overwrite", "append"]),
    ("move", &["move", "rename", "mv", "relocate", "transfer"]),
    ("copy", &["copy", "duplicate", "clone", "cp", "fork"]),
    ("close", &["close", "resolve", "done", "finish", "complete", "archive", "end", "stop"]),
    ("assign", &["assign", "assignee", "owner", "delegate", "give", "reassign"]),
    // Communication.
    ("send", &["send", "post", "message", "notify", "tell", "reply", "respond", "forward", "dm", "ping", "write", "say", "announce", "broadcast", "share"]),
    ("mail", &["mail", "email", "e-mail", "inbox", "gmail", "outlook", "letter", "draft", "unread"]),
    ("chat", &["chat", "channel", "slack", "discord", "thread", "conversation", "room", "dm", "teams"]),
    ("person", &["user", "person", "people", "member", "contact", "colleague", "teammate", "someone", "profile", "who", "account", "employee"]),
    // Time.
    ("event", &["event", "meeting", "appointment", "calendar", "schedule", "agenda", "invite", "invitation", "booking", "call", "standup", "busy", "free", "availability", "slot"]),
    ("time", &["time", "date", "clock", "timezone", "zone", "now", "today", "tomorrow", "yesterday", "week", "hour", "current", "utc", "when"]),
    ("remind", &["remind", "reminder", "alarm", "alert", "notification"]),
    // Work tracking.
    ("issue", &["issue", "ticket", "bug", "task", "story", "epic", "incident", "problem", "todo", "backlog", "sprint", "defect"]),
    ("comment", &["comment", "note", "remark", "feedback", "annotate", "discussion"]),
    ("project", &["project", "board", "workspace", "team", "space", "milestone", "roadmap"]),
    ("label", &["label", "tag", "category", "priority", "status", "state"]),
    // Code.
    ("repo", &["repo", "repository", "git", "github", "gitlab", "codebase", "source", "project"]),
    ("change", &["pull", "pr", "merge", "request", "mr", "diff", "patch", "changeset", "review"]),
    ("commit", &["commit", "history", "log", "revision", "blame", "changelog"]),
    ("branch", &["branch", "ref", "checkout", "tag", "head"]),
    ("build", &["build", "pipeline", "ci", "workflow", "job", "run", "action", "deploy", "deployment", "release", "test"]),
    ("code", &["code", "function", "symbol", "class", "snippet", "source"]),
    // Files and documents.
    ("file", &["readme", "markdown", "md", "json", "yaml", "yml", "csv", "pdf", "txt", "config", "settings", "file", "files", "document", "doc", "path", "attachment", "blob", "object"]),
    ("folder", &["folder", "directory", "dir", "tree", "ls", "mkdir", "subdirectory"]),
    ("page", &["page", "doc", "document", "wiki", "note", "notion", "article", "post", "block"]),
    ("size", &["size", "bytes", "metadata", "stat", "stats", "modified", "permissions", "info", "big", "large", "disk", "usage", "space"]),
    // Data.
    ("database", &["database", "db", "sql", "postgres", "postgresql", "sqlite", "mysql", "schema", "query", "select"]),
    ("table", &["table", "tables", "column", "columns", "row", "rows", "record", "records", "index", "view", "field"]),
    ("cache", &["know", "knows", "fact", "facts", "memorize", "cache", "memory", "remember", "recall", "knowledge", "entity", "entities", "relation", "observation", "graph"]),
    // Web.
    ("web", &["web", "browser", "page", "site", "website", "url", "link", "http", "internet", "online"]),
    ("navigate", &["navigate", "go", "visit", "open", "load", "browse", "goto"]),
    ("click", &["click", "press", "tap", "button", "select", "choose", "hover"]),
    ("type", &["type", "fill", "enter", "input", "form", "keyboard", "key"]),
    ("screenshot", &["screenshot", "capture", "snapshot", "picture", "image", "screen", "photo"]),
    ("download", &["download", "fetch", "scrape", "crawl", "pull", "get"]),
    // Infrastructure.
    ("machine", &["instance", "vm", "server", "machine", "host", "node", "ec2", "compute", "box"]),
    ("container", &["container", "pod", "docker", "kubernetes", "k8s", "deployment", "service", "cluster", "namespace", "workload"]),
    ("bucket", &["bucket", "s3", "storage", "blob", "object", "gcs"]),
    ("function", &["lambda", "function", "serverless", "invoke", "trigger"]),
    ("logs", &["console", "warning", "warnings", "javascript", "js", "exception", "stack", "log", "logs", "output", "trace", "traces", "cloudwatch", "events", "error", "errors"]),
    ("metric", &["metric", "metrics", "monitor", "monitoring", "alarm", "cpu", "usage", "graph", "dashboard", "health"]),
    ("scale", &["scale", "resize", "replicas", "autoscale", "capacity", "grow", "shrink"]),
    ("restart", &["restart", "reboot", "rollout", "redeploy", "bounce", "recycle"]),
    ("secret", &["secret", "password", "credential", "credentials", "key", "token", "env", "environment", "variable", "config", "parameter"]),
    ("cost", &["cost", "costs", "bill", "billing", "spend", "spent", "spending", "price", "invoice", "charges", "budget", "money"]),
    ("permission", &["permission", "role", "policy", "access", "iam", "grant", "share", "invite", "collaborator", "admin"]),
    ("dns", &["point", "cname", "alias", "nameserver", "dns", "domain", "record", "route53", "hostname", "zone"]),
    ("queue", &["queue", "sqs", "topic", "sns", "subscribe", "subscription", "publish"]),
    ("region", &["region", "zone", "location", "datacenter"]),
    ("status", &["going", "progress", "update", "updates", "report", "status", "state", "health", "running", "up", "down", "progress"]),
    // Counting and summarising.
    ("count", &["sql", "select", "aggregate", "count", "number", "how", "many", "total", "stats", "statistics", "summary", "summarize"]),
    ("direct", &["direct", "dm", "private", "privately", "personal", "one-on-one"]),
    ("react", &["react", "reaction", "emoji", "thumbs", "upvote"]),
    ("link", &["link", "relate", "related", "relation", "block", "blocks", "blocking", "blocked", "depend", "depends", "dependency", "duplicate"]),
    ("network", &["network", "request", "requests", "api", "xhr", "traffic", "http"]),
    ("tail", &["tail", "end", "last", "bottom", "latest"]),
    ("worklog", &["worklog", "timesheet", "logged", "spent", "hours", "effort"]),
    ("recent", &["recent", "latest", "last", "new", "newest", "today", "unread"]),
];
