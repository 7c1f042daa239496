#!/usr/bin/env python3
"""Keep the `config` part of chart/values.schema.json equal to the schema the binary derives
from its Rust types (`pod-director check-config --print-schema`).

The chart's schema embeds the file's schema as `properties.config` (plus what its
templates need: `namespaceLabel` required, an empty `defaultGroup` for none) and its definitions beside the chart's
own (those only the other values refer to; they may use the config's, e.g. podLabels the
label key and value). Nothing of the config's part is written by hand.

    scripts/config-schema.py [--bin PATH]           rewrite chart/values.schema.json
    scripts/config-schema.py --check [--bin PATH]   exit 1 (with a diff) when it has drifted

PATH defaults to $POD_DIRECTOR_BIN, else target/debug/pod-director.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "chart" / "values.schema.json"
# Where the chart's values differ from the file, because its templates read or rewrite them:
# the label key is required (the webhook selectors use it), and an empty defaultGroup or
# namespaceGuard.mode means none (the templates drop them before writing the file).
CHART_REQUIRED = ["namespaceLabel"]
EMPTY_MEANS_NONE = ["defaultGroup"]
# (definition, property) pairs likewise, for settings nested in an object of their own.
EMPTY_MEANS_NONE_IN = [("namespaceGuard", "mode")]


def refs(node, found: set[str]) -> None:
    """The definition names `node` refers to."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            found.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            refs(value, found)
    elif isinstance(node, list):
        for value in node:
            refs(value, found)


def chart_definitions(chart: dict) -> dict:
    """The chart's own definitions: those its values other than `config` refer to."""
    definitions = chart.get("definitions", {})
    wanted: set[str] = set()
    refs({k: v for k, v in chart["properties"].items() if k != "config"}, wanted)
    while True:
        more: set[str] = set()
        for name in wanted:
            refs(definitions.get(name, {}), more)
        if more <= wanted:
            break
        wanted |= more
    return {name: definitions[name] for name in definitions if name in wanted}


def generate(chart: dict, config_schema: dict) -> dict:
    config_schema = dict(config_schema)
    config_definitions = config_schema.pop("definitions", {})
    config_schema.pop("$schema", None)
    config_schema.pop("title", None)
    config_schema["required"] = CHART_REQUIRED
    properties = config_schema.get("properties", {})
    for key in EMPTY_MEANS_NONE:
        properties[key] = {"anyOf": [{"const": ""}, properties[key]], "description": "Empty or null: none"}
    for definition, key in EMPTY_MEANS_NONE_IN:
        nested = config_definitions[definition]["properties"]
        nested[key] = {"anyOf": [{"const": ""}, nested[key]], "description": "Empty or null: none"}
    # The chart's other values may use the config's definitions too (podLabels: labelKey,
    # labelValue): those are the generated ones; the chart writes only the rest.
    own = {k: v for k, v in chart_definitions(chart).items() if k not in config_definitions}
    out = dict(chart)
    out["properties"] = {k: (config_schema if k == "config" else v) for k, v in chart["properties"].items()}
    out["definitions"] = {**own, **dict(sorted(config_definitions.items()))}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report drift instead of rewriting")
    parser.add_argument("--bin", default=os.environ.get("POD_DIRECTOR_BIN", str(ROOT / "target/debug/pod-director")))
    args = parser.parse_args()
    printed = subprocess.run(
        [args.bin, "check-config", "--print-schema"], check=True, capture_output=True, text=True
    ).stdout
    current = SCHEMA.read_text()
    wanted = json.dumps(generate(json.loads(current), json.loads(printed)), indent=2, ensure_ascii=False) + "\n"
    if args.check:
        if current != wanted:
            sys.stdout.writelines(
                difflib.unified_diff(
                    current.splitlines(True), wanted.splitlines(True), "chart/values.schema.json", "generated"
                )
            )
            print(
                "config-schema: chart/values.schema.json's config part is not what the binary derives; "
                "run scripts/config-schema.py (after cargo build)",
                file=sys.stderr,
            )
            return 1
        return 0
    SCHEMA.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
