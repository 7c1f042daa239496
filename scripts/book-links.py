#!/usr/bin/env python3
"""Fail on a broken relative link or #anchor in the book (docs/src) and the repo's top-level docs.

    scripts/book-links.py              check docs/src/**/*.md, README.md, DEVELOPMENT.md, otel/README.md
    scripts/book-links.py --self-test  the check finds the broken links of a small made-up tree

What is checked, for every Markdown link (`[text](target)`, `[text]: target`, `<a href>`) outside
code blocks and code spans:
- `#anchor`: a heading of the same file has that id (GitHub's and mdBook's rule: lower-cased,
  punctuation dropped, spaces to hyphens, `-1`, `-2`… for repeats), or an explicit `id="…"`;
- a relative path: the file or directory exists, and its `#anchor` too when it is Markdown. A page
  of the book may only link inside docs/src (the rendered book has nothing else) and only to pages
  that SUMMARY.md lists (mdBook renders no other);
- this repository's GitHub URL (`https://github.com/pod-director/pod-director/blob/main/PATH`, or
  `/tree/main/PATH`): how the book links to the repo's files; PATH (and its anchor) must exist here.
Other URLs are not fetched.

mdBook itself fails the build when SUMMARY.md lists a page that does not exist
(`create-missing = false` in docs/book.toml); this check adds every link the pages make.
"""

import re
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
REPO_URL = "https://github.com/pod-director/pod-director/"
TOP_LEVEL = ["README.md", "DEVELOPMENT.md", "otel/README.md"]

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HREF = re.compile(r"<a\s[^>]*href=\"([^\"]+)\"")
EXPLICIT_ID = re.compile(r"(?:id|name)=\"([^\"]+)\"")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CUSTOM_ID = re.compile(r"\s*\{#([^}\s]+)[^}]*\}\s*$")


