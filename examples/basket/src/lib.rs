//! A shopping-basket MCP server: the tools of the toolgate seed documents.
//!
//! - `get_current_time`: no arguments, read-only.
//! - `create_basket`: returns an opaque, high-entropy handle; its lifetime is
//!   stated in the description, as stateful tools should.
//! - `add_item`, `get_basket`: structured results with an `outputSchema`.
//! - `delete_basket`: destructive.
//!
//! The protocol keeps no session, so state lives behind the handle, and an
//! unknown or expired handle is a tool error that tells the model to create
//! a new basket.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgate_server::{Handles, RequestContext, Server, State, Structured, ToolDef, ToolError};

/// Baskets untouched this long are forgotten.
pub const BASKET_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The products on sale: SKU, name, price in cents.
pub const CATALOG: &[(&str, &str, u64)] = &[
    ("SKU-1001", "Espresso beans, 1 kg", 2490),
    ("SKU-1002", "Milk frother", 3999),
    ("SKU-1003", "Ceramic cup", 1250),
    ("SKU-1004", "Descaler, 500 ml", 899),
];

struct Basket {
    items: Vec<(String, u32)>,
}

/// Baskets behind `bsk_…` handles: 128 random bits, bound to the caller
/// that created them, forgotten after a day without use.
type Store = Handles<Basket>;

fn store() -> Store {
    Handles::new("bsk")
        .ttl(BASKET_TTL)
        .capacity(10_000)
        .describe(
            "basket",
            "create a new one with create_basket and use its basket_id",
        )
}

/// The id of a basket, as returned by `create_basket`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BasketRef {
    /// The basket_id returned by create_basket, e.g. "bsk_3f9c…".
    pub basket_id: String,
}

/// Arguments of `add_item`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddItem {
    /// The basket_id returned by create_basket.
    pub basket_id: String,
    /// Product code: "SKU-" followed by four digits, e.g. "SKU-1001".
    #[schemars(regex(pattern = r"^SKU-[0-9]{4}$"))]
    pub sku: String,
    /// How many to add (1-99, default 1).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 99))]
    pub quantity: u32,
}

fn one() -> u32 {
    1
}

/// Where a basket ships: `eu`, `us` or `apac`.
///
/// Inlined (not a `$ref`) and without per-variant docs (which would make a
/// `oneOf`), because a parameter mirrored into a header must declare its
/// primitive type in place.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
#[schemars(inline)]
pub enum Region {
    // European Union.
    #[allow(missing_docs)]
    Eu,
    // United States.
    #[allow(missing_docs)]
    Us,
    // Asia-Pacific.
    #[allow(missing_docs)]
    Apac,
}

/// Arguments of `quote_shipping`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuoteShipping {
    /// The basket_id returned by create_basket.
    pub basket_id: String,
    /// Destination region. Mirrored into the `Mcp-Param-Region` HTTP header
    /// so a load balancer can route by region without reading the body.
    #[schemars(extend("x-mcp-header" = "Region"))]
    pub region: Region,
}

/// A shipping quote.
#[derive(Serialize, JsonSchema)]
pub struct Quote {
    /// The basket's handle.
    pub basket_id: String,
    /// Shipping cost in cents.
    pub shipping_cents: u64,
    /// Basket total plus shipping, in cents.
    pub total_cents: u64,
}

/// A new basket.
#[derive(Serialize, JsonSchema)]
pub struct NewBasket {
    /// Handle to pass to the other basket tools.
    pub basket_id: String,
    /// Hours of inactivity after which the basket is deleted.
    pub expires_after_hours: u64,
}

/// A basket's contents.
#[derive(Serialize, JsonSchema)]
pub struct BasketView {
    /// The basket's handle.
    pub basket_id: String,
    /// Lines of the basket.
    pub items: Vec<Line>,
    /// Sum of all lines, in cents.
    pub total_cents: u64,
}

/// One line of a basket.
#[derive(Serialize, JsonSchema)]
pub struct Line {
    /// Product code.
    pub sku: String,
    /// Product name.
    pub name: String,
    /// Quantity.
    pub quantity: u32,
    /// Price of the line, in cents.
    pub line_cents: u64,
}

