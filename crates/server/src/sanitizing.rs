//! What the server sanitizes before a model reads it, and the log of it.
//!
//! The Tools page says servers MUST sanitize tool outputs. Every text the
//! server sends a model passes through
//! [`toolgate_protocol::sanitize`]: a tool result's text content (text
//! items and embedded text resources), every string inside its
//! `structuredContent`, the tool's error texts, and the titles and
//! descriptions of tools, prompts and resources (at registration). Each
//! removal is reported in a `tracing` event (target
//! `toolgate_server::sanitize`) naming the item and counting by kind —
//! never silently.
//!
//! Results are sanitized *before* they are checked against the tool's
//! `outputSchema`, so what reaches the wire still conforms. A tool whose
//! output must be byte-exact opts out with
//! [`ToolDef::raw_output`](crate::ToolDef::raw_output).

use toolgate_protocol::sanitize::{Removed, sanitize_string, sanitize_value};
use toolgate_protocol::types::{
    CallToolResult, ContentBlock, Prompt, Resource, ResourceContents, ResourceTemplate, Tool,
};

fn report(what: &str, name: &str, removed: &Removed) {
    if removed.is_empty() {
        return;
    }
    for (kind, count) in removed.kinds() {
        tracing::warn!(
            target: "toolgate_server::sanitize",
            item = what,
            name,
            kind,
            count,
            "removed hidden or control characters from text sent to the model"
        );
    }
}

fn clean_option(text: &mut Option<String>, removed: &mut Removed) {
    if let Some(text) = text {
        sanitize_string(text, removed);
    }
}

/// A tool result, in place.
pub(crate) fn tool_result(tool: &str, result: &mut CallToolResult) {
    let mut removed = Removed::default();
    for block in &mut result.content {
        match block {
            ContentBlock::Text(text) => sanitize_string(&mut text.text, &mut removed),
            ContentBlock::EmbeddedResource(embedded) => {
                if let ResourceContents::Text(contents) = &mut embedded.resource {
                    sanitize_string(&mut contents.text, &mut removed);
                }
            }
            ContentBlock::ResourceLink(link) => {
                clean_option(&mut link.title, &mut removed);
                clean_option(&mut link.description, &mut removed);
            }
            ContentBlock::Image(_) | ContentBlock::Audio(_) => {}
        }
    }
    if let Some(structured) = &mut result.structured_content {
        sanitize_value(structured, &mut removed);
    }
    report("tool result", tool, &removed);
}

/// A tool error's text (a `ToolError` message), in place.
pub(crate) fn error_text(tool: &str, text: &mut String) {
    let mut removed = Removed::default();
    sanitize_string(text, &mut removed);
    report("tool error", tool, &removed);
}

/// A tool definition's title and description.
pub(crate) fn tool_definition(tool: &mut Tool) {
    let mut removed = Removed::default();
    clean_option(&mut tool.title, &mut removed);
    clean_option(&mut tool.description, &mut removed);
    if let Some(annotations) = &mut tool.annotations {
        clean_option(&mut annotations.title, &mut removed);
    }
    report("tool definition", &tool.name, &removed);
}

/// A prompt definition's title and description, and its arguments'.
pub(crate) fn prompt_definition(prompt: &mut Prompt) {
    let mut removed = Removed::default();
    clean_option(&mut prompt.title, &mut removed);
    clean_option(&mut prompt.description, &mut removed);
    for argument in prompt.arguments.iter_mut().flatten() {
        clean_option(&mut argument.title, &mut removed);
        clean_option(&mut argument.description, &mut removed);
    }
    report("prompt definition", &prompt.name, &removed);
}

/// A resource definition's title and description.
pub(crate) fn resource_definition(resource: &mut Resource) {
    let mut removed = Removed::default();
    clean_option(&mut resource.title, &mut removed);
    clean_option(&mut resource.description, &mut removed);
    report("resource definition", &resource.uri, &removed);
}

/// A resource template's title and description.
pub(crate) fn template_definition(template: &mut ResourceTemplate) {
    let mut removed = Removed::default();
    clean_option(&mut template.title, &mut removed);
    clean_option(&mut template.description, &mut removed);
    report("resource template", &template.uri_template, &removed);
}
