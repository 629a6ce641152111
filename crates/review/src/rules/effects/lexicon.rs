//! The words that are evidence of an effect, by where they appear.
//!
//! Names are terse and verb-first (`delete_file`, `github.create_issue`), so
//! any known verb counts. Descriptions are prose, where the same words are
//! often nouns (`a message`, `the command`), so most description verbs count
//! only with an object of the right kind close after them. Parameters are
//! matched by their whole name, because `code` or `to` alone mean too many
//! things.

use super::Effect;

/// Verbs in a tool's name. The first one found is the name's effect.
pub(super) const NAME_VERBS: &[(Effect, &[&str])] = &[
    (
        Effect::Delete,
        &[
            "delete",
            "remove",
            "destroy",
            "drop",
            "purge",
            "erase",
            "wipe",
            "truncate",
            "revoke",
            "unlink",
            "rm",
            "cleanup",
            "prune",
            "uninstall",
            "terminate",
            "kill",
            "discard",
        ],
    ),
    (
        Effect::Send,
        &[
            "send",
            "email",
            "mail",
            "post",
            "publish",
            "notify",
            "message",
            "tweet",
            "sms",
            "share",
            "invite",
            "reply",
            "forward",
            "broadcast",
            "dm",
        ],
    ),
    (
        Effect::Spend,
        &[
            "pay",
            "payment",
            "purchase",
            "buy",
            "charge",
            "order",
            "transfer",
            "withdraw",
            "refund",
            "invoice",
            "spend",
            "subscribe",
            "tip",
            "donate",
        ],
    ),
    (
        Effect::Execute,
        &[
            "exec", "execute", "run", "shell", "command", "eval", "evaluate", "script", "spawn",
            "deploy", "invoke", "sql", "bash", "terminal",
        ],
    ),
    (
        Effect::Write,
        &[
            "write", "create", "update", "set", "add", "insert", "edit", "modify", "save",
            "upload", "put", "patch", "rename", "move", "commit", "push", "merge", "append",
            "replace", "reset", "fork", "install", "upgrade", "apply", "scale", "toggle", "enable",
            "disable", "click", "fill", "submit", "assign", "approve", "archive", "checkout",
            "restore", "import", "register", "book", "schedule", "cancel", "stop", "reserve",
            "acquire", "allocate", "lock",
        ],
    ),
    (
        Effect::Read,
        &[
            "get",
            "read",
            "list",
            "search",
            "find",
            "fetch",
            "query",
            "show",
            "describe",
            "lookup",
            "view",
            "count",
            "check",
            "download",
            "inspect",
            "status",
            "retrieve",
            "explain",
            "browse",
            "navigate",
            "screenshot",
            "open",
        ],
    ),
];

/// Words that make a `checkout` (or a bare `order`) about money rather than
/// about a branch or a sort order.
pub(super) const MONEY: &[&str] = &[
    "cart", "basket", "shop", "shopping", "payment", "pay", "pays", "price", "card", "amount",
    "currency", "money", "funds", "usd", "eur", "purchase", "billing",
];

/// How a description verb must be used to count.
pub(super) enum Needs {
    /// Counts on its own.
    Nothing,
    /// Counts only with one of these words among the next few.
    Object(&'static [&'static str]),
}

const RUNNABLE: &[&str] = &[
    "command",
    "commands",
    "shell",
    "script",
    "scripts",
    "code",
    "sql",
    "query",
    "queries",
    "statement",
    "statements",
    "javascript",
    "js",
    "python",
    "program",
    "programs",
    "process",
    "kubectl",
    "bash",
    "powershell",
    "cmd",
    "binary",
    "executable",
    "function",
    "job",
];
const MESSAGE: &[&str] = &[
    "message",
    "messages",
    "email",
    "emails",
    "mail",
    "sms",
    "text",
    "notification",
    "notifications",
    "tweet",
    "dm",
    "invitation",
    "invite",
    "webhook",
    "reply",
    "post",
    "chat",
];
const MONEY_OBJECT: &[&str] = &[
    "money", "funds", "payment", "payments", "card", "customer", "account", "amount", "fee",
    "order", "usd", "eur", "crypto", "tokens",
];

