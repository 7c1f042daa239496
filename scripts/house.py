#!/usr/bin/env python3
"""The house rules a reader relies on, counted and held (scripts/lint house runs this).

    scripts/house.py           print the counts; exit 1 when a rule is broken

- No product (src/) or engine (crates/engine/src/) Rust file over 800 lines; no Rust file of any
  kind over 1,000 (tests, benches, e2e, the test kit included).
- At most 8 `pub mod` in the product: its public surface is the binary's and its tests' (the
  rest is `pub(crate)`, or re-exported by those eight).
- One module-file style: `foo.rs` beside `foo/`, never `foo/mod.rs` (but `tests/*/mod.rs`, cargo's
  way to share a module between integration tests without making it a test of its own).
- The configuration code (crates/engine/src/config.rs and config/, tests aside) stays at or under
  its ceiling, CONFIG_LINES below: it may shrink (lower the ceiling then), never grow.
- One unit-test layout: a module's unit tests in `foo/tests.rs` beside `foo.rs` (split into
  `foo/tests/*.rs` when long), never written in `foo.rs`, in a sibling `foo_tests.rs`, or by `#[path]`.
- The decision's field names are written once (src/telemetry.rs, `decision_fields!`): no other
  product source (tests aside) names them.
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_MAX = 800
ANY_MAX = 1000
PUB_MODS_MAX = 8
CONFIG_LINES = 1992


def tracked(*patterns):
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in sorted(set(out.splitlines())) if (ROOT / line).is_file()]


def lines(path):
    return sum(1 for _ in path.open(encoding="utf-8"))


def main():
    failures = []
    files = tracked("*.rs")
    sizes = sorted(((lines(p), p.relative_to(ROOT).as_posix()) for p in files), reverse=True)
    print("longest Rust files:")
    for n, name in sizes[:6]:
        print(f"  {n:5} {name}")
    for n, name in sizes:
        source = name.startswith("src/") or name.startswith("crates/engine/src/")
        limit = SOURCE_MAX if source else ANY_MAX
        if n > limit:
            failures.append(f"{name}: {n} lines (at most {limit} for {'product and engine sources' if source else 'any Rust file'})")

    pub_mods = []
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith("src/"):
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if re.match(r"\s*pub mod \w+", line):
                    pub_mods.append(f"{rel}:{i}")
    print(f"pub mod in the product: {len(pub_mods)} (at most {PUB_MODS_MAX})")
    if len(pub_mods) > PUB_MODS_MAX:
        failures.append(f"{len(pub_mods)} `pub mod` in the product (at most {PUB_MODS_MAX}): {', '.join(pub_mods)}")

    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        if p.name == "mod.rs" and not re.match(r"tests/[^/]+/mod\.rs$", rel):
            failures.append(f"{rel}: a mod.rs; name it {p.parent.as_posix()[len(str(ROOT)) + 1:]}.rs beside its folder")

    # One unit-test layout: a module's tests in `foo/tests.rs` (split into `foo/tests/*.rs` when long).
    layouts = []
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        if not re.match(r"(src|crates/[^/]+/src)/", rel):
            continue
        text = p.read_text(encoding="utf-8")
        if re.search(r"(?m)^\s*mod \w+ \{", text) and re.search(r"#\[cfg\(test\)\]\s*\n\s*mod \w+ \{", text):
            layouts.append(f"{rel}: tests written in the file; move them to {rel[:-3]}/tests.rs")
        if p.name.endswith("_tests.rs"):
            layouts.append(f"{rel}: a sibling test file; move it to {p.parent.relative_to(ROOT).as_posix()}/tests.rs (or tests/*.rs)")
        if "#[path" in text:
            layouts.append(f"{rel}: #[path]: name the module's file after the module")
    print(f"unit-test layouts: {1 + bool(layouts)} (foo/tests.rs, foo/tests/*.rs{'; and more' if layouts else ''})")
    failures.extend(layouts)

    config = [p for p in files if re.match(r"crates/engine/src/config(\.rs|/)", p.relative_to(ROOT).as_posix())
              and not re.search(r"(^|/)tests(\.rs$|/)", p.relative_to(ROOT).as_posix())]
    config_lines = sum(lines(p) for p in config)
    print(f"configuration code: {config_lines} lines (ceiling {CONFIG_LINES})")
    if config_lines > CONFIG_LINES:
        failures.append(f"the configuration code grew to {config_lines} lines (ceiling {CONFIG_LINES})")

    # A decision field name in quotes beside another one, anywhere but its one list.
    pattern = re.compile(r'"(admission\.request\.uid|placement\.patch\.op_count|reservation\.pool_nodes)"')
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        if rel == "src/telemetry.rs" or not rel.startswith("src/") or re.search(r"(^|/)tests(\.rs$|/)", rel):
            continue
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                failures.append(f"{rel}:{i}: a decision field name written again (src/telemetry.rs lists them once)")
    lists = 1 + sum("field name" in f for f in failures)
    print(f"decision field-name lists: {lists} (src/telemetry.rs{', and more' if lists > 1 else ''})")

    for failure in failures:
        print(f"scripts/house.py: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
