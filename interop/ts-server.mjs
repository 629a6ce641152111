// A small MCP server written with the official TypeScript SDK v2
// (@modelcontextprotocol/server), used to check toolgate-client against a
// third-party 2026-07-28 implementation. `node ts-server.mjs` serves stdio;
// `node ts-server.mjs --http PORT` serves Streamable HTTP on 127.0.0.1.
import http from 'node:http';
import { McpServer, createMcpHandler, fromJsonSchema } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

function factory() {
  const server = new McpServer({ name: 'ts-interop', version: '1.0.0' });
  server.registerTool(
    'add',
    {
      description: 'Adds two integers.',
      inputSchema: fromJsonSchema({
        type: 'object',
        properties: { a: { type: 'integer' }, b: { type: 'integer' } },
        required: ['a', 'b']
      }),
      annotations: { readOnlyHint: true }
    },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] })
  );
  server.registerTool(
    'fail',
    { description: 'Always reports a tool error.', inputSchema: fromJsonSchema({ type: 'object' }) },
    async () => ({ isError: true, content: [{ type: 'text', text: 'it failed on purpose' }] })
  );
  return server;
}

const httpIndex = process.argv.indexOf('--http');
if (httpIndex === -1) {
  serveStdio(factory);
} else {
  const port = Number(process.argv[httpIndex + 1] ?? 3100);
  const handler = createMcpHandler(factory);
  http
    .createServer(async (req, res) => {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const body = Buffer.concat(chunks);
      const request = new Request(`http://127.0.0.1:${port}${req.url}`, {
        method: req.method,
        headers: req.headers,
        body: ['GET', 'HEAD'].includes(req.method) ? undefined : body
      });
      const response = await handler.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body) {
        for await (const chunk of response.body) res.write(chunk);
      }
      res.end();
    })
    .listen(port, '127.0.0.1');
}
