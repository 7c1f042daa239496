#!/usr/bin/env python3
"""The release image's SBOM: CycloneDX 1.6 JSON of what the image is made of (scripts/image.sh).

    scripts/sbom.py generate --rootfs TAR --image-name NAME --image-version V --image-digest sha256:…
                             --arch amd64 [--target TRIPLE] [--schema DIR] --out FILE
    scripts/sbom.py --self-test

Two parts, each from where it is decided:

- the Rust crates of the pod-director binary: the release build's dependency graph as cargo
  resolves it for the target (`cargo tree -p pod-director -e normal,build --target T`: cargo's
  own feature resolution for that one package, without dev-dependencies), each crate's
  licence from `cargo metadata` (its Cargo.toml `license`, an SPDX expression), its checksum
  from Cargo.lock. A crate reached only through build scripts or proc-macros (`cargo tree -e
  normal` without descending into proc-macros does not reach it) has scope `excluded`: it
  built the binary but is not in it; the others are `required`. (`cargo metadata` alone
  would list more: it unifies features across the whole workspace, dev-dependencies included.)
- the Debian packages of the base layer: every package the root filesystem records
  (`var/lib/dpkg/status.d/*`, as distroless records them, or `var/lib/dpkg/status`) with its
  version and architecture, and the licences its `usr/share/doc/PKG/copyright` names: every
  `License:` field of a machine-readable (DEP-5) copyright file, else every
  `/usr/share/common-licenses/NAME` it points at; Debian's short names are mapped to SPDX
  identifiers where the mapping is exact (GPL-2+ → GPL-2.0-or-later), kept as names otherwise
  (`public-domain`, `GPL`). The Debian name stays in each licence's properties.

`--schema DIR` validates the result against CycloneDX's JSON schema (the `bom-1.6` schema files
of PyPI's cyclonedx-python-lib, with jsonschema; scripts/image.sh installs both) and fails on
any error.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import uuid
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pod-director"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"
LICENSE_PROPERTY = "pod-director:debian:copyright-license"
KIND_PROPERTY = "pod-director:cargo:dependency-kind"

# Debian's short licence names (copyright-format 1.0, /usr/share/common-licenses) whose SPDX
# identifier is exact. Anything else is kept under its Debian name.
DEBIAN_TO_SPDX = {
    "Apache-2.0": "Apache-2.0",
    "Artistic": "Artistic-1.0-Perl",
    "BSD-2-clause": "BSD-2-Clause",
    "BSD-3-clause": "BSD-3-Clause",
    "BSD-4-clause": "BSD-4-Clause",
    "CC0-1.0": "CC0-1.0",
    "Expat": "MIT",
    "GFDL-1.2": "GFDL-1.2-only",
    "GFDL-1.2+": "GFDL-1.2-or-later",
    "GFDL-1.3": "GFDL-1.3-only",
    "GFDL-1.3+": "GFDL-1.3-or-later",
    "GPL-1": "GPL-1.0-only",
    "GPL-1+": "GPL-1.0-or-later",
    "GPL-2": "GPL-2.0-only",
    "GPL-2+": "GPL-2.0-or-later",
    "GPL-3": "GPL-3.0-only",
    "GPL-3+": "GPL-3.0-or-later",
    "ISC": "ISC",
    "LGPL-2": "LGPL-2.0-only",
    "LGPL-2+": "LGPL-2.0-or-later",
    "LGPL-2.1": "LGPL-2.1-only",
    "LGPL-2.1+": "LGPL-2.1-or-later",
    "LGPL-3": "LGPL-3.0-only",
    "LGPL-3+": "LGPL-3.0-or-later",
    "MPL-1.1": "MPL-1.1",
    "MPL-2.0": "MPL-2.0",
    "Zlib": "Zlib",
}


class SbomError(Exception):
    pass


# ---- the Rust crates ---------------------------------------------------------------------------

TREE_LINE = re.compile(r"^(\d+)(\S+) v(\S+)(.*)$")


def parse_tree(text: str) -> tuple[tuple[str, str], dict, set]:
    """`cargo tree --prefix depth --format '{p}'` → (root, {node: set(children)}, proc-macros).

    Nodes are (name, version). A node printed again is marked `(*)` and its children are not
    repeated, so the edges are those of every line to the line above it one level up."""
    edges: dict[tuple[str, str], set] = {}
    proc_macros: set = set()
    stack: list[tuple[str, str]] = []
    root = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        m = TREE_LINE.match(raw)
        if not m:
            raise SbomError(f"cargo tree printed a line this script cannot read: {raw!r}")
        depth, node, rest = int(m.group(1)), (m.group(2), m.group(3)), m.group(4)
        if "(proc-macro)" in rest:
            proc_macros.add(node)
        edges.setdefault(node, set())
        if depth == 0:
            if root is not None:
                raise SbomError("cargo tree printed two roots")
            root, stack = node, [node]
            continue
        if depth > len(stack):
            raise SbomError(f"cargo tree skipped a level at {raw!r}")
        del stack[depth:]
        edges[stack[-1]].add(node)
        stack.append(node)
    if root is None:
        raise SbomError("cargo tree printed nothing")
    return root, edges, proc_macros


def runtime_crates(root, normal_edges: dict, proc_macros: set) -> set:
    """The crates linked into the binary: reached from the root through normal dependencies,
    never through a proc-macro (which only runs in the compiler)."""
    seen, todo = {root}, [root]
    while todo:
        node = todo.pop()
        for child in normal_edges.get(node, ()):
            if child in proc_macros or child in seen:
                continue
            seen.add(child)
            todo.append(child)
    return seen


def cargo(args: list[str], root: Path) -> str:
    try:
        return subprocess.run(["cargo", *args], cwd=root, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise SbomError("cargo is not on PATH (the Rust part of the SBOM comes from cargo metadata and cargo tree)")
    except subprocess.CalledProcessError as e:
        raise SbomError(f"cargo {' '.join(args)} failed:\n{e.stderr}")


def licence_expression(text: str) -> str:
    # Cargo.toml's old `MIT/Apache-2.0` spelling means OR (cargo's own reading).
    return re.sub(r"\s*/\s*", " OR ", text.strip())


def crate_components(root_dir: Path, target: str) -> tuple[list, list, dict]:
    """The crates of the release build: (components, dependencies, {bom-ref of the binary})."""
    metadata = json.loads(cargo(["metadata", "--format-version", "1", "--locked", "--filter-platform", target], root_dir))
    tree = ["tree", "-p", PACKAGE, "--target", target, "--locked", "--prefix", "depth", "--format", "{p}"]
    root, all_edges, proc_macros = parse_tree(cargo([*tree, "-e", "normal,build"], root_dir))
    _, normal_edges, _ = parse_tree(cargo([*tree, "-e", "normal"], root_dir))
    lock = tomllib.loads((root_dir / "Cargo.lock").read_text(encoding="utf-8"))
    checksums = {(p["name"], p["version"], p.get("source")): p.get("checksum") for p in lock.get("package", [])}
    by_key: dict[tuple[str, str], dict] = {}
    for package in metadata["packages"]:
        key = (package["name"], package["version"])
        if key in by_key:
            raise SbomError(f"two packages {key[0]} {key[1]} (different sources): this script tells crates apart by name and version")
        by_key[key] = package
    runtime = runtime_crates(root, normal_edges, proc_macros)

    def ref(node) -> str:
        package = by_key[node]
        if package.get("source") == CRATES_IO:
            return f"pkg:cargo/{node[0]}@{quote(node[1], safe='')}"
        return f"crate:{node[0]}@{node[1]}"

    components = []
    for node in sorted(all_edges):
        package = by_key.get(node)
        if package is None:
            raise SbomError(f"cargo tree lists {node[0]} {node[1]}, cargo metadata does not: is Cargo.lock current?")
        licence = package.get("license")
        if not licence:
            raise SbomError(f"crate {node[0]} {node[1]} declares no `license` in its Cargo.toml: add a clarification here")
        component = {
            "type": "application" if node == root else "library",
            "bom-ref": ref(node),
            "name": node[0],
            "version": node[1],
            "scope": "required" if node in runtime else "excluded",
            "licenses": [{"expression": licence_expression(licence), "acknowledgement": "declared"}],
            "properties": [{"name": KIND_PROPERTY, "value": "runtime" if node in runtime else "build"}],
        }
        if package.get("description"):
            component["description"] = " ".join(package["description"].split())
        if package.get("source") == CRATES_IO:
            component["purl"] = ref(node)
            checksum = checksums.get((node[0], node[1], package["source"]))
            if checksum:
                component["hashes"] = [{"alg": "SHA-256", "content": checksum}]
        if package.get("repository"):
            component["externalReferences"] = [{"type": "vcs", "url": package["repository"]}]
        components.append(component)
    dependencies = [
        {"ref": ref(node), "dependsOn": sorted(ref(child) for child in children)}
        for node, children in sorted(all_edges.items())
    ]
    return components, dependencies, ref(root)


# ---- the Debian packages -----------------------------------------------------------------------


def parse_control(text: str) -> list[dict]:
    """Debian control paragraphs (dpkg status, status.d entries) → [{field: value}]."""
    paragraphs, current, field = [], {}, None
    for line in text.splitlines():
        if not line.strip():
            if current:
                paragraphs.append(current)
            current, field = {}, None
        elif line[0] in " \t":
            if field is None:
                raise SbomError(f"a continuation line before any field: {line!r}")
            current[field] += "\n" + line.strip()
        else:
            field, _, value = line.partition(":")
            current[field] = value.strip()
    if current:
        paragraphs.append(current)
    return paragraphs


def debian_licences(copyright_text: str) -> list[str]:
    """The licences a Debian copyright file names, in Debian's short names, in order."""
    names: list[str] = []
    first = parse_control(copyright_text.split("\n\n", 1)[0] + "\n") if copyright_text.strip() else []
    machine_readable = bool(first) and "copyright-format" in first[0].get("Format", "")
    if machine_readable:
        for m in re.finditer(r"^License:[ \t]*(\S[^\n]*?)[ \t]*$", copyright_text, re.M):
            for name in re.split(r"\s+or\s+|\s+and\s+|\s*,\s*", m.group(1)):
                if name:
                    names.append(name)
    else:
        for m in re.finditer(r"/usr/share/common-licenses/([A-Za-z0-9][A-Za-z0-9_.+-]*[A-Za-z0-9+])", copyright_text):
            names.append(m.group(1))
    return list(dict.fromkeys(names))


