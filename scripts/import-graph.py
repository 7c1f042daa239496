#!/usr/bin/env python3
"""Each crate's module import graph, derived from its paths; fails on any circle.

    scripts/import-graph.py           check: exit 1 when a circle exists (scripts/lint runs this)
    scripts/import-graph.py --edges   print every edge (file level), then the counts
    scripts/import-graph.py --dot     the file-level graph as Graphviz dot
    scripts/import-graph.py --self-test   the check finds the circles of a small made-up crate

The crates are the workspace's with a library: src (the product) and every crates/*/src (the engine:
config, placement, namespace_guard; the test kit) and e2e/src (the e2e suites' harness); each is a graph of its own (a crate cannot import one that imports it
back: cargo refuses the cycle), and a path into another crate (`pod_director_engine::…`) is not an edge.

A node is a module with its own file (`config::schema` is crates/engine/src/config/schema.rs). A module's edges are
the modules named by its paths: `use crate::…`, `use super::…`, `use self::…`, a child module's
name, and the same paths written inline (`crate::config::load(…)`); a `pub use` re-export is
followed to the module that defines the item. Test code (`#[cfg(test)]` modules, inline or in their
own file) is not part of the product's graph and is left out.

Two graphs are checked, both must have no circle:
- the file-level graph, where a module and its own descendants are one unit (a parent's `mod.rs`
  composing its children and a child using its parent's items is the module's inside, not an edge);
- the top-level graph (`server`, `audit`, `config`, …), where every edge between two different
  root modules counts: no root module may import one that imports it back, directly or around a loop.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRCS = [ROOT / "src"] + sorted((ROOT / "crates").glob("*/src")) + [ROOT / "e2e" / "src"]


def strip(text):
    """Source with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(code, start):
    """Index just past the `}` closing the `{` at `start`."""
    depth = 0
    for j in range(start, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


MOD_DECL = re.compile(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")


def drop_test_blocks(code):
    """Blank inline `#[cfg(test)] mod x { … }` blocks; return the code and the file modules declared."""
    children, cut = [], []
    for m in MOD_DECL.finditer(code):
        attrs, name, kind = m.group(1), m.group(2), m.group(3)
        test = "cfg(test)" in attrs.replace(" ", "")
        if kind == "{":
            if test:
                cut.append((m.start(), block_end(code, m.end() - 1)))
        elif not test:
            children.append(name)
    for a, b in reversed(cut):
        code = code[:a] + re.sub(r"[^\n]", " ", code[a:b]) + code[b:]
    return code, children


def load_modules(src):
    """{module path (tuple): (file, code)} for every non-test file module."""
    modules = {}

    def visit(path, file, dir_):
        code, children = drop_test_blocks(strip(file.read_text()))
        modules[path] = (file, code)
        for child in children:
            for candidate, sub in ((dir_ / f"{child}.rs", dir_ / child), (dir_ / child / "mod.rs", dir_ / child)):
                if candidate.exists():
                    visit(path + (child,), candidate, sub)
                    break

    visit((), src / "lib.rs", src)
    return modules


def use_paths(tree):
    """Expand a `use` tree (`a::{b as c, d::{e, self}}`) into `(path, name)` pairs: `name` is what the
    path is known as where it is imported (its last segment, or its `as` alias)."""
    tree = re.sub(r"\s+", " ", tree).strip()
    tree = re.sub(r"\s*(::|[{},])\s*", r"\1", tree)
    if "{" not in tree:
        if not tree:
            return []
        path, _, alias = tree.partition(" as ")
        return [(path, alias or path.split("::")[-1])]
    head, rest = tree.split("{", 1)
    body = rest[: rest.rfind("}")]
    parts, depth, cur = [], 0, ""
    for c in body:
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += c == "{"
        depth -= c == "}"
        cur += c
    parts.append(cur)
    out = []
    for part in parts:
        for sub, alias in use_paths(part):
            if sub == "self":
                out.append((head.rstrip(":"), head.rstrip(":").split("::")[-1]))
            else:
                out.append((head + sub, alias))
    return out


USE = re.compile(r"\buse\s+([^;]+);")
INLINE = re.compile(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)")


def module_of(path, segments, modules, reexports, depth=0):
    """The module that defines what `segments` (absolute) names: the longest module prefix,
    following a `pub use` re-export of the next segment."""
    for k in range(len(segments), -1, -1):
        prefix = tuple(segments[:k])
        if prefix in modules:
            if k < len(segments) and depth < 8:
                target = reexports.get(prefix, {}).get(segments[k])
                if target:
                    return module_of(path, list(target) + segments[k + 1 :], modules, reexports, depth + 1)
            return prefix
    return None


def absolute(current, raw, modules):
    """`raw` (crate::…, super::…, self::…, or child::…) as absolute segments, or None (external)."""
    segs = [s for s in raw.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        return segs[1:]
    if segs[0] in ("self", "super"):
        base = list(current)
        while segs and segs[0] in ("self", "super"):
            if segs.pop(0) == "super":
                base = base[:-1]
        return base + segs
    if tuple(current) + (segs[0],) in modules:  # a child module, named relative to this one
        return list(current) + segs
    return None


def edges_of(modules):
    reexports = {}
    for path, (_, code) in modules.items():
        table = {}
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            for p, alias in use_paths(m.group(1)):
                segs = absolute(path, p, modules)
                if segs:
                    table[alias] = tuple(segs)
        reexports[path] = table
    edges = set()
    for path, (_, code) in modules.items():
        raws = [p for m in USE.finditer(code) for p, _ in use_paths(m.group(1))]
        raws += INLINE.findall(USE.sub(" ", code))
        children = {p[-1] for p in modules if len(p) == len(path) + 1 and p[: len(path)] == path}
        # A child module named inline (`schema::derive(…)`) outside a `use`.
        for m in re.finditer(r"(?<![\w:])(\w+)::\w+", USE.sub(" ", code)):
            if m.group(1) in children:
                raws.append(m.group(0))
        for raw in raws:
            segs = absolute(path, raw, modules)
            if segs is None:
                continue
            target = module_of(path, segs, modules, reexports)
            if target is not None and target != path:
                edges.add((path, target))
    return edges


def name(path):
    return "::".join(path) or "crate"


def related(a, b):
    return a[: len(b)] == b or b[: len(a)] == a


def cycles(nodes, edges):
    """Strongly connected components with more than one node (Tarjan)."""
    graph = {n: sorted({b for a, b in edges if a == n}) for n in nodes}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, []):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for n in sorted(nodes):
        if n not in index:
            connect(n)
    return out


def analyse(src):
    modules = load_modules(src)
    raw = edges_of(modules)
    files = {(a, b) for a, b in raw if not related(a, b)}
    top = {(a[:1], b[:1]) for a, b in raw if a[:1] != b[:1] and a and b}
    file_cycles = cycles(set(modules), files)
    top_cycles = cycles({p[:1] for p in modules if p}, top)
    two_way = sorted({tuple(sorted((name(a), name(b)))) for a, b in top if (b, a) in top})
    return modules, files, top, file_cycles, top_cycles, two_way


# A made-up crate: `a::x` and `a::y` import each other through a re-export and an inline path,
# `b` and `c` import each other at the top level, `d` imports `a` only from test code.
SELF_TEST = {
    "lib.rs": "pub mod a;\npub mod b;\nmod c;\nmod d;\n",
    "a/mod.rs": "mod x;\nmod y;\npub use x::X;\npub(crate) use self::y::{Y as Why, helper};\n",
    "a/x.rs": "pub struct X;\nfn f() { let _ = super::Why; }\n",
    "a/y.rs": "pub struct Y;\npub fn helper() { let _ = crate::a::X; }\n// use crate::b::Nothing;\n",
    "b.rs": "use crate::c::{self, C};\npub struct B;\n",
    "c.rs": "pub struct C;\nfn g() -> crate::b::B { let s = \"use crate::d::D;\"; crate::b::B }\n",
    "d.rs": "pub struct D;\n#[cfg(test)]\nmod tests {\n    use crate::a::X;\n}\n",
}


def self_test():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for path, text in SELF_TEST.items():
            file = Path(tmp) / path
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text)
        _, files, top, file_cycles, top_cycles, two_way = analyse(Path(tmp))
    expected = {
        "file circles": [["a::x", "a::y"], ["b", "c"]],
        "top circles": [["b", "c"]],
        "two-way ties": [("b", "c")],
        "d's test imports": [],
        "commented and quoted paths": [],
    }
    found = {
        "file circles": [[name(m) for m in c] for c in file_cycles],
        "top circles": [[name(m) for m in c] for c in top_cycles],
        "two-way ties": two_way,
        "d's test imports": [e for e in files if e[0] == ("d",)],
        "commented and quoted paths": [e for e in top if e[1] == ("d",) or (e == (("a",), ("b",)))],
    }
    if found != expected:
        print(f"import graph self-test failed:\n  expected {expected}\n  found    {found}")
        return 1
    print("import graph self-test: ok (finds the circles of a made-up crate)")
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    failed = False
    for src in SRCS:
        crate = src.parent.relative_to(ROOT).as_posix()
        crate = "pod-director (src)" if crate == "." else crate
        modules, files, top, file_cycles, top_cycles, two_way = analyse(src)
        if "--dot" in sys.argv:
            print(f'digraph "{crate}" {{')
            for a, b in sorted(files):
                print(f'  "{name(a)}" -> "{name(b)}";')
            print("}")
            continue
        if "--edges" in sys.argv:
            for a, b in sorted(files):
                print(f"{crate}: {name(a)} -> {name(b)}")
        print(
            f"import graph of {crate}: {len(modules)} modules, {len(files)} file-level edges, {len(top)} top-level edges; "
            f"{len(file_cycles)} file-level circles, {len(top_cycles)} top-level circles, {len(two_way)} two-way ties"
        )
        for comp in file_cycles:
            print("circle (file level):", " ↔ ".join(name(c) for c in comp))
        for comp in top_cycles:
            print("circle (top level):", " ↔ ".join(name(c) for c in comp))
        for a, b in two_way:
            print(f"two-way tie: {a} ↔ {b}")
        failed = failed or bool(file_cycles or top_cycles)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
