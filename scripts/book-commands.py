#!/usr/bin/env python3
"""Fail when a command the docs show names something that does not exist (scripts/book.sh runs this).

    scripts/book-commands.py              check docs/src/**/*.md, README.md, DEVELOPMENT.md
    scripts/book-commands.py --self-test  the check finds the stale commands of a made-up page

The commands are the lines of `sh`/`console` blocks and the code spans that start with one of:
- `pod-director SUB …`, `$ pod-director SUB …`, `cargo run -- SUB …`: SUB is a command of the
  binary (in a code span of prose, only when SUB is one: `pod-director serving` is a log message) and every `--flag` / `-f` is one that `pod-director SUB --help` lists (read from the
  generated docs/src/reference/cli.md, which scripts/book-reference.py keeps equal to the binary);
- `cargo bench --bench NAME`, `cargo test --test NAME`: a bench or test target of the package
  (`cargo metadata`); `cargo test --lib PATH::NAME`: a test function NAME in a crate's source;
- a relative path (`scripts/test-all`, `e2e/cluster.sh start`): that file exists and is executable.
What the commands print is held by the tests (see DEVELOPMENT.md, "The docs").
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP_LEVEL = ["README.md", "DEVELOPMENT.md"]
FENCE = re.compile(r"^\s*```(\w*)")


def commands(text):
    """(line number, command, "block" or "span") of every shell block line and code span that looks like
    a command."""
    lang = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            lang = None if lang is not None else m.group(1)
            continue
        if lang is None:
            for span in re.findall(r"`([^`]+)`", line):
                if span.startswith(("pod-director ", "cargo ")):
                    yield number, span, "span"
        elif lang in ("sh", "console", "bash"):
            command = line.strip()
            if lang == "console":
                if not command.startswith("$ "):
                    continue
                command = command[2:]
            if command and not command.startswith("#") and not line.startswith((" ", "\t")):
                yield number, command, "block"


def cli_flags(cli_page):
    """{command: set of flags} from the generated CLI page."""
    flags, current = {}, None
    for line in cli_page.splitlines():
        m = re.match(r"^## pod-director(?: (\S+))?$", line)
        if m:
            current = m.group(1) or ""
            flags[current] = set()
            continue
        if current is not None:
            for flag in re.findall(r"(?:^|[\s,\[])(--?[A-Za-z][-A-Za-z0-9]*)", line):
                flags[current].add(flag)
    return flags


def targets(root):
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    found = {"bench": set(), "test": set()}
    for package in json.loads(out.stdout)["packages"]:
        for target in package["targets"]:
            for kind in target["kind"]:
                if kind in found:
                    found[kind].add(target["name"])
    return found


def test_functions(root):
    names = set()
    for path in root.rglob("*.rs"):
        if "target" in path.relative_to(root).parts:
            continue
        names.update(re.findall(r"\bfn\s+([a-z0-9_]+)\s*\(", path.read_text(errors="replace")))
    return names


def check(root, files, cargo_targets, functions):
    cli = cli_flags((root / "docs" / "src" / "reference" / "cli.md").read_text())
    errors = []
    for path in files:
        rel = path.relative_to(root)
        for number, command, kind in commands(path.read_text()):
            where = f"{rel}:{number}: `{command}`"
            words = command.split()
            if words[:3] == ["cargo", "run", "--"]:
                words = ["pod-director"] + words[3:]
            if words[0] == "pod-director":
                sub = words[1] if len(words) > 1 and not words[1].startswith("-") else ""
                if sub not in cli and kind == "span":
                    continue  # prose that names pod-director (a log message, a warning's prefix)
                if sub not in cli:
                    errors.append(f"{where}: pod-director has no command {sub!r}")
                    continue
                for word in words[2 if sub else 1 :]:
                    flag = word.split("=", 1)[0].strip("[]()|,\\")  # usage spans: `[-o text\|json]`
                    if re.fullmatch(r"--?[A-Za-z][-A-Za-z0-9]*", flag) and flag not in cli[sub]:
                        errors.append(f"{where}: `pod-director {sub} --help` has no {flag}")
            elif words[:2] == ["cargo", "bench"] and "--bench" in words[:-1]:
                name = words[words.index("--bench") + 1]
                if name not in cargo_targets["bench"]:
                    errors.append(f"{where}: no bench target {name!r}")
            elif words[:2] == ["cargo", "test"] and "--test" in words[:-1]:
                name = words[words.index("--test") + 1]
                if name not in cargo_targets["test"]:
                    errors.append(f"{where}: no test target {name!r}")
            elif words[:2] == ["cargo", "test"] and "--lib" in words:
                i = words.index("--lib") + 1
                if i < len(words) and not words[i].startswith("-"):
                    name = words[i].rsplit("::", 1)[-1]
                    if name not in functions:
                        errors.append(f"{where}: no test function {name!r}")
            elif re.fullmatch(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+", words[0]):
                script = root / words[0]
                if not script.is_file():
                    errors.append(f"{where}: {words[0]} does not exist")
                elif not script.stat().st_mode & 0o111:
                    errors.append(f"{where}: {words[0]} is not executable")
    return errors


def files_of(root):
    return sorted((root / "docs" / "src").rglob("*.md")) + [root / f for f in TOP_LEVEL if (root / f).exists()]


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs" / "src" / "reference").mkdir(parents=True)
        (root / "scripts").mkdir()
        (root / "scripts" / "run").write_text("")
        (root / "scripts" / "run").chmod(0o755)
        (root / "src").mkdir()
        (root / "src" / "lib.rs").write_text("#[test]\nfn a_test() {}\n")
        (root / "docs" / "src" / "reference" / "cli.md").write_text(
            "## pod-director\n\n```text\nCommands:\n  explain\n```\n\n## pod-director explain\n\n```text\n"
            "  -c, --config <CONFIG>\n      --fail-on <FAIL_ON>\n```\n"
        )
        (root / "docs" / "src" / "a.md").write_text(
            "Run `pod-director explain -c x --fail-on deny` or `pod-director explain --nodes n`; `pod-director GROUP:`.\n"
            "```sh\npod-director explain -c x -f y\ncargo bench --bench load\ncargo bench --bench gone\n"
            "cargo test --test cli\ncargo test --lib m::tests::a_test\ncargo test --lib m::tests::no_test\n"
            "scripts/run\nscripts/missing --x\npod-director serve\n  --continued-line\n```\n"
            "```console\n$ pod-director explain -o json\noutput --not-a-flag\n```\n"
        )
        errors = check(root, files_of(root), {"bench": {"load"}, "test": {"cli"}}, test_functions(root))
        expected = ["--nodes", "has no -f", "'gone'", "'no_test'", "scripts/missing", "'serve'", "has no -o"]
        missing = [e for e in expected if not any(e in err for err in errors)]
        if missing or len(errors) != len(expected):
            print("book-commands self-test failed:\n  " + "\n  ".join(errors), file=sys.stderr)
            return 1
    print("book-commands: self-test passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    files = files_of(ROOT)
    errors = check(ROOT, files, targets(ROOT), test_functions(ROOT))
    if errors:
        print("book-commands: commands that name what does not exist:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    count = sum(1 for f in files for _ in commands(f.read_text()))  # spans and block lines
    print(f"book-commands: {count} commands in {len(files)} files name only commands, flags, targets and scripts that exist")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
