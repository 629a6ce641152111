//! Plain-language expectations and fixes for validation errors.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(80).collect::<String>())
    } else {
        text
    }
}

/// (what was expected, how to fix it) for an error kind.
pub(crate) fn describe(kind: &ValidationErrorKind) -> (String, String) {
    use ValidationErrorKind as K;
    match kind {
        K::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(ts) => ts
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            (
                format!("a value of type {expected}"),
                format!("send a {expected}"),
            )
        }
        K::Required { property } => (
            format!("the required property {property}"),
            format!("add {property}"),
        ),
        K::AdditionalProperties { unexpected } | K::UnevaluatedProperties { unexpected } => (
            "no properties beyond those the schema declares".into(),
            format!(
                "remove {}",
                unexpected
                    .iter()
                    .map(|p| format!("{p:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        K::Enum { options } => (
            format!("one of {}", short(options)),
            "use one of the listed values".into(),
        ),
        K::Constant { expected_value } => (
            format!("exactly {}", short(expected_value)),
            "use that value".into(),
        ),
        K::Pattern { pattern } => (
            format!("a string matching {pattern:?}"),
            "reformat the string to match".into(),
        ),
        K::MinLength { limit } => (
            format!("at least {limit} characters"),
            "lengthen the string".into(),
        ),
        K::MaxLength { limit } => (
            format!("at most {limit} characters"),
            "shorten the string".into(),
        ),
        K::Minimum { limit } => (format!("a number ≥ {limit}"), "raise the value".into()),
        K::Maximum { limit } => (format!("a number ≤ {limit}"), "lower the value".into()),
        K::ExclusiveMinimum { limit } => (format!("a number > {limit}"), "raise the value".into()),
        K::ExclusiveMaximum { limit } => (format!("a number < {limit}"), "lower the value".into()),
        K::MinItems { limit } => (format!("at least {limit} items"), "add items".into()),
        K::MaxItems { limit } => (format!("at most {limit} items"), "remove items".into()),
        K::UniqueItems => (
            "items that are all different".into(),
            "remove duplicates".into(),
        ),
        K::Format { format } => (
            format!("a valid {format}"),
            format!("send a well-formed {format}"),
        ),
        K::OneOfNotValid { .. } | K::AnyOf { .. } => (
            "a value matching one of the allowed forms".into(),
            "pick one form and supply its fields".into(),
        ),
        K::OneOfMultipleValid { .. } => (
            "a value matching exactly one form".into(),
            "remove fields so only one form matches".into(),
        ),
        _ => (
            "a value the schema accepts".into(),
            "adjust the value to the inputSchema".into(),
        ),
    }
}