fn view(id: &str, basket: &Basket) -> BasketView {
    let items: Vec<Line> = basket
        .items
        .iter()
        .filter_map(|(sku, quantity)| {
            let (_, name, price) = CATALOG.iter().find(|(s, _, _)| s == sku)?;
            Some(Line {
                sku: sku.clone(),
                name: (*name).into(),
                quantity: *quantity,
                line_cents: price * u64::from(*quantity),
            })
        })
        .collect();
    let total_cents = items.iter().map(|l| l.line_cents).sum();
    BasketView {
        basket_id: id.to_owned(),
        items,
        total_cents,
    }
}

/// RFC 3339 UTC time of `t`, without a date library: days since the epoch
/// to a civil date (Howard Hinnant's algorithm).
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// How to run the basket server.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Calls per minute each caller may make to each tool (`--rate-limit`).
    pub rate_limit_per_minute: Option<u32>,
    /// Require scopes (when tokens are verified): `basket:read` to look,
    /// `basket:write` to change (it implies `basket:read`), `basket:checkout`
    /// to pay.
    pub require_scopes: bool,
}

/// The scopes the basket's tools use, for the metadata document.
pub const SCOPES: &[&str] = &["basket:read", "basket:write", "basket:checkout"];

/// `basket:write` implies `basket:read`.
pub fn scope_hierarchy() -> toolgate_server::ScopeHierarchy {
    toolgate_server::ScopeHierarchy::default().implies("basket:write", ["basket:read"])
}

/// Build the basket server with the default options.
pub fn server() -> Result<Server, toolgate_server::RegistrationError> {
    server_with(&Options::default())
}

