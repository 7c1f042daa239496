#!/usr/bin/env python3
"""Fail when the docs or a command's help name a chart value that chart/values.yaml does not have
(scripts/book.sh runs this).

    scripts/book-chart-keys.py              check docs/src/**/*.md (with the generated reference/cli.md:
                                            every command's --help), README.md, DEVELOPMENT.md, chart/README.md
    scripts/book-chart-keys.py --self-test  the check finds the stale keys of a made-up page

A chart key is named by a code span
- that a chart value's context introduces: "the chart's `KEY`", "chart key `KEY`", "chart value `KEY`",
  "`KEY` (chart" — whatever KEY's first segment;
- or that starts with a top-level map of values.yaml that no other namespace of names shares
  (`webhook.`, `certificates.`, `rbac.`, … — not `service.` nor `audit.`: `service.name` and `audit.ready`
  are also OpenTelemetry attributes; nor the pod-spec keys `nodeSelector.`, `tolerations.`, `affinity.`
  that groups share). A file name (`rbac.yaml`) is not a key.
KEY must be a path of values.yaml: every segment a key of the map before it (a prefix of a longer path is
fine; `.*` or a `<placeholder>` segment ends the path). `config.groups.NAME…` is checked up to `groups`.
"""

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP_LEVEL = ["README.md", "DEVELOPMENT.md", "chart/README.md"]
# Top-level maps of values.yaml whose dotted names mean nothing else in these pages.
CHART_ONLY = [
    "webhook",
    "certificates",
    "rbac",
    "serviceAccount",
    "tracing",
    "image",
    "serviceMonitor",
    "networkPolicy",
    "podDisruptionBudget",
    "containerPorts",
    "livenessProbe",
    "readinessProbe",
]
FILES = (".yaml", ".yml", ".md", ".json", ".tpl", ".rs", ".py", ".sh")
CONTEXT = re.compile(r"chart(?:'s| key| value)s?\s+`([^`]+)`|`([^`]+)`\s+\(chart\b")
SPAN = re.compile(r"`([^`]+)`")
KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*(\.[A-Za-z0-9*<>_-]+)+")


def load_values(path):
    """The nested keys of values.yaml, read without a YAML library: indentation and `key:` lines."""
    root = {}
    stack = [(-1, root)]
    for line in path.read_text().splitlines():
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#") or stripped.startswith("-"):
            continue
        m = re.match(r"([A-Za-z0-9_.-]+|\"[^\"]+\"):", stripped)
        if not m:
            continue
        indent = len(line) - len(stripped)
        while stack[-1][0] >= indent:
            stack.pop()
        node = {}
        stack[-1][1][m.group(1).strip('"')] = node
        stack.append((indent, node))
    return root


def exists(values, key):
    node = values
    for segment in key.split("."):
        if segment == "*" or segment.startswith("<"):
            return True
        if segment not in node:
            return False
        node = node[segment]
        if node is values.get("config", {}).get("groups"):
            return True
    return True


def named_keys(text):
    """(line number, key) of every chart key a page names."""
    for number, line in enumerate(text.splitlines(), 1):
        found = set()
        for m in CONTEXT.finditer(line):
            found.add(m.group(1) or m.group(2))
        for span in SPAN.findall(line):
            if span.split(".", 1)[0] in CHART_ONLY:
                found.add(span)
        for key in sorted(found):
            key = key.split("=", 1)[0].strip()
            if key.endswith(FILES):
                continue
            if KEY.fullmatch(key) or re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key):
                yield number, key


def check(root, files):
    values = load_values(root / "chart" / "values.yaml")
    errors = []
    for path in files:
        for number, key in named_keys(path.read_text()):
            if not exists(values, key):
                errors.append(f"{path.relative_to(root)}:{number}: chart/values.yaml has no {key!r}")
    return errors


def files_of(root):
    return sorted((root / "docs" / "src").rglob("*.md")) + [root / f for f in TOP_LEVEL if (root / f).exists()]


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs" / "src").mkdir(parents=True)
        (root / "chart").mkdir()
        (root / "chart" / "values.yaml").write_text(
            "config:\n  groups: {}\nwebhook:\n  # -- x\n  admissionPolicies: false\n  failurePolicy:\n"
            "    enforce: Fail\nservice:\n  port: 443\n"
        )
        (root / "docs" / "src" / "a.md").write_text(
            "The chart's `policies.reconcile` (stale), the chart's `webhook.admissionPolicies` (fine).\n"
            "`webhook.failurePolicy.*` and `webhook.failurePolicy.enforce` are fine, `webhook.failurePolicy.observe` is not.\n"
            "`service.name` is an OpenTelemetry attribute; `rbac.yaml` a file; `config.groups.ci.mode` a group's.\n"
            "The chart's `pdb.yaml`; `placement::tests::a_test` (chart: helm-unittest).\n"
            "With `webhook.reconcile` (chart, default `true`) — stale.\n"
        )
        errors = check(root, files_of(root))
        expected = ["'policies.reconcile'", "'webhook.failurePolicy.observe'", "'webhook.reconcile'"]
        missing = [e for e in expected if not any(e in err for err in errors)]
        if missing or len(errors) != len(expected):
            print("book-chart-keys self-test failed:\n  " + "\n  ".join(errors), file=sys.stderr)
            return 1
    print("book-chart-keys: self-test passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    files = files_of(ROOT)
    errors = check(ROOT, files)
    if errors:
        print("book-chart-keys: chart keys that do not exist:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    count = sum(1 for f in files for _ in named_keys(f.read_text()))
    print(f"book-chart-keys: {count} chart keys named in {len(files)} files, all in chart/values.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
