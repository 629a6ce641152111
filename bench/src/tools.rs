//! The tool set every benchmarked server serves, defined once so toolgate
//! and the rmcp reference list and answer exactly the same thing.

use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The text `test_simple_text` answers (the conformance suite's tool).
pub const SIMPLE_TEXT: &str = "This is a simple text response for testing.";

/// Name of the tool with a realistic input schema.
pub const ORDER_TOOL: &str = "create_order";

/// The same handler as [`ORDER_TOOL`] behind a schema that accepts any
/// object: toolgate's cost of validation is the difference between the two.
pub const ORDER_TOOL_UNCHECKED: &str = "create_order_unchecked";

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A realistic input schema: 8 properties, an enum, patterns, bounds and a
/// nested object.
pub fn order_schema() -> Map<String, Value> {
    object(json!({
        "type": "object",
        "properties": {
            "customer_id": {"type": "string", "pattern": "^cus_[a-z0-9]{8}$", "description": "The customer, as cus_ and 8 letters or digits"},
            "sku": {"type": "string", "pattern": "^SKU-[0-9]{4}$", "description": "The product"},
            "quantity": {"type": "integer", "minimum": 1, "maximum": 100},
            "priority": {"type": "string", "enum": ["low", "normal", "high"]},
            "gift": {"type": "boolean"},
            "note": {"type": "string", "maxLength": 200},
            "unit_price": {"type": "number", "minimum": 0},
            "address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string", "minLength": 1},
                    "city": {"type": "string", "minLength": 1},
                    "postcode": {"type": "string", "pattern": "^[0-9]{5}$"},
                    "country": {"type": "string", "minLength": 2, "maxLength": 2}
                },
                "required": ["street", "city", "country"],
                "additionalProperties": false
            }
        },
        "required": ["customer_id", "sku", "quantity", "priority", "address"],
        "additionalProperties": false
    }))
}

/// Arguments of [`ORDER_TOOL`] as the handler reads them.
#[derive(Debug, Deserialize)]
#[allow(dead_code)]
pub struct Order {
    /// Customer id.
    pub customer_id: String,
    /// Product.
    pub sku: String,
    /// How many.
    pub quantity: u32,
    /// Shipping priority.
    pub priority: String,
    /// Wrap as a gift.
    #[serde(default)]
    pub gift: bool,
    /// Free text.
    #[serde(default)]
    pub note: Option<String>,
    /// Price per unit.
    #[serde(default)]
    pub unit_price: Option<f64>,
    /// Where to ship.
    pub address: Address,
}

/// The nested object of [`Order`].
#[derive(Debug, Deserialize)]
#[allow(dead_code)]
pub struct Address {
    /// Street.
    pub street: String,
    /// City.
    pub city: String,
    /// Postcode.
    #[serde(default)]
    pub postcode: Option<String>,
    /// ISO country code.
    pub country: String,
}

/// What both servers answer to a valid order.
pub fn order_reply(order: &Order) -> String {
    format!(
        "Order accepted: {} x {} for {} ({} priority)",
        order.quantity, order.sku, order.customer_id, order.priority
    )
}

/// The arguments the benchmark sends to [`ORDER_TOOL`].
pub fn order_arguments() -> Value {
    json!({
        "customer_id": "cus_a1b2c3d4",
        "sku": "SKU-1001",
        "quantity": 3,
        "priority": "high",
        "gift": false,
        "note": "Leave at the door",
        "unit_price": 24.9,
        "address": {"street": "1 Main Street", "city": "Springfield", "postcode": "12345", "country": "US"}
    })
}

/// A tool of the base set: name, description, input schema.
pub struct ToolSpec {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Input schema.
    pub schema: Map<String, Value>,
}

fn no_args() -> Map<String, Value> {
    object(json!({"type": "object", "properties": {}}))
}

/// The base set: the conformance suite's content tools plus the order
/// tools; `extra` filler tools with small schemas make a large catalogue.
pub fn tool_set(extra: usize) -> Vec<ToolSpec> {
    let mut tools = vec![
        ToolSpec {
            name: "test_simple_text".into(),
            description: "Returns simple text content".into(),
            schema: no_args(),
        },
        ToolSpec {
            name: ORDER_TOOL.into(),
            description: "Places an order for a product and returns a confirmation".into(),
            schema: order_schema(),
        },
        ToolSpec {
            name: ORDER_TOOL_UNCHECKED.into(),
            description: "Places an order (accepts any object)".into(),
            schema: object(json!({"type": "object"})),
        },
    ];
    for (name, description) in [
        ("test_image_content", "Returns image content"),
        ("test_audio_content", "Returns audio content"),
        (
            "test_embedded_resource",
            "Returns embedded resource content",
        ),
        (
            "test_multiple_content_types",
            "Returns multiple content types",
        ),
        ("test_error_handling", "Always returns an error"),
        ("test_tool_with_progress", "Reports progress notifications"),
        (
            "test_tool_with_logging",
            "Sends log messages during execution",
        ),
    ] {
        tools.push(ToolSpec {
            name: name.into(),
            description: description.into(),
            schema: no_args(),
        });
    }
    for i in 0..extra {
        tools.push(ToolSpec {
            name: format!("lookup_{i:04}"),
            description: format!("Looks up record {i} by key and returns it as JSON"),
            schema: object(json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": "The record key"},
                    "fields": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["key"]
            })),
        });
    }
    tools
}

/// Any other tool of the set answers with its own name.
pub fn generic_reply(name: &str) -> String {
    format!("{name} ran")
}
