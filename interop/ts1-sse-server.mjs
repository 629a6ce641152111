// A small MCP server on the deprecated HTTP+SSE transport (2024-11-05),
// written with the official TypeScript SDK 1.x (@modelcontextprotocol/sdk)
// as many hosted servers still are: `node ts1-sse-server.mjs PORT` serves
// the event stream at /sse and takes messages at /messages.
import http from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

function factory() {
  const server = new Server({ name: 'ts1-sse-interop', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: 'add',
        description: 'Adds two integers.',
        inputSchema: {
          type: 'object',
          properties: { a: { type: 'integer' }, b: { type: 'integer' } },
          required: ['a', 'b']
        }
      },
      { name: 'fail', description: 'Always reports a tool error.', inputSchema: { type: 'object' } }
    ]
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name, arguments: args = {} } = request.params;
    if (name === 'add') {
      if (!Number.isInteger(args.a) || !Number.isInteger(args.b)) {
        return { isError: true, content: [{ type: 'text', text: 'a and b must be integers' }] };
      }
      return { content: [{ type: 'text', text: String(args.a + args.b) }] };
    }
    return { isError: true, content: [{ type: 'text', text: 'it failed on purpose' }] };
  });
  return server;
}

const port = Number(process.argv[2] ?? 3101);
const sessions = new Map();
http
  .createServer(async (req, res) => {
    const url = new URL(req.url, `http://127.0.0.1:${port}`);
    if (req.method === 'GET' && url.pathname === '/sse') {
      const transport = new SSEServerTransport('/messages', res);
      sessions.set(transport.sessionId, transport);
      res.on('close', () => sessions.delete(transport.sessionId));
      await factory().connect(transport);
      return;
    }
    if (req.method === 'POST' && url.pathname === '/messages') {
      const transport = sessions.get(url.searchParams.get('sessionId'));
      if (!transport) {
        res.writeHead(404).end('no such session');
        return;
      }
      await transport.handlePostMessage(req, res);
      return;
    }
    res.writeHead(404).end('not found');
  })
  .listen(port, '127.0.0.1');