/// Verbs in a description's first sentence, by base form.
pub(super) const DESCRIPTION_VERBS: &[(Effect, &str, Needs)] = &[
    (Effect::Execute, "run", Needs::Object(RUNNABLE)),
    (Effect::Execute, "execute", Needs::Object(RUNNABLE)),
    (Effect::Execute, "eval", Needs::Nothing),
    (Effect::Execute, "evaluate", Needs::Object(RUNNABLE)),
    (Effect::Execute, "invoke", Needs::Object(RUNNABLE)),
    (Effect::Execute, "spawn", Needs::Object(RUNNABLE)),
    (Effect::Execute, "launch", Needs::Object(RUNNABLE)),
    (Effect::Execute, "start", Needs::Object(RUNNABLE)),
    (Effect::Send, "send", Needs::Object(MESSAGE)),
    (Effect::Send, "post", Needs::Object(MESSAGE)),
    (Effect::Send, "publish", Needs::Nothing),
    (Effect::Send, "forward", Needs::Object(MESSAGE)),
    (Effect::Send, "broadcast", Needs::Nothing),
    (Effect::Send, "deliver", Needs::Object(MESSAGE)),
    (Effect::Send, "email", Needs::Nothing),
    (Effect::Send, "reply", Needs::Nothing),
    (Effect::Send, "notify", Needs::Nothing),
    (Effect::Send, "tweet", Needs::Nothing),
    (Effect::Spend, "pay", Needs::Nothing),
    (Effect::Spend, "purchase", Needs::Nothing),
    (Effect::Spend, "buy", Needs::Nothing),
    (Effect::Spend, "refund", Needs::Nothing),
    (Effect::Spend, "withdraw", Needs::Nothing),
    (Effect::Spend, "spend", Needs::Nothing),
    (Effect::Spend, "charge", Needs::Object(MONEY_OBJECT)),
    (Effect::Spend, "transfer", Needs::Object(MONEY_OBJECT)),
    (Effect::Spend, "place", Needs::Object(MONEY_OBJECT)),
    (Effect::Delete, "delete", Needs::Nothing),
    (Effect::Delete, "remove", Needs::Nothing),
    (Effect::Delete, "erase", Needs::Nothing),
    (Effect::Delete, "destroy", Needs::Nothing),
    (Effect::Delete, "purge", Needs::Nothing),
    (Effect::Delete, "wipe", Needs::Nothing),
    (Effect::Delete, "drop", Needs::Nothing),
    (Effect::Delete, "truncate", Needs::Nothing),
    (Effect::Delete, "uninstall", Needs::Nothing),
    (Effect::Delete, "terminate", Needs::Nothing),
    (Effect::Delete, "kill", Needs::Nothing),
    (Effect::Write, "write", Needs::Nothing),
    (Effect::Write, "create", Needs::Nothing),
    (Effect::Write, "update", Needs::Nothing),
    (Effect::Write, "modify", Needs::Nothing),
    (Effect::Write, "edit", Needs::Nothing),
    (Effect::Write, "save", Needs::Nothing),
    (Effect::Write, "upload", Needs::Nothing),
    (Effect::Write, "insert", Needs::Nothing),
    (Effect::Write, "append", Needs::Nothing),
    (Effect::Write, "overwrite", Needs::Nothing),
    (Effect::Write, "rename", Needs::Nothing),
    (Effect::Write, "move", Needs::Nothing),
    (Effect::Write, "set", Needs::Nothing),
    (Effect::Write, "add", Needs::Nothing),
    (Effect::Write, "replace", Needs::Nothing),
    (Effect::Write, "commit", Needs::Nothing),
    (Effect::Write, "push", Needs::Nothing),
    (Effect::Write, "merge", Needs::Nothing),
    (Effect::Write, "apply", Needs::Nothing),
    (Effect::Write, "install", Needs::Nothing),
    (Effect::Write, "upgrade", Needs::Nothing),
    (Effect::Write, "scale", Needs::Nothing),
    (Effect::Write, "toggle", Needs::Nothing),
    (Effect::Write, "fill", Needs::Nothing),
    (Effect::Write, "click", Needs::Nothing),
    (Effect::Write, "submit", Needs::Nothing),
    (Effect::Write, "record", Needs::Nothing),
    (Effect::Write, "switch", Needs::Nothing),
    (Effect::Write, "fork", Needs::Nothing),
    (Effect::Write, "manage", Needs::Nothing),
    (Effect::Read, "get", Needs::Nothing),
    (Effect::Read, "return", Needs::Nothing),
    (Effect::Read, "retrieve", Needs::Nothing),
    (Effect::Read, "list", Needs::Nothing),
    (Effect::Read, "show", Needs::Nothing),
    (Effect::Read, "search", Needs::Nothing),
    (Effect::Read, "find", Needs::Nothing),
    (Effect::Read, "fetch", Needs::Nothing),
    (Effect::Read, "read", Needs::Nothing),
    (Effect::Read, "look", Needs::Object(&["up"])),
    (Effect::Read, "query", Needs::Nothing),
    (Effect::Read, "describe", Needs::Nothing),
    (Effect::Read, "calculate", Needs::Nothing),
    (Effect::Read, "compute", Needs::Nothing),
    (Effect::Read, "convert", Needs::Nothing),
    (Effect::Read, "count", Needs::Nothing),
];