def licence_entry(debian_name: str) -> dict:
    licence = {"acknowledgement": "declared", "properties": [{"name": LICENSE_PROPERTY, "value": debian_name}]}
    spdx = DEBIAN_TO_SPDX.get(debian_name)
    if spdx:
        licence["id"] = spdx
    else:
        licence["name"] = debian_name
    return {"license": licence}


class Rootfs:
    """The files of a root filesystem tarball (`./etc/…` or `etc/…`), symlinks followed."""

    def __init__(self, path: Path):
        self.tar = tarfile.open(path)
        self.members = {}
        for member in self.tar.getmembers():
            self.members[posixpath.normpath("/" + member.name.removeprefix("./"))] = member

    def resolve(self, path: str) -> str | None:
        parts = [p for p in path.split("/") if p]
        current = "/"
        for hops in range(64):
            for i, part in enumerate(parts):
                candidate = posixpath.join(current, part)
                member = self.members.get(candidate)
                if member is not None and member.issym():
                    target = member.linkname
                    base = "/" if target.startswith("/") else current
                    parts = [p for p in posixpath.normpath(posixpath.join(base, target)).split("/") if p] + parts[i + 1 :]
                    current = "/"
                    break
                current = candidate
            else:
                return current if current in self.members else None
        raise SbomError(f"too many symbolic links resolving {path}")

    def read(self, path: str) -> str | None:
        resolved = self.resolve(path)
        if resolved is None or not self.members[resolved].isfile():
            return None
        return self.tar.extractfile(self.members[resolved]).read().decode("utf-8", errors="replace")

    def listdir(self, path: str) -> list[str]:
        resolved = self.resolve(path)
        if resolved is None:
            return []
        prefix = resolved.rstrip("/") + "/"
        return sorted({name[len(prefix) :].split("/")[0] for name in self.members if name.startswith(prefix)})


