// The official TypeScript SDK 1.x client (legacy era: initialize handshake)
// against the basket example: list its tools, call them, and answer the
// checkout's confirmation (a server-initiated elicitation/create request).
//
//   node ts1-client.mjs stdio PROGRAM [ARGS...]
//   node ts1-client.mjs http URL
//
// Prints one line per check ("ok ..." or "FAIL ...") and exits 1 on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, ...rest] = process.argv.slice(2);
const transport =
  mode === "http"
    ? new StreamableHTTPClientTransport(new URL(rest[0]))
    : new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "ignore" });

const client = new Client(
  { name: "toolgate-interop-ts1", version: "1.0.0" },
  { capabilities: { elicitation: {} } },
);
let elicited = null;
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicited = request.params;
  return { action: "accept", content: { confirm: true } };
});

let failed = 0;
const expect = (what, ok, detail) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${ok || detail === undefined ? "" : `: ${JSON.stringify(detail)}`}`);
  if (!ok) failed += 1;
};
const text = (result) => (result.content ?? []).map((c) => c.text ?? "").join("");

try {
  await client.connect(transport);
  expect("initialize negotiated a legacy revision", client.getServerVersion()?.name === "basket", client.getServerVersion());
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  expect("tools/list names the basket tools", ["get_current_time", "create_basket", "add_item", "checkout"].every((n) => names.includes(n)), names);

  const now = await client.callTool({ name: "get_current_time", arguments: {} });
  expect("get_current_time returns an RFC 3339 time", !now.isError && /^\d{4}-\d\d-\d\dT/.test(text(now)), now);

  const created = await client.callTool({ name: "create_basket", arguments: {} });
  const basketId = created.structuredContent?.basket_id;
  expect("create_basket returns structured content", typeof basketId === "string", created);

  const added = await client.callTool({ name: "add_item", arguments: { basket_id: basketId, sku: "SKU-1001", quantity: 2 } });
  expect("add_item returns the basket", !added.isError && added.structuredContent?.items?.length === 1, added);

  const bad = await client.callTool({ name: "add_item", arguments: { basket_id: basketId, quantity: "two" } });
  expect("bad arguments come back as a tool error naming the problem", bad.isError === true && /sku|quantity/.test(text(bad)), bad);

  const paid = await client.callTool({ name: "checkout", arguments: { basket_id: basketId } });
  expect("checkout asked for confirmation through elicitation/create", elicited !== null && /Pay/.test(elicited.message ?? ""), elicited);
  expect("checkout completed after the confirmation", !paid.isError && /^Paid /.test(text(paid)), paid);
} catch (e) {
  expect("the session ran without a protocol error", false, String(e));
} finally {
  await client.close().catch(() => {});
}
process.exit(failed === 0 ? 0 : 1);
