"""The official Python SDK's client (`mcp`) against an endpoint of `toolgate
serve` with `disclosure = "search"` over the basket, server-everything and
server-filesystem: the list holds the pinned tool and the search's two; the
client finds tools by what they do and calls them through `call_tool`; a
confirmed tool's approval question names the real tool.

`python py-client-search.py URL` (URL: the endpoint); exits non-zero on
the first check that fails, saying which.
"""

import asyncio
import sys

import mcp.types as types
from mcp.client.client import Client


def check(ok: bool, what: str) -> None:
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        sys.exit(1)


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


asked: list[str] = []


async def approve(context, params):
    asked.append(params.message)
    return types.ElicitResult(action="accept", content={"approve": True})


async def find(client: Client, query: str) -> list[str]:
    result = await client.call_tool("find_tools", {"query": query})
    tools = (result.structured_content or {}).get("tools", [])
    return [t["name"] for t in tools]


async def main(url: str) -> None:
    async with Client(url, elicitation_callback=approve) as client:
        listed = sorted(t.name for t in (await client.list_tools()).tools)
        check(
            listed == ["basket.get_current_time", "call_tool", "find_tools"],
            f"the list holds the pinned tool and the search's two: {listed}",
        )
        found = await find(client, "echo a message back")
        check("everything.echo" in found, f"finds server-everything's echo: {found}")
        result = await client.call_tool(
            "call_tool", {"name": "everything.echo", "arguments": {"message": "through the search"}}
        )
        check(
            not result.is_error and "through the search" in text_of(result),
            f"calls it through call_tool: {text_of(result)!r}",
        )
        found = await find(client, "read the contents of a text file")
        check(
            any(n.startswith("fs.read") for n in found[:3]),
            f"finds server-filesystem's readers first: {found}",
        )
        found = await find(client, "start a new shopping basket")
        check(found[:1] == ["basket.create_basket"], f"finds the basket's create_basket first: {found}")
        result = await client.call_tool("call_tool", {"name": "basket.create_basket", "arguments": {}})
        check(not result.is_error, f"the approved call ran: {text_of(result)!r}")
        check(
            len(asked) == 1 and "Tool: basket.create_basket" in asked[0],
            f"the approval question names the real tool: {asked!r}",
        )
        bad = await client.call_tool("call_tool", {"name": "everything.echo", "arguments": {}})
        check(bool(bad.is_error) and "message" in text_of(bad), f"bad arguments name the field: {text_of(bad)!r}")
        listed_after = sorted(t.name for t in (await client.list_tools()).tools)
        check(listed_after == listed, "the list is the same after searching")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