def installed_packages(rootfs: Rootfs) -> list[dict]:
    packages = []
    for name in rootfs.listdir("/var/lib/dpkg/status.d"):
        if "." in name:  # distroless writes NAME.md5sums beside NAME
            continue
        packages.extend(parse_control(rootfs.read(f"/var/lib/dpkg/status.d/{name}") or ""))
    status = rootfs.read("/var/lib/dpkg/status")
    if status:
        packages.extend(p for p in parse_control(status) if p.get("Status", "").endswith(" installed"))
    if not packages:
        raise SbomError("the root filesystem records no Debian package (no var/lib/dpkg/status.d/ nor var/lib/dpkg/status)")
    return packages


def os_release(rootfs: Rootfs) -> dict:
    values = {}
    for line in (rootfs.read("/etc/os-release") or rootfs.read("/usr/lib/os-release") or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip('"')
    return values


def debian_components(rootfs: Rootfs) -> tuple[list, list, str, dict | None]:
    release = os_release(rootfs)
    distro = f"debian-{release['VERSION_ID']}" if release.get("VERSION_ID") else "debian"
    packages = installed_packages(rootfs)
    names = {p["Package"] for p in packages}

    def ref(p) -> str:
        return f"pkg:deb/debian/{p['Package']}@{quote(p['Version'], safe='')}?arch={p['Architecture']}&distro={distro}"

    components, dependencies, problems = [], [], []
    for p in sorted(packages, key=lambda p: p["Package"]):
        for field in ("Package", "Version", "Architecture"):
            if not p.get(field):
                problems.append(f"a dpkg record without {field}: {p}")
        copyright_text = rootfs.read(f"/usr/share/doc/{p.get('Package')}/copyright")
        if copyright_text is None:
            problems.append(f"{p.get('Package')}: no /usr/share/doc/{p.get('Package')}/copyright in the image")
            continue
        licences = debian_licences(copyright_text)
        if not licences:
            problems.append(f"{p['Package']}: its copyright file names no licence (no License: field, no common-licenses reference)")
            continue
        component = {
            "type": "library",
            "bom-ref": ref(p),
            "name": p["Package"],
            "version": p["Version"],
            "purl": ref(p),
            "licenses": [licence_entry(name) for name in licences],
            "properties": [{"name": "pod-director:debian:architecture", "value": p["Architecture"]}],
        }
        if p.get("Source"):
            component["properties"].append({"name": "pod-director:debian:source", "value": p["Source"].split()[0]})
        if p.get("Description"):
            component["description"] = p["Description"].split("\n")[0]
        components.append(component)
        depends = set()
        for field in ("Pre-Depends", "Depends"):
            for alternative in re.split(r"\s*[,|]\s*", p.get(field, "")):
                name = alternative.split(" ")[0].split(":")[0]
                if name in names:
                    depends.add(name)
        by_name = {q["Package"]: q for q in packages}
        dependencies.append({"ref": ref(p), "dependsOn": sorted(ref(by_name[n]) for n in depends)})
    if problems:
        raise SbomError("the base layer's packages cannot all be listed with a licence:\n  " + "\n  ".join(problems))
    operating_system = None
    if release.get("ID"):
        operating_system = {
            "type": "operating-system",
            "bom-ref": f"os:{release['ID']}@{release.get('VERSION_ID', '')}",
            "name": release["ID"],
            "version": release.get("VERSION_ID", ""),
            "description": release.get("PRETTY_NAME", ""),
        }
    return components, dependencies, distro, operating_system


# ---- the document ------------------------------------------------------------------------------


def generate(args) -> dict:
    image_ref = "image"
    crates, crate_deps, binary_ref = crate_components(ROOT, args.target)
    rootfs = Rootfs(Path(args.rootfs))
    debs, deb_deps, _, operating_system = debian_components(rootfs)
    repository = args.image_name.rsplit("/", 1)
    purl = f"pkg:oci/{repository[-1]}@{quote(args.image_digest, safe='')}?arch={args.arch}"
    if len(repository) == 2:
        purl += f"&repository_url={quote(args.image_name, safe='/')}"
    timestamp = os.environ.get("SOURCE_DATE_EPOCH")
    created = datetime.fromtimestamp(int(timestamp), timezone.utc) if timestamp else datetime.now(timezone.utc)
    components = [*crates, *debs]
    top = [binary_ref, *(d["bom-ref"] for d in debs)]
    if operating_system:
        components.append(operating_system)
        top.append(operating_system["bom-ref"])
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, purl)}",
        "version": 1,
        "metadata": {
            "timestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "scripts/sbom.py", "group": "pod-director"}]},
            "component": {
                "type": "container",
                "bom-ref": image_ref,
                "name": args.image_name,
                "version": args.image_version,
                "purl": purl,
                "hashes": [{"alg": "SHA-256", "content": args.image_digest.removeprefix("sha256:")}],
            },
            "properties": [
                {"name": "pod-director:cargo:target", "value": args.target},
                {"name": "pod-director:cargo:graph", "value": f"cargo tree -p {PACKAGE} -e normal,build --target {args.target}"},
            ],
        },
        "components": components,
        "dependencies": [{"ref": image_ref, "dependsOn": sorted(top)}, *crate_deps, *deb_deps],
    }


