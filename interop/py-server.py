"""A small MCP server written with the official Python SDK (`mcp`), used to
check toolgate-client against a third-party 2026-07-28 implementation.

`python py-server.py` serves stdio; `python py-server.py --http PORT` serves
Streamable HTTP on 127.0.0.1 at /mcp; `python py-server.py --sse PORT` serves
the deprecated HTTP+SSE transport (2024-11-05) at /sse.
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("py-interop")


@server.tool(description="Adds two integers.")
def add(a: int, b: int) -> str:
    return str(a + b)


@server.tool(description="Always reports a tool error.")
def fail() -> str:
    raise ValueError("it failed on purpose")


if __name__ == "__main__":
    if "--sse" in sys.argv:
        port = int(sys.argv[sys.argv.index("--sse") + 1])
        server.run("sse", host="127.0.0.1", port=port)
    elif "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port, json_response=True)
    else:
        server.run()
