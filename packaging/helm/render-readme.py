#!/usr/bin/env python3
"""Writes packaging/helm/railscope/README.md's table of values from values.yaml's comments.

    python3 packaging/helm/render-readme.py            # rewrite the README's table
    python3 packaging/helm/render-readme.py --check    # exit 1 when it is stale or a value is undocumented

A comment starting with `# --` (continued by `#` lines) documents the key below it; that key is a
row of the table, with its default, and its children are part of that default. Every other key
must be a map whose children are all documented, so a value nobody documented fails --check.
Every row must also be a value values.schema.json defines, and every property the schema
defines a row or under one.

It needs PyYAML (python3-yaml).
"""
import argparse
import json
import pathlib
import re
import sys

import yaml

CHART = pathlib.Path(__file__).resolve().parent / "railscope"
BEGIN = "<!-- BEGIN values: packaging/helm/render-readme.py writes this table -->\n"
END = "<!-- END values -->\n"
KEY = re.compile(r"^( *)([A-Za-z0-9_.\-]+):( |$)")


def documented(lines):
    """(path, description) of every key with a `# --` comment, and the paths of all keys."""
    rows, keys, stack, doc = [], [], [], None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("# --"):
            doc = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if doc is not None and not stripped.startswith("# BEGIN") and not stripped.startswith("# END"):
                doc.append(stripped[1:].strip())
            continue
        m = KEY.match(line)
        if not m:
            if stripped and not stripped.startswith("- "):
                doc = None
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2)))
        path = ".".join(k for _, k in stack)
        keys.append(path)
        if doc is not None:
            rows.append((path, " ".join(doc)))
        doc = None
    return rows, keys


def lookup(values, path):
    for key in path.split("."):
        values = values[key]
    return values


def schema_paths(schema, prefix=""):
    """The dotted paths of every property values.schema.json defines."""
    out = []
    for key, sub in schema.get("properties", {}).items():
        path = f"{prefix}{key}"
        out.append(path)
        out.extend(schema_paths(sub, path + "."))
    return out


def table(rows, values):
    out = [BEGIN, "| value | default | description |\n", "|---|---|---|\n"]
    for path, doc in rows:
        default = json.dumps(lookup(values, path), ensure_ascii=False)
        default = default.replace("|", "\\|")
        out.append(f"| `{path}` | `{default}` | {doc.replace('|', chr(92) + '|')} |\n")
    out.append(END)
    return "".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when stale or undocumented")
    args = parser.parse_args()

    text = (CHART / "values.yaml").read_text(encoding="utf-8")
    values = yaml.safe_load(text)
    rows, keys = documented(text.splitlines())
    problems = []
    row_paths = [p for p, _ in rows]
    for path in keys:
        covered = any(path == r or path.startswith(r + ".") for r in row_paths)
        if covered:
            continue
        value = lookup(values, path)
        if not isinstance(value, dict) or not value:
            problems.append(f"values.yaml: {path} has no `# --` comment")
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    defined = schema_paths(schema)
    for path in row_paths:
        if path not in defined:
            problems.append(f"values.schema.json: no property {path}")
    for path in defined:
        if path == "global":
            continue
        if path not in keys and not any(path.startswith(r + ".") for r in row_paths):
            problems.append(f"values.yaml: {path} (values.schema.json) has no default")
    if problems:
        sys.exit("packaging/helm/render-readme.py:\n  " + "\n  ".join(problems))

    readme = CHART / "README.md"
    current = readme.read_text(encoding="utf-8")
    start, end = current.find(BEGIN), current.find(END)
    if start < 0 or end < start:
        sys.exit(f"packaging/helm/render-readme.py: {readme} has lost its table markers")
    wanted = current[:start] + table(rows, values) + current[end + len(END):]
    if wanted != current:
        if args.check:
            sys.exit(f"{readme} is stale: run python3 packaging/helm/render-readme.py")
        readme.write_text(wanted, encoding="utf-8")
        print(f"{readme} written", file=sys.stderr)


if __name__ == "__main__":
    main()