/// Build the basket server.
pub fn server_with(options: &Options) -> Result<Server, toolgate_server::RegistrationError> {
    let require = options.require_scopes;
    let scoped =
        move |tool: ToolDef, scope: &str| if require { tool.scopes([scope]) } else { tool };
    let mut builder = Server::builder("basket", env!("CARGO_PKG_VERSION"));
    if let Some(calls) = options.rate_limit_per_minute {
        builder = builder.rate_limit(toolgate_server::RateLimit::per_minute(calls));
    }
    let skus: Vec<&str> = CATALOG.iter().map(|(s, _, _)| *s).collect();
    builder
        // Every handler that takes `State<Arc<Store>>` gets this store.
        .state(Arc::new(store()))
        .instructions("Create a basket with create_basket, then pass its basket_id to add_item, get_basket and delete_basket.")
        .tool(
            scoped(ToolDef::new("get_current_time"), "basket:read")
                .title("Current time")
                .description("Returns the server's current time in UTC (RFC 3339). Use it when the user asks for the time or date.")
                .read_only()
                .open_world(false)
                .handler(|| async { rfc3339(SystemTime::now()) }),
        )
        .tool(
            scoped(ToolDef::new("create_basket"), "basket:write")
                .title("Create basket")
                .description("Creates an empty shopping basket and returns its basket_id. The basket belongs to the caller who created it and expires after 24 hours of inactivity; after that, create a new one.")
                .destructive(false)
                .open_world(false)
                .handler(|State(store): State<Arc<Store>>, ctx: RequestContext| async move {
                    let id = store.insert(&ctx, Basket { items: Vec::new() })?;
                    Ok(Structured(NewBasket { basket_id: id, expires_after_hours: BASKET_TTL.as_secs() / 3600 }))
                }),
        )
        .tool(
            scoped(ToolDef::new("add_item"), "basket:write")
                .title("Add item")
                .description(format!(
                    "Adds a product to a basket and returns the updated basket. Known SKUs: {}.",
                    skus.join(", ")
                ))
                .destructive(false)
                .open_world(false)
                .handler(|State(store): State<Arc<Store>>, args: AddItem, ctx: RequestContext| async move {
                    if !CATALOG.iter().any(|(s, _, _)| *s == args.sku) {
                        let known: Vec<&str> = CATALOG.iter().map(|(s, _, _)| *s).collect();
                        return Err(ToolError::new(format!(
                            "Unknown SKU {:?}: there is no such product. Use one of {}.",
                            args.sku,
                            known.join(", ")
                        )));
                    }
                    let basket = store.with(&ctx, &args.basket_id, |b| {
                        match b.items.iter_mut().find(|(s, _)| *s == args.sku) {
                            Some((_, q)) => *q = q.saturating_add(args.quantity),
                            None => b.items.push((args.sku.clone(), args.quantity)),
                        }
                        view(&args.basket_id, b)
                    })?;
                    Ok(Structured(basket))
                }),
        )
        .tool(
            scoped(ToolDef::new("get_basket"), "basket:read")
                .title("Show basket")
                .description("Returns the contents and total of a basket.")
                .read_only()
                .open_world(false)
                .handler(|State(store): State<Arc<Store>>, args: BasketRef, ctx: RequestContext| async move {
                    Ok(Structured(store.with(&ctx, &args.basket_id, |b| view(&args.basket_id, b))?))
                }),
        )
        .tool(
            scoped(ToolDef::new("quote_shipping"), "basket:read")
                .title("Quote shipping")
                .description("Quotes shipping for a basket to a region (eu, us or apac) and returns the total.")
                .read_only()
                .open_world(false)
                .handler(|State(store): State<Arc<Store>>, args: QuoteShipping, ctx: RequestContext| async move {
                    let view = store.with(&ctx, &args.basket_id, |b| view(&args.basket_id, b))?;
                    let shipping_cents = match args.region {
                        Region::Eu => 490,
                        Region::Us => 790,
                        Region::Apac => 1290,
                    };
                    Ok(Structured(Quote {
                        basket_id: view.basket_id,
                        shipping_cents,
                        total_cents: view.total_cents + shipping_cents,
                    }))
                }),
        )
        .tool(
            scoped(ToolDef::new("checkout"), "basket:checkout")
                .title("Check out")
                .description("Pays for a basket. Asks the user to confirm the amount first (the client must support elicitation); nothing is charged without that confirmation.")
                .destructive(true)
                // Paying reaches a payment provider, an open world, even
                // though this example only records the order.
                .open_world(true)
                // The confirmed round pays once: its state, sent again
                // (after the basket is refilled, say), pays nothing.
                .single_use_rounds()
                .handler(|State(store): State<Arc<Store>>, args: BasketRef, ctx: RequestContext| {
                    async move {
                        let view = store.with(&ctx, &args.basket_id, |b| view(&args.basket_id, b))?;
                        if view.items.is_empty() {
                            return Err(ToolError::new("The basket is empty: add items with add_item before checking out."));
                        }
                        let mut input = ctx.inputs();
                        let message = format!(
                            "Pay {}.{:02} for {} item(s) in basket {}?",
                            view.total_cents / 100,
                            view.total_cents % 100,
                            view.items.iter().map(|l| l.quantity).sum::<u32>(),
                            view.basket_id
                        );
                        let form = serde_json::json!({
                            "type": "object",
                            "properties": {"confirm": {"type": "boolean", "title": "Confirm payment"}},
                            "required": ["confirm"]
                        });
                        let Some(answer) = input.elicit("confirm_payment", &message, form)? else {
                            // Ends this round: the client asks the user and retries.
                            return Err(input.ask());
                        };
                        let confirmed = answer.action == toolgate_server::ElicitAction::Accept
                            && answer.content.as_ref().and_then(|c| c.get("confirm")).and_then(|v| v.as_bool()) == Some(true);
                        if !confirmed {
                            return Ok("Checkout cancelled by the user; nothing was charged.".to_owned());
                        }
                        store.with(&ctx, &args.basket_id, |b| b.items.clear())?;
                        Ok(format!(
                            "Paid {}.{:02}. Order ord_{:016x} is confirmed.",
                            view.total_cents / 100,
                            view.total_cents % 100,
                            rand::random::<u64>()
                        ))
                    }
                }),
        )
        .tool(
            scoped(ToolDef::new("delete_basket"), "basket:write")
                .title("Delete basket")
                .description("Deletes a basket and everything in it. This cannot be undone.")
                .destructive(true)
                .idempotent(true)
                .open_world(false)
                .handler(|State(store): State<Arc<Store>>, args: BasketRef, ctx: RequestContext| async move {
                    store.remove(&ctx, &args.basket_id)?;
                    Ok(format!("Deleted basket {}", args.basket_id))
                }),
        )
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn call(
        server: &Server,
        id: i64,
        params: serde_json::Value,
        caps: serde_json::Value,
    ) -> serde_json::Value {
        call_as(server, None, id, params, caps).await
    }

    async fn call_as(
        server: &Server,
        subject: Option<&str>,
        id: i64,
        params: serde_json::Value,
        caps: serde_json::Value,
    ) -> serde_json::Value {
        let transport = toolgate_server::TransportContext {
            auth: subject.map(toolgate_server::AuthContext::new),
            ..Default::default()
        };
        let mut params = params;
        params["_meta"] = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps
        });
        let message = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let reply = server.handle_message(&serde_json::to_vec(&message).unwrap(), &transport);
        let frame = match reply {
            toolgate_server::transport::Reply::Done(f) => f,
            toolgate_server::transport::Reply::Streaming(mut e) => e.next().await.unwrap(),
            toolgate_server::transport::Reply::Nothing => panic!("no reply"),
        };
        serde_json::from_slice(frame.bytes()).unwrap()
    }

    #[tokio::test]
    async fn a_basket_belongs_to_the_caller_who_created_it() {
        let server = server().unwrap();
        let none = serde_json::json!({});
        let created = call_as(
            &server,
            Some("alice"),
            1,
            serde_json::json!({"name": "create_basket"}),
            none.clone(),
        )
        .await;
        let id = created["result"]["structuredContent"]["basket_id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(id.starts_with("bsk_"), "{created}");
        let get = |basket: &str| serde_json::json!({"name": "get_basket", "arguments": {"basket_id": basket}});
        let mine = call_as(&server, Some("alice"), 2, get(&id), none.clone()).await;
        assert_eq!(
            mine["result"]["structuredContent"]["basket_id"],
            id.as_str()
        );
        // Bob gets exactly what an unknown id gets: nothing about Alice's basket.
        let theirs = call_as(&server, Some("bob"), 3, get(&id), none.clone()).await;
        let unknown = call_as(&server, Some("bob"), 4, get("bsk_unknown"), none.clone()).await;
        assert_eq!(theirs["result"]["isError"], true);
        let text = |v: &serde_json::Value| {
            v["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            text(&theirs).replace(&id, "ID"),
            text(&unknown).replace("bsk_unknown", "ID")
        );
        assert!(
            text(&theirs).contains("create a new one with create_basket"),
            "{theirs}"
        );
        let delete = serde_json::json!({"name": "delete_basket", "arguments": {"basket_id": id}});
        assert_eq!(
            call_as(&server, Some("bob"), 5, delete.clone(), none.clone()).await["result"]["isError"],
            true
        );
        assert_eq!(
            call_as(&server, Some("alice"), 6, delete, none).await["result"]["isError"],
            serde_json::Value::Null
        );
    }

    #[tokio::test]
    async fn with_scopes_required_each_tool_needs_its_scope() {
        let server = server_with(&Options {
            require_scopes: true,
            ..Options::default()
        })
        .unwrap();
        let writer = scope_hierarchy()
            .expand(toolgate_server::AuthContext::new("w").with_scopes(["basket:write"]));
        let message = |name: &str, args: serde_json::Value| {
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": name, "arguments": args,
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}})
        };
        let send = |auth: Option<toolgate_server::AuthContext>, m: serde_json::Value| {
            let transport = toolgate_server::TransportContext {
                auth,
                ..Default::default()
            };
            let server = server.clone();
            async move {
                let frame = match server
                    .handle_message(&serde_json::to_vec(&m).unwrap(), &transport)
                {
                    toolgate_server::transport::Reply::Done(f) => f,
                    toolgate_server::transport::Reply::Streaming(mut e) => e.next().await.unwrap(),
                    toolgate_server::transport::Reply::Nothing => panic!("no reply"),
                };
                serde_json::from_slice::<serde_json::Value>(frame.bytes()).unwrap()
            }
        };
        let created = send(
            Some(writer.clone()),
            message("create_basket", serde_json::json!({})),
        )
        .await;
        let id = created["result"]["structuredContent"]["basket_id"]
            .as_str()
            .unwrap()
            .to_owned();
        // basket:write implies basket:read.
        let got = send(
            Some(writer.clone()),
            message("get_basket", serde_json::json!({"basket_id": id})),
        )
        .await;
        assert_eq!(got["result"]["structuredContent"]["basket_id"], id.as_str());
        let pay = send(
            Some(writer),
            message("checkout", serde_json::json!({"basket_id": id})),
        )
        .await;
        assert_eq!(pay["error"]["code"], toolgate_server::INSUFFICIENT_SCOPE);
        assert_eq!(
            pay["error"]["data"]["requiredScopes"],
            serde_json::json!(["basket:checkout"])
        );
        let anonymous = send(None, message("get_current_time", serde_json::json!({}))).await;
        assert_eq!(
            anonymous["error"]["data"]["requiredScopes"],
            serde_json::json!(["basket:read"])
        );
    }

    #[tokio::test]
    async fn checkout_asks_for_confirmation_before_paying() {
        let s = server().unwrap();
        let caps = serde_json::json!({"elicitation": {}});
        let created = call(
            &s,
            1,
            serde_json::json!({"name": "create_basket"}),
            caps.clone(),
        )
        .await;
        let id = created["result"]["structuredContent"]["basket_id"]
            .as_str()
            .unwrap()
            .to_owned();
        call(&s, 2, serde_json::json!({"name": "add_item", "arguments": {"basket_id": id, "sku": "SKU-1003", "quantity": 2}}), caps.clone()).await;
        let args = serde_json::json!({"basket_id": id});
        let r1 = call(
            &s,
            3,
            serde_json::json!({"name": "checkout", "arguments": args}),
            caps.clone(),
        )
        .await;
        assert_eq!(r1["result"]["resultType"], "input_required");
        let message = r1["result"]["inputRequests"]["confirm_payment"]["params"]["message"]
            .as_str()
            .unwrap();
        assert!(message.contains("25.00"), "{message}");
        let state = r1["result"]["requestState"].clone();
        let confirmed = serde_json::json!({"name": "checkout", "arguments": args, "requestState": state,
            "inputResponses": {"confirm_payment": {"action": "accept", "content": {"confirm": true}}}});
        let r2 = call(&s, 4, confirmed.clone(), caps.clone()).await;
        assert!(
            r2["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("Paid 25.00"),
            "{r2}"
        );
        // The basket refilled, the confirmed round sent again: nothing is
        // paid, and the basket keeps its items.
        call(&s, 7, serde_json::json!({"name": "add_item", "arguments": {"basket_id": id, "sku": "SKU-1003", "quantity": 2}}), caps.clone()).await;
        let replay = call(&s, 8, confirmed, caps.clone()).await;
        assert_eq!(replay["result"]["isError"], true, "{replay}");
        assert_eq!(
            replay["result"]["content"][0]["text"],
            "This round of \"checkout\" was already answered: each requestState is good for one retry, so the tool did not run again. Call \"checkout\" again without requestState to start over."
        );
        let kept = call(
            &s,
            9,
            serde_json::json!({"name": "get_basket", "arguments": args}),
            caps.clone(),
        )
        .await;
        assert_eq!(
            kept["result"]["structuredContent"]["total_cents"], 2500,
            "{kept}"
        );
        // Without elicitation support nothing is charged: -32021.
        let r = call(&s, 5, serde_json::json!({"name": "add_item", "arguments": {"basket_id": id, "sku": "SKU-1001"}}), caps).await;
        assert_eq!(r["result"]["isError"], serde_json::Value::Null);
        let r = call(
            &s,
            6,
            serde_json::json!({"name": "checkout", "arguments": args}),
            serde_json::json!({}),
        )
        .await;
        assert_eq!(r["error"]["code"], -32021);
    }

    #[test]
    fn the_server_builds() {
        let server = server().expect("valid registrations");
        assert!(server.tool_names().contains(&"quote_shipping".to_owned()));
    }

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_785_196_800)),
            "2026-07-28T00:00:00Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400 + 3723)),
            "2000-02-29T01:02:03Z"
        );
    }
}