def validate(document: dict, schema_dir: Path) -> None:
    try:
        import jsonschema
        from referencing import Registry, Resource
    except ImportError as e:
        raise SbomError(f"validating needs jsonschema and referencing ({e}): scripts/image.sh installs them")
    base = "http://cyclonedx.org/schema/"
    resources = []
    for name in ("bom-1.6.SNAPSHOT.schema.json", "spdx.SNAPSHOT.schema.json", "jsf-0.82.SNAPSHOT.schema.json"):
        path = schema_dir / name
        if not path.is_file():
            raise SbomError(f"no {path}: the CycloneDX schema files of cyclonedx-python-lib")
        resources.append((base + name, Resource.from_contents(json.loads(path.read_text(encoding="utf-8")))))
    schema = json.loads((schema_dir / "bom-1.6.SNAPSHOT.schema.json").read_text(encoding="utf-8"))
    registry = Registry().with_resources(resources)
    validator = jsonschema.Draft7Validator(schema, registry=registry)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  {'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:300]}" for e in errors[:20]]
        raise SbomError(f"the SBOM is not valid CycloneDX 1.6 ({len(errors)} errors):\n" + "\n".join(lines))


def host_target() -> str:
    out = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    return next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("host: "))


# ---- self-test -----------------------------------------------------------------------------------


