#!/usr/bin/env python3
"""Turn catalogue.txt, queries.txt and heldout.txt into their JSON: tool definitions as servers send
them, named `server.tool` as the gateway offers them. Run from this
directory after editing catalogue.txt; the JSON is committed."""
import json

TYPES = {"string", "number", "integer", "boolean", "array", "object"}
HINTS = {
    "ro": ("readOnlyHint", True),
    "destructive": ("destructiveHint", True),
    "idempotent": ("idempotentHint", True),
    "closed": ("openWorldHint", False),
}


def tool(server, line):
    parts = [p.strip() for p in line.split("|")]
    name, description, params = parts[0], parts[1], parts[2]
    hints = parts[3].split() if len(parts) > 3 else []
    properties, required = {}, []
    for param in filter(None, (p.strip() for p in params.split(";"))):
        pname, ptype, pdesc = param.split(":", 2)
        if pname.startswith("!"):
            pname = pname[1:]
            required.append(pname)
        assert ptype in TYPES, (name, ptype)
        schema = {"type": ptype, "description": pdesc}
        if ptype == "array":
            schema["items"] = {"type": "string"} if pname != "edits" else {"type": "object"}
        properties[pname] = schema
    input_schema = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    out = {"name": f"{server}.{name}", "description": description, "inputSchema": input_schema}
    annotations = dict(HINTS[h] for h in hints)
    if annotations:
        out["annotations"] = annotations
    return out


def main():
    server, tools = None, []
    with open("catalogue.txt") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            if line.startswith("@ "):
                server = line[2:].strip()
                continue
            tools.append(tool(server, line))
    names = [t["name"] for t in tools]
    assert len(names) == len(set(names)), "duplicate names"
    with open("catalogue.json", "w") as f:
        json.dump(tools, f, indent=1)
        f.write("\n")
    for source, target in (("queries.txt", "queries.json"), ("heldout.txt", "heldout.json")):
        count = questions(source, target, names)
        print(f"{target}: {count} queries")
    print(f"{len(tools)} tools")


def questions(source, target, names):
    queries = []
    with open(source) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            query, answers = line.split("|")
            answers = answers.split()
            assert all(a in names for a in answers), (query, answers)
            queries.append({"query": query.strip(), "answers": answers})
    with open(target, "w") as f:
        json.dump(queries, f, indent=1)
        f.write("\n")
    return len(queries)


if __name__ == "__main__":
    main()