def prose_lines(text):
    """(line number, line) outside fenced code blocks, with code spans blanked."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1) == fence:
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield number, re.sub(r"(`+)(?:(?!\1).)+?\1", lambda c: " " * len(c.group(0)), line)


def slug(title):
    """The id GitHub and mdBook give a heading."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.replace("`", "").lower()
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def anchors(path, cache={}):
    if path not in cache:
        ids, seen = set(), {}
        text = path.read_text()
        fence = None
        for line in text.splitlines():
            m = FENCE.match(line)
            if fence:
                fence = None if m and m.group(1) == fence else fence
                continue
            if m:
                fence = m.group(1)
                continue
            ids.update(EXPLICIT_ID.findall(line))
            h = HEADING.match(line)
            if not h:
                continue
            title = h.group(2)
            custom = CUSTOM_ID.search(title)
            if custom:
                ids.add(custom.group(1))
                continue
            base = slug(title)
            n = seen.get(base, 0)
            seen[base] = n + 1
            ids.add(base if n == 0 else f"{base}-{n}")
        cache[path] = ids
    return cache[path]


def summary_pages(src):
    summary = src / "SUMMARY.md"
    if not summary.exists():
        return set()
    pages = set()
    for _, line in prose_lines(summary.read_text()):
        for target in INLINE.findall(line):
            pages.add((src / unquote(target.split("#")[0])).resolve())
    return pages


def links(text):
    for number, line in prose_lines(text):
        for target in INLINE.findall(line) + HREF.findall(line):
            yield number, target
        m = REFERENCE.match(line)
        if m:
            yield number, m.group(1)


def check(root, files):
    root = root.resolve()
    src = (root / "docs" / "src").resolve()
    listed = summary_pages(src)
    errors = [
        f"{page.relative_to(root)}: not in docs/src/SUMMARY.md: mdBook does not render it"
        for page in sorted(src.rglob("*.md"))
        if page.name != "SUMMARY.md" and page.resolve() not in listed
    ]
    for path in files:
        path = path.resolve()
        in_book = src in path.parents
        rel = path.relative_to(root)
        for number, target in links(path.read_text()):
            where = f"{rel}:{number}: {target}"
            if target.startswith(REPO_URL):
                m = re.match(r"(blob|tree)/main/([^#?]*)(#.*)?$", target[len(REPO_URL):])
                if not m:
                    errors.append(f"{where}: a link into this repository is written {REPO_URL}blob/main/PATH")
                    continue
                dest = (root / unquote(m.group(2))).resolve()
                fragment = (m.group(3) or "")[1:]
            elif re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
                continue  # another site: not fetched
            else:
                file_part, _, fragment = target.partition("#")
                dest = (path.parent / unquote(file_part)).resolve() if file_part else path
                if in_book and file_part:
                    if src not in dest.parents and dest != src:
                        errors.append(
                            f"{where}: leaves docs/src, which the rendered book does not have; "
                            f"link the repository's file as {REPO_URL}blob/main/PATH"
                        )
                        continue
                    if dest.name == "README.md":
                        errors.append(f"{where}: mdBook renders a README.md as index.html but leaves links to it; name the page otherwise")
                        continue
                    if dest.suffix == ".md" and dest.exists() and dest not in listed:
                        errors.append(f"{where}: {dest.relative_to(root)} is not in docs/src/SUMMARY.md")
                        continue
            if not dest.exists():
                errors.append(f"{where}: {dest.relative_to(root) if root in dest.parents else dest} does not exist")
            elif fragment and dest.suffix == ".md" and unquote(fragment) not in anchors(dest):
                errors.append(f"{where}: no heading #{fragment} in {dest.relative_to(root)}")
            elif fragment and dest.is_dir():
                errors.append(f"{where}: #{fragment} on a directory")
    return errors


def files_of(root):
    src = root / "docs" / "src"
    files = sorted(src.rglob("*.md"))
    files += [root / f for f in TOP_LEVEL if (root / f).exists()]
    return files


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs" / "src").mkdir(parents=True)
        (root / "src").mkdir()
        (root / "src" / "lib.rs").write_text("")
        (root / "docs" / "src" / "SUMMARY.md").write_text("- [A](a.md)\n- [B](b.md)\n")
        (root / "docs" / "src" / "a.md").write_text(
            "# A\n## Nodes: feasibility and `spec.nodeName`\n## Repeat\n## Repeat\n"
            "[ok](#nodes-feasibility-and-specnodename) [ok](b.md#b-title) [ok](#repeat-1)\n"
            f"[ok]({REPO_URL}blob/main/src/lib.rs) [ok](https://example.com/x)\n"
            "`[not a link](missing.md)`\n```\n[not a link](missing.md)\n```\n"
            "[bad anchor](#nope) [bad page](missing.md) [bad section](b.md#nope)\n"
            f"[outside](../../src/lib.rs) [orphan](c.md) [bad repo path]({REPO_URL}blob/main/src/gone.rs)\n"
        )
        (root / "docs" / "src" / "b.md").write_text("# B title\n[ok](a.md#repeat)\n")
        (root / "docs" / "src" / "c.md").write_text("# C\n")
        (root / "README.md").write_text("# R\n[ok](docs/src/a.md#a) [bad](docs/src/a.md#b)\n")
        errors = check(root, files_of(root))
        expected = [
            "#nope",
            "missing.md",
            "b.md#nope",
            "../../src/lib.rs",
            "c.md",
            "src/gone.rs",
            "docs/src/a.md#b",
            "docs/src/c.md",
        ]
        found = [e for e in expected if any(e in err.split(": ")[:2][-1] or err.startswith(e + ":") for err in errors)]
        if len(errors) != len(expected) or found != expected:
            print("book-links self-test failed:\n  " + "\n  ".join(errors), file=sys.stderr)
            return 1
    print("book-links: self-test passed")
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
        print("book-links: broken links:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    print(f"book-links: {len(files)} files, every relative link and anchor resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
