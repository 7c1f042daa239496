#!/usr/bin/env python3
"""The house rules a reader relies on, counted and held (scripts/lint house runs this).

    scripts/house.py           print the counts; exit 1 when a rule is broken

- No product (src/) or engine (crates/engine/src/) Rust file over 800 lines; no Rust file of any
  kind over 1,000 (tests, benches, e2e, the test kit included).
- At most 8 `pub mod` in the product: its public surface is the binary's and its tests' (the
  rest is `pub(crate)`, or re-exported by those eight; the modules of the hidden `testing` one,
  test helpers by concern, aside).
- One module-file style: `foo.rs` beside `foo/`, never `foo/mod.rs` (`tests/*/mod.rs` included:
  what the integration tests share is a test helper, in one of its two homes).
- The configuration code (crates/engine/src/config.rs and config/, tests aside) stays at or under
  its ceiling, CONFIG_LINES below: it may shrink (lower the ceiling then), never grow.
- One unit-test layout: a module's unit tests in `foo/tests.rs` beside `foo.rs` (split into
  `foo/tests/*.rs` when long), never written in `foo.rs`, in a sibling `foo_tests.rs`, or by `#[path]`.
- The decision's field names are written once (src/telemetry.rs, `decision_fields!`): no other
  product source (tests aside) names any of them as a string (every name of the list: a dotted one
  wherever it is quoted, a plain one where it names a field).
- One name and one home per concept: no `use … as …` of the crates' own items, each type name
  declared once per crate, one `--group` check, `MANAGED_BY` and its label written once, one
  mapping of the engine's decision to the audit's verdicts; test helpers in two
  homes (a crate's own `testing` module, the test kit), never in modules `tests/` share.
- The decision's walk and the audit's seam under their ceilings (issue 52): explain's `decide`,
  `src/cli/explain.rs`, `Admission::placement`, the engine names `scan.rs` imports and its `scan`,
  no `Audit { .. }` literal outside the engine, the engine's older entries and every engine
  `pub fn` used outside it. It prints the Rust code lines of the product and the engine.
- One word for the webhook-configuration reconciler leaving a field to another writer: it
  "yields" (`pod_director_webhook_reconcile_yields_total`, `PodDirectorReconcileYields`). The
  words it had before, "fight" and "reconcile conflict", appear in no tracked file of the
  product, its chart, dashboards, docs, tests, e2e, scripts or examples (this file aside).
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_MAX = 800
ANY_MAX = 1000
PUB_MODS_MAX = 8
CONFIG_LINES = 1991


def tracked(*patterns):
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in sorted(set(out.splitlines())) if (ROOT / line).is_file()]


# A test file: `tests.rs`, a `tests/` folder, a `testing` module (the crates' test helpers).
TEST_PATH = re.compile(r"(^|/)(tests|testing)(\.rs$|/)")
# Where test helpers live, two homes: a crate's own `testing` module (the helpers that build that
# crate's types: its unit tests are a second copy of the crate and cannot use another crate's copy
# of them; the engine's and the product's, the latter for tests/, benches and e2e too through its
# `testing` feature), and the test kit (crates/testkit: everything naming none of the product's
# types). A module the integration tests share by `mod` (`tests/*/mod.rs`) or by `#[path]` would
# be a third.
HELPER_HOMES_MAX = 2
# The crates (their sources' roots) whose type names must each be declared once.
CRATES = ("src/", "crates/engine/src/", "crates/testkit/src/", "e2e/src/")
# Paths of the crates' own items (a `use` of another crate's item may rename it).
OWN = re.compile(r"(crate|super|self|pod_director|pod_director_engine|pod_director_testkit|pod_director_e2e)::")
# Ceilings of the decision's walk (issue 52): lower them when the code shrinks, never raise them.
EXPLAIN_DECIDE_MAX, EXPLAIN_MAX, PLACEMENT_MAX = 40, 500, 30
SCAN_ENGINE_NAMES_MAX, SCAN_FN_MAX, AUDIT_LITERALS_MAX = 6, 60, 0


def function_lines(path, signature):
    """Lines of the function whose first line matches `signature` (to its closing brace), or 0."""
    text = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(text):
        if re.search(signature, line):
            indent = len(line) - len(line.lstrip())
            for j in range(i, len(text)):
                if text[j].startswith(" " * indent + "}") and len(text[j]) - len(text[j].lstrip()) == indent:
                    return j - i + 1
    return 0


def without_tests(text):
    """Rust source without its `#[cfg(test)]` items (declarations of test modules)."""
    return re.sub(r"#\[cfg\(test\)\]\s*\n[^\n]*\n", "", text)


def one_name_per_concept(files):
    """No `use … as …` of the crates' own items; each type name declared once per crate; one
    `--group` check; `MANAGED_BY` once; one decision-to-verdict mapping; test helpers in two homes."""
    failures = []
    renames = []
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        for m in re.finditer(r"(?ms)^\s*(?:pub(?:\([^)]*\))? )?use ([^;]*);", p.read_text(encoding="utf-8")):
            if OWN.match(m.group(1)) and re.search(r"\bas [A-Za-z]\w*", m.group(1)):
                renames.append(rel)
    print(f"use … as … renames of the crates' own items: {len(renames)}")
    failures += [f"{rel}: an item of the crate renamed on import; use its own name" for rel in renames]
    for root in CRATES:
        declared = {}
        for p in files:
            rel = p.relative_to(ROOT).as_posix()
            if not rel.startswith(root) or TEST_PATH.search(rel[len(root):]):
                continue
            for line in p.read_text(encoding="utf-8").splitlines():
                m = re.match(r"\s*(?:pub(?:\([^)]*\))? )?(?:struct|enum|trait) ([A-Z]\w*)", line) or re.match(
                    r"(?:pub(?:\([^)]*\))? )?type ([A-Z]\w*)", line)
                if m:
                    declared.setdefault(m.group(1), []).append(rel)
        twice = {name: places for name, places in declared.items() if len(places) > 1}
        print(f"type names declared twice in {root}: {len(twice)}")
        failures += [f"{root}: type {name} declared {len(places)} times ({', '.join(places)})" for name, places in twice.items()]
    checks = [p.relative_to(ROOT).as_posix() for p in files if "is not a group of the configuration" in p.read_text(encoding="utf-8")
              and not TEST_PATH.search(p.relative_to(ROOT).as_posix()) and p.relative_to(ROOT).as_posix().startswith(("src/", "crates/"))]
    print(f"--group checks: {len(checks)} ({', '.join(checks)})")
    if len(checks) != 1:
        failures.append(f"the `--group` check written {len(checks)} times: {', '.join(checks)} (src/cli.rs `named_group` once)")
    managed = [p.relative_to(ROOT).as_posix() for p in files for line in p.read_text(encoding="utf-8").splitlines()
               if re.match(r"\s*pub(\([^)]*\))? const MANAGED_BY(_LABEL)?: ", line)]
    print(f"MANAGED_BY written: {len(managed) // 2 if len(managed) % 2 == 0 else len(managed)}")
    if len(managed) != 2 or len(set(managed)) != 1:
        failures.append(f"MANAGED_BY and its label written more than once: {', '.join(managed)}")
    # One mapping of the engine's decision to the audit's verdicts (`AuditDecision::of`); the
    # ledger's verdicts are made from that one (`From<AuditDecision>`), never from a decision again.
    mappings = sorted({p.relative_to(ROOT).as_posix() for p in files
                       if p.relative_to(ROOT).as_posix().startswith(("src/", "crates/")) and not TEST_PATH.search(p.relative_to(ROOT).as_posix())
                       for line in p.read_text(encoding="utf-8").splitlines()
                       if re.search(r"\bDecision::\w+[\s|\w:]*=>\s*(?:\w+::)*(?:AuditDecision|WorkloadVerdict|Verdict)::", line)})
    print(f"decision-to-verdict mappings: {len(mappings)} ({', '.join(mappings)})")
    if len(mappings) != 1:
        failures.append(f"the engine's decision mapped to the audit's verdicts in {len(mappings)} places: {', '.join(mappings)} (AuditDecision::of once)")
    # The managed-by label's name and value as code once (the constants), whatever names them.
    literals = [f"{p.relative_to(ROOT).as_posix()}:{i}" for p in files
                if p.relative_to(ROOT).as_posix().startswith(("src/", "crates/")) and not TEST_PATH.search(p.relative_to(ROOT).as_posix())
                for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                if '"app.kubernetes.io/managed-by' in line and not line.lstrip().startswith("//")]
    print(f"managed-by label written as code: {len(literals)} ({', '.join(literals)})")
    if len(literals) != 1:
        failures.append(f"the managed-by label written {len(literals)} times as code: {', '.join(literals)} (MANAGED_BY_LABEL once)")
    homes = {}
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        own = re.match(r"((?:crates/[\w-]+/)?src)/testing(\.rs$|/)", rel)
        if own:
            homes.setdefault("a crate's own `testing` module", set()).add(f"{own.group(1)}/testing")
        elif rel.startswith("crates/testkit/"):
            homes.setdefault("the test kit", set()).add("crates/testkit")
        elif re.match(r"(tests|benches|e2e)/", rel) and (re.search(r"/[^/]+/mod\.rs$", rel) or "#[path" in p.read_text(encoding="utf-8")):
            homes.setdefault(rel, set()).add(rel)
    print(f"test helper homes: {len(homes)} (at most {HELPER_HOMES_MAX}: "
          + "; ".join(f"{home}: {', '.join(sorted(places))}" for home, places in sorted(homes.items())) + ")")
    if len(homes) > HELPER_HOMES_MAX:
        failures.append(f"test helpers in {len(homes)} homes (at most {HELPER_HOMES_MAX}): a crate's own `testing` module "
                        "for what names its types, the test kit for the rest")
    return failures


def the_decision_and_the_seam(files):
    """The decision's walk and the audit's seam, held to the ceilings above."""
    failures = []
    at = {p.relative_to(ROOT).as_posix(): p for p in files}

    def ceiling(what, value, most):
        print(f"{what}: {value} (at most {most})")
        if value > most:
            failures.append(f"{what}: {value} (at most {most})")

    ceiling("explain's decide, lines", function_lines(at["src/cli/explain.rs"], r"^fn decide\("), EXPLAIN_DECIDE_MAX)
    ceiling("src/cli/explain.rs, lines", lines(at["src/cli/explain.rs"]), EXPLAIN_MAX)
    ceiling("Admission::placement, lines", function_lines(at["src/admission.rs"], r"async fn placement\("), PLACEMENT_MAX)
    older = [p.relative_to(ROOT).as_posix() for p in files if re.match(r"(src|tests|benches|e2e)/", p.relative_to(ROOT).as_posix())
             and re.search(r"placement::mutate\(|reservation::decide\(", p.read_text(encoding="utf-8"))]
    ceiling("the engine's older entries called outside it", len(older), 0)
    scan = at["src/cluster/audit/scan.rs"].read_text(encoding="utf-8")
    names = set()
    for m in re.finditer(r"(?ms)^use pod_director_engine::([^;]*);", scan):
        for part in re.split(r"[\s,{}]+", m.group(1)):
            if part.split("::")[-1] not in ("", "self"):
                names.add(part.split("::")[-1])
    ceiling("engine names scan.rs imports", len(names), SCAN_ENGINE_NAMES_MAX)
    ceiling("the scan, lines", function_lines(at["src/cluster/audit/scan.rs"], r"async fn scan\("), SCAN_FN_MAX)
    literals = [f"{rel}:{i}" for rel, p in at.items() if not rel.startswith("crates/engine/")
                for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if re.search(r"\bAudit \{", line) and not re.search(r"->\s*[\w:]*Audit \{", line)]
    ceiling("`Audit { .. }` literals outside the engine", len(literals), AUDIT_LITERALS_MAX)
    engine = [p for rel, p in at.items() if rel.startswith("crates/engine/src/") and not TEST_PATH.search(rel)]
    pub_fns = {n for p in engine for n in re.findall(r"(?m)^\s*pub fn (\w+)", without_tests(p.read_text(encoding="utf-8")))}
    outside = "\n".join(p.read_text(encoding="utf-8") for rel, p in at.items()
                        if re.match(r"(src|tests|benches|e2e|crates/testkit)/", rel))
    unused = sorted(n for n in pub_fns if not re.search(r"\b" + n + r"\b", outside))
    ceiling(f"engine pub fn unused outside it{' (' + ', '.join(unused) + ')' if unused else ''}", len(unused), 0)
    return failures


# The words the reconciler's yielding had before it had one (issue 52): none may come back, in a
# name (a metric, an alert, its runbook anchor, a scenario, a function) or in the prose about it.
OLD_YIELD_WORDS = re.compile(r"fight|fought|reconcile[_ -]?conflict", re.IGNORECASE)
NAMED_IN = ("src/", "crates/", "chart/", "otel/", "docs/src/", "e2e/", "tests/", "scripts/", "examples/")


def one_word_for_yielding():
    """"yields", never "fight" or "reconcile conflict", wherever the product names things."""
    found = []
    for p in tracked(*NAMED_IN):
        rel = p.relative_to(ROOT).as_posix()
        if rel == "scripts/house.py":
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += [f"{rel}:{i}" for i, line in enumerate(text.splitlines(), 1) if OLD_YIELD_WORDS.search(line)]
    print(f"old words for the reconciler's yielding (fight, reconcile conflict): {len(found)}")
    return [f"{at}: \"fight\"/\"reconcile conflict\" again; the reconciler yields (one word per concept)" for at in found]


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
        if rel.startswith("src/") and not rel.startswith("src/testing"):
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if re.match(r"\s*pub mod \w+", line):
                    pub_mods.append(f"{rel}:{i}")
    print(f"pub mod in the product: {len(pub_mods)} (at most {PUB_MODS_MAX})")
    if len(pub_mods) > PUB_MODS_MAX:
        failures.append(f"{len(pub_mods)} `pub mod` in the product (at most {PUB_MODS_MAX}): {', '.join(pub_mods)}")

    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        if p.name == "mod.rs":
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

    # The decision's field names, all of them, written nowhere in the product but their one list.
    telemetry = (ROOT / "src/telemetry.rs").read_text(encoding="utf-8")
    listed = telemetry[telemetry.index("decision_fields! {"):]
    listed = listed[:listed.index("\n}\n")]
    names = set(re.findall(r'"([a-z_.]+)"', listed))
    # Every name: a dotted one wherever it is quoted, a plain one (`webhook`, `error`, `trace_id`…)
    # where it names a field (`record("error"`, `"error" = …`), not where it is a label's value.
    dotted = "|".join(re.escape(n) for n in sorted(names) if "." in n)
    plain = "|".join(re.escape(n) for n in sorted(names) if "." not in n)
    pattern = re.compile(r'"(' + dotted + r')"|record\(\s*"(' + plain + r')"|"(' + plain + r')"\s*=[^=>]')
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        if rel == "src/telemetry.rs" or not rel.startswith("src/") or TEST_PATH.search(rel):
            continue
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                failures.append(f"{rel}:{i}: a decision field name written again (src/telemetry.rs lists them once)")
    lists = 1 + sum("field name" in f for f in failures)
    print(f"decision field-name lists: {lists} (src/telemetry.rs, {len(names)} names{', and more' if lists > 1 else ''})")

    failures.extend(one_name_per_concept(files))
    failures.extend(the_decision_and_the_seam(files))
    failures.extend(one_word_for_yielding())

    code = 0
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        if re.match(r"(src|crates/engine/src)/", rel) and not TEST_PATH.search(rel):
            code += sum(1 for line in p.read_text(encoding="utf-8").splitlines()
                        if line.strip() and not line.strip().startswith("//"))
    print(f"Rust code lines of the product and the engine (tests, blank lines and comments aside): {code}")

    for failure in failures:
        print(f"scripts/house.py: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