def self_test() -> None:
    failures = []

    def check(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    tree = "\n".join(
        [
            "0app v0.1.0 (/src)",
            "1serde v1.0.0",
            "2serde_derive v1.0.0 (proc-macro)",
            "3syn v2.0.0",
            "4proc-macro2 v1.0.0",
            "1log v0.4.0",
            "2serde v1.0.0 (*)",
            "1cc v1.0.0",
        ]
    )
    root, edges, macros = parse_tree(tree)
    check("root", root, ("app", "0.1.0"))
    check("edges of app", edges[root], {("serde", "1.0.0"), ("log", "0.4.0"), ("cc", "1.0.0")})
    check("a repeated node's edge", ("serde", "1.0.0") in edges[("log", "0.4.0")], True)
    check("proc-macros", macros, {("serde_derive", "1.0.0")})
    normal = {k: v for k, v in edges.items()}
    normal[root] = normal[root] - {("cc", "1.0.0")}  # cc: a build-dependency, absent from -e normal
    check(
        "runtime crates",
        runtime_crates(root, normal, macros),
        {root, ("serde", "1.0.0"), ("log", "0.4.0")},
    )
    for bad in ("app v0.1.0", "0app v0.1.0\n2skipped v1.0.0"):
        try:
            parse_tree(bad)
            failures.append(f"parse_tree accepted {bad!r}")
        except SbomError:
            pass

    check("old licence spelling", licence_expression("MIT/Apache-2.0"), "MIT OR Apache-2.0")
    check("licence expression kept", licence_expression("(MIT OR Apache-2.0) AND Unicode-3.0"), "(MIT OR Apache-2.0) AND Unicode-3.0")

    dep5 = (
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
        "Source: http://example.org\n\n"
        "Files: *\nCopyright: someone\nLicense: GPL-2+\n\n"
        "Files: mozilla/*\nCopyright: Mozilla\nLicense: MPL-2.0 or GPL-2+\n\n"
        "License: GPL-2+\n This program is free software;\n .\n /usr/share/common-licenses/GPL-2\n"
    )
    check("DEP-5 licences", debian_licences(dep5), ["GPL-2+", "MPL-2.0"])
    free = (
        "This is the Debian prepackaged version of the GNU C Library.\n\n"
        "can be found in `/usr/share/common-licenses/LGPL-2.1'.\n"
        "can be found in `/usr/share/common-licenses/GPL-2'.\n"
        "and again /usr/share/common-licenses/LGPL-2.1.\n"
    )
    check("free-form licences", debian_licences(free), ["LGPL-2.1", "GPL-2"])
    check("unversioned GPL", debian_licences("see `/usr/share/common-licenses/GPL'.\n"), ["GPL"])
    check("no licence", debian_licences("All rights reserved.\n"), [])
    check("SPDX id", licence_entry("GPL-2+")["license"]["id"], "GPL-2.0-or-later")
    check("named licence", licence_entry("public-domain")["license"]["name"], "public-domain")

    paragraphs = parse_control("Package: a\nVersion: 1\nDescription: x\n more\n\nPackage: b\nVersion: 2\n")
    check("control paragraphs", [p["Package"] for p in paragraphs], ["a", "b"])
    check("continuation", paragraphs[0]["Description"], "x\nmore")

    with tempfile.TemporaryDirectory() as tmp:
        root_dir = Path(tmp) / "root"
        (root_dir / "var/lib/dpkg/status.d").mkdir(parents=True)
        (root_dir / "usr/share/doc/gcc-base").mkdir(parents=True)
        (root_dir / "usr/lib").mkdir(parents=True)
        (root_dir / "etc").mkdir(parents=True)
        (root_dir / "var/lib/dpkg/status.d/libgcc").write_text(
            "Package: libgcc\nVersion: 12.2.0-14+deb12u1\nArchitecture: amd64\nDepends: gcc-base (= 12), libc6 (>= 2.35)\n"
        )
        (root_dir / "var/lib/dpkg/status.d/libgcc.md5sums").write_text("d41d8cd98f00b204e9800998ecf8427e  x\n")
        (root_dir / "var/lib/dpkg/status.d/gcc-base").write_text("Package: gcc-base\nVersion: 12\nArchitecture: amd64\n")
        (root_dir / "usr/share/doc/gcc-base/copyright").write_text("see /usr/share/common-licenses/GPL-3.\n")
        os.symlink("gcc-base", root_dir / "usr/share/doc/libgcc")
        (root_dir / "usr/lib/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
        os.symlink("../usr/lib/os-release", root_dir / "etc/os-release")
        tar_path = Path(tmp) / "rootfs.tar"
        with tarfile.open(tar_path, "w") as tar:
            tar.add(root_dir, arcname=".")
        rootfs = Rootfs(tar_path)
        check("symlinked copyright", rootfs.read("/usr/share/doc/libgcc/copyright"), "see /usr/share/common-licenses/GPL-3.\n")
        components, dependencies, distro, operating_system = debian_components(rootfs)
        check("distro", distro, "debian-12")
        check("packages (md5sums skipped)", [c["name"] for c in components], ["gcc-base", "libgcc"])
        check("purl, version encoded", components[1]["purl"], "pkg:deb/debian/libgcc@12.2.0-14%2Bdeb12u1?arch=amd64&distro=debian-12")
        check("licence through the symlink", components[1]["licenses"][0]["license"]["id"], "GPL-3.0-only")
        check("dependencies among the listed packages", dependencies[1]["dependsOn"], [components[0]["bom-ref"]])
        check("os", operating_system["bom-ref"], "os:debian@12")
        (root_dir / "var/lib/dpkg/status.d/orphan").write_text("Package: orphan\nVersion: 1\nArchitecture: all\n")
        with tarfile.open(tar_path, "w") as tar:
            tar.add(root_dir, arcname=".")
        try:
            debian_components(Rootfs(tar_path))
            failures.append("a package without a copyright file was listed")
        except SbomError as e:
            check("the missing copyright is named", "orphan: no /usr/share/doc/orphan/copyright" in str(e), True)

    if failures:
        sys.exit("sbom.py self-test failed:\n  " + "\n  ".join(failures))
    print("sbom.py self-test: ok", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--self-test", action="store_true")
    sub = parser.add_subparsers(dest="command")
    gen = sub.add_parser("generate")
    gen.add_argument("--rootfs", required=True, help="a tarball of the image's root filesystem (or of its base layer)")
    gen.add_argument("--image-name", required=True)
    gen.add_argument("--image-version", required=True)
    gen.add_argument("--image-digest", required=True, help="the image manifest's digest, sha256:…")
    gen.add_argument("--arch", required=True, help="the image's architecture (amd64, arm64)")
    gen.add_argument("--target", help="the binary's Rust target (default: the host's)")
    gen.add_argument("--schema", help="validate against the CycloneDX 1.6 JSON schema in this directory")
    gen.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return
    if args.command != "generate":
        parser.print_help(sys.stderr)
        sys.exit(2)
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", args.image_digest):
        sys.exit(f"sbom.py: --image-digest {args.image_digest!r} is not sha256:<64 hex digits>")
    try:
        args.target = args.target or host_target()
        document = generate(args)
        if args.schema:
            validate(document, Path(args.schema))
    except SbomError as e:
        sys.exit(f"sbom.py: {e}")
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    crates = sum(1 for c in document["components"] if c.get("purl", "").startswith("pkg:cargo/") or c["bom-ref"].startswith("crate:"))
    debs = sum(1 for c in document["components"] if c.get("purl", "").startswith("pkg:deb/"))
    print(
        f"[sbom] {args.out}: {crates} crates, {debs} Debian packages"
        + (" (valid CycloneDX 1.6)" if args.schema else ""),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
