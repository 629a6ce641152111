"""The official Python SDK's client (`mcp`) against two endpoints of one
`toolgate serve` (`[endpoints.calc]` and `[endpoints.plain]`, both over the
Python SDK server of py-server.py): each sees only its tools, a shaped
description reaches the model, a fixed value reaches the upstream, a global
deny holds inside an endpoint that allows.

`python py-client-endpoints.py BASE` (BASE: `http://127.0.0.1:PORT`); exits
non-zero on the first check that fails, saying which.
"""

import asyncio
import sys

from mcp.client.client import Client


def check(ok: bool, what: str) -> None:
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        sys.exit(1)


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def main(base: str) -> None:
    async with Client(f"{base}/mcp/calc") as calc:
        listed = (await calc.list_tools()).tools
        names = [t.name for t in listed]
        check(names == ["add_ten"], f"calc lists only its shaped tool: {names}")
        tool = listed[0]
        check(
            (tool.description or "").endswith("Adds ten to it."),
            f"the shaped description reaches the model: {tool.description!r}",
        )
        properties = (tool.input_schema or {}).get("properties", {})
        check("b" not in properties, f"the fixed parameter is not shown: {sorted(properties)}")
        result = await calc.call_tool("add_ten", {"a": 5})
        check(not result.is_error and text_of(result) == "15", f"the fixed value reaches the upstream: {text_of(result)!r}")
        refused = await calc.call_tool("add_ten", {"a": 5, "b": 1})
        check(bool(refused.is_error) and '"b"' in text_of(refused), f"giving the fixed parameter is refused: {text_of(refused)!r}")
        check(calc.instructions == "Arithmetic, with ten added.", f"its instructions: {calc.instructions!r}")
    async with Client(f"{base}/mcp/plain") as plain:
        names = [t.name for t in (await plain.list_tools()).tools]
        check(names == ["py.add"], f"plain lists py.add, not the globally denied py.fail it allows: {names}")
        result = await plain.call_tool("py.add", {"a": 2, "b": 3})
        check(text_of(result) == "5", f"plain calls the upstream unshaped: {text_of(result)!r}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