/// Words that start a noun phrase (`the command`): after `and`/`or`, a
/// word followed by one of these is a verb (`… and charges the card`).
pub(super) const DETERMINERS: &[&str] = &[
    "a", "an", "the", "this", "that", "these", "those", "each", "every", "all", "any", "its",
    "their", "your", "our", "my", "some",
];

/// Words after which a description word can be the tool's own verb: the
/// start of the sentence, a coordination (`create or update`), or a subject
/// (`this tool deletes`, `a tool that runs`). A verb elsewhere is usually
/// part of a noun phrase (`progress updates`, `staged for commit`).
pub(crate) const VERB_POSITIONS: &[&str] = &[
    "and",
    "or",
    "then",
    "to",
    "also",
    "will",
    "can",
    "may",
    "that",
    "which",
    "tool",
    "it",
    "permanently",
    "optionally",
    "safely",
    "directly",
    "automatically",
    "immediately",
    "first",
    "instantly",
    "asynchronously",
    "remotely",
    "server",
    "function",
    "endpoint",
];

/// Name words that are a noun with the word before them (`port_forward`).
pub(super) const COMPOUNDS: &[(&str, &str)] = &[("port", "forward"), ("fast", "forward")];

/// Words that negate a verb within the three words before it.
pub(crate) const NEGATIONS: &[&str] = &[
    "not", "never", "no", "cannot", "can't", "cant", "doesn't", "doesnt", "won't", "wont",
    "without", "nor", "neither", "don't", "dont", "isn't",
];

/// Parameters (whole names, lower-cased, separators as `_`) that are the thing
/// a tool runs.
pub(super) const RUN_PARAMS: &[&str] = &[
    "command",
    "cmd",
    "commands",
    "script",
    "shell_command",
    "sql",
    "sql_query",
    "query_sql",
    "javascript",
    "js",
    "bash",
    "powershell",
    "command_line",
    "cmdline",
];

/// Parameters that are the thing a tool runs only when something else says
/// the tool runs code (`code` is as often a country or a verification code).
pub(super) const RUN_PARAMS_CORROBORATED: &[&str] =
    &["code", "source", "expression", "program", "query"];

/// Parameters that name whom a tool sends to.
pub(super) const RECIPIENT_PARAMS: &[&str] = &[
    "recipient",
    "recipients",
    "cc",
    "bcc",
    "webhook",
    "webhook_url",
    "to_address",
    "to_email",
    "email_to",
    "phone_number",
];

/// Parameters that are a message body, which make a `to` a recipient.
pub(super) const BODY_PARAMS: &[&str] = &["subject", "body", "text", "message", "content", "html"];

/// Parameters that are an amount of money.
pub(super) const AMOUNT_PARAMS: &[&str] = &["amount", "price", "total", "sum_usd", "value_usd"];

/// Parameters that say where money goes, which make an amount a payment.
pub(super) const PAYEE_PARAMS: &[&str] = &[
    "recipient",
    "payee",
    "to",
    "card",
    "card_number",
    "payment_method",
    "payment_method_id",
    "account",
    "account_id",
    "destination",
    "iban",
    "wallet",
    "to_address",
];

/// Parameters that are a network location.
pub(super) const NETWORK_PARAMS: &[&str] = &[
    "url",
    "uri",
    "urls",
    "endpoint",
    "webhook",
    "webhook_url",
    "host",
    "hostname",
    "base_url",
    "callback_url",
    "server_url",
];

/// Parameters that are where a sending tool sends to.
pub(crate) const DESTINATION_PARAMS: &[&str] = &[
    "to",
    "recipient",
    "recipients",
    "cc",
    "bcc",
    "email",
    "email_address",
    "to_address",
    "to_email",
    "phone",
    "phone_number",
    "channel",
    "channel_id",
    "chat_id",
    "room",
    "room_id",
    "url",
    "uri",
    "endpoint",
    "webhook",
    "webhook_url",
    "host",
    "hostname",
    "destination",
];

/// True when `word` is `base` or a present-tense or -ing form of it. Past
/// forms are left out on purpose: "with duplicates removed" describes a
/// result, not an action.
pub(crate) fn is_form(word: &str, base: &str) -> bool {
    if word == base {
        return true;
    }
    let Some(rest) = word.strip_prefix(base) else {
        // -e dropped before -ing: write → writing.
        return base
            .strip_suffix('e')
            .and_then(|stem| word.strip_prefix(stem))
            == Some("ing");
    };
    match rest {
        "s" | "es" | "ing" => true,
        // Doubled final consonant: run → running, drop → dropping.
        _ => base
            .chars()
            .last()
            .is_some_and(|last| rest.len() == 4 && rest.starts_with(last) && rest.ends_with("ing")),
    }
}
