#!/usr/bin/env bash
# The release image without a container engine or a registry: an OCI image layout equivalent to
# the Containerfile's `release` target, for this machine and for CI (scripts/test-all's image step).
#
#   scripts/image.sh build [BINARY]   the OCI layout (prints its path): a base layer of distroless
#                                     cc-debian12's Debian packages (mmdebstrap, cached by package set
#                                     and release), a layer with BINARY (default: the release build,
#                                     `binary` below), the image config read from the Containerfile's
#                                     release stage, and the image's SBOM (CycloneDX, scripts/sbom.py)
#                                     stored beside it as an OCI 1.1 artifact whose subject is the image
#   scripts/image.sh binary           the release binary with its dependency tree embedded: `cargo
#                                     auditable build --release --locked -p pod-director --bin pod-director` (prints
#                                     its path; cargo-auditable from crates.io, cached by version)
#   scripts/image.sh sbom ROOTFS DIGEST OUT [ARCH]
#                                     the SBOM of a pushed image (the release workflow): ROOTFS a tar
#                                     of its filesystem, DIGEST its manifest's digest; VERSION from
#                                     the environment, else Cargo.toml
#   scripts/image.sh facts            the image facts, KEY=VALUE lines for $GITHUB_ENV: IMAGE_NAME
#                                     (the chart's image.repository), IMAGE_USER, IMAGE_PORTS, read
#                                     from the Containerfile and checked against the chart's values
#   scripts/image.sh containerfile    the Containerfile's release stage as JSON (user, entrypoint,
#                                     cmd, exposed ports, labels, binary path): what `build` writes
#   scripts/image.sh packages         installs what `build` and the e2e need from Debian (runc,
#                                     umoci, mmdebstrap), only when missing (apt-get, as root)
#
# What differs from the image GitHub builds (docs/src/container-image.md): the base layer is made
# here from Debian's packages instead of pulled from gcr.io/distroless/cc-debian12:nonroot (the same
# package list, passwd/group/home of distroless's nonroot variant, its Env), one layer instead of
# distroless's several, and the binary is built by the host's toolchain, not rust:1.95-bookworm.
#
# Cache: ${POD_DIRECTOR_CACHE:-~/.cache/pod-director}/image/: base-<key>.tar (the base rootfs,
# key = sha256 of suite, architecture, package list and this script's base recipe) and layout/
# (the OCI image layout, tag `release`, and its SBOM artifact, rebuilt by every `build`); tools/:
# cargo-auditable, and jsonschema with CycloneDX's schema (PyPI) that validate every SBOM.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE="${POD_DIRECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pod-director}"
IMAGE_CACHE="$CACHE/image"
LAYOUT="$IMAGE_CACHE/layout"
TAG=release

# distroless cc-debian12: its Debian packages and release. gcc-12-base (a dependency of libgcc-s1)
# holds no library, only libgcc-s1's copyright file (/usr/share/doc/libgcc-s1 is a link to
# /usr/share/doc/gcc-12-base): the licence the SBOM lists and the image must carry.
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE_PACKAGES=(base-files netbase tzdata ca-certificates libc6 libgcc-s1 gcc-12-base)
# distroless's :nonroot image config (github.com/GoogleContainerTools/distroless, base/base.bzl).
BASE_ENV=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt)
BASE_WORKDIR=/home/nonroot
# Bumped when the base recipe (the hook below) changes: part of the cache key.
BASE_RECIPE=2
CARGO_AUDITABLE_VERSION=0.7.7  # renovate: datasource=crate depName=cargo-auditable
# The SBOM's validation: jsonschema and the CycloneDX JSON schema files of cyclonedx-python-lib.
JSONSCHEMA_VERSION=4.26.0  # renovate: datasource=pypi depName=jsonschema
CYCLONEDX_LIB_VERSION=11.12.0  # renovate: datasource=pypi depName=cyclonedx-python-lib
SBOM_MEDIA_TYPE=application/vnd.cyclonedx+json

log() { printf '[image] %s\n' "$*" >&2; }
die() {
  printf '[image] error: %s\n' "$*" >&2
  exit 1
}
# shellcheck source=scripts/cargo-tool.sh
source "$ROOT/scripts/cargo-tool.sh"

arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    *) die "unsupported machine $(uname -m)" ;;
  esac
}

cmd_packages() {
  local missing=()
  command -v runc >/dev/null || missing+=(runc)
  command -v umoci >/dev/null || missing+=(umoci)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  [[ $(id -u) -eq 0 ]] || die "missing ${missing[*]}: install them (apt-get install ${missing[*]}) or run as root"
  log "installing ${missing[*]} from Debian (apt-get)"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# The release stage of the Containerfile, as JSON: the one source of the image config.
cmd_containerfile() {
  python3 - "$ROOT/Containerfile" "${VERSION:-}" "${REVISION:-}" <<'EOF'
import json, re, shlex, sys

path, version, revision = sys.argv[1:4]
lines, current = [], ""
for raw in open(path, encoding="utf-8").read().splitlines():
    if raw.lstrip().startswith("#") or not raw.strip():
        continue
    if raw.rstrip().endswith("\\"):
        current += raw.rstrip()[:-1] + " "
        continue
    lines.append((current + raw).strip())
    current = ""

args, stage, found = {}, None, {}
for line in lines:
    word, _, rest = line.partition(" ")
    word = word.upper()
    if word == "FROM":
        m = re.fullmatch(r"(\S+)\s+AS\s+(\S+)", rest.strip(), re.I)
        stage = m.group(2) if m else None
        if stage == "release":
            found = {"base": m.group(1), "labels": {}, "exposed_ports": [], "args": {}}
        continue
    if stage is None and word == "ARG":
        name, _, default = rest.partition("=")
        args[name.strip()] = default.strip()
    if stage != "release":
        continue
    if word == "ARG":
        name, _, default = rest.partition("=")
        found["args"][name.strip()] = default.strip()
    elif word == "LABEL":
        for pair in shlex.split(rest):
            key, _, value = pair.partition("=")
            found["labels"][key] = value
    elif word == "USER":
        found["user"] = rest.strip()
    elif word == "EXPOSE":
        for port in rest.split():
            found["exposed_ports"].append(port if "/" in port else port + "/tcp")
    elif word in ("ENTRYPOINT", "CMD"):
        value = json.loads(rest)  # exec form only: a shell form would need a shell distroless lacks
        found[word.lower()] = value
    elif word == "COPY":
        parts = rest.split()
        if any(p.startswith("--from=build-release") for p in parts):
            found["binary"] = parts[-1]
    elif word in ("ENV", "WORKDIR", "VOLUME", "RUN", "ADD", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "ONBUILD"):
        sys.exit(f"{path}: the release stage has {word}, which scripts/image.sh does not carry over yet")
if not found:
    sys.exit(f"{path}: no `FROM ... AS release` stage")
for key in ("user", "entrypoint", "cmd", "binary"):
    if key not in found:
        sys.exit(f"{path}: the release stage has no {key.upper() if key != 'binary' else 'COPY --from=build-release'}")
values = {"VERSION": version or found["args"].get("VERSION", ""), "REVISION": revision or found["args"].get("REVISION", "")}
found["labels"] = {k: re.sub(r"\$\{(\w+)\}", lambda m: values.get(m.group(1), ""), v) for k, v in found["labels"].items()}
found["runtime_image"] = args.get(found["base"].strip("${}"), found["base"])
print(json.dumps(found, indent=2, sort_keys=True))
EOF
}

# IMAGE_NAME, IMAGE_USER, IMAGE_PORTS: from the Containerfile and the chart, which must agree.
cmd_facts() {
  python3 - "$ROOT/chart/values.yaml" <(cmd_containerfile) <<'EOF'
import json, re, sys

values_path, stage_path = sys.argv[1:3]
stage = json.load(open(stage_path))
text = open(values_path, encoding="utf-8").read()

def value(section, key):
    m = re.search(rf"^{section}:\n(?:(?:  .*|\s*)\n)*?  {key}: *\"?([^\"\n#]+?)\"? *(?:#.*)?$", text, re.M)
    if not m:
        sys.exit(f"chart/values.yaml has no {section}.{key}")
    return m.group(1).strip()

name = value("image", "repository")
user = stage["user"]
ports = [p.split("/")[0] for p in stage["exposed_ports"]]
chart_ports = [value("containerPorts", "webhook"), value("containerPorts", "probe")]
chart_user = f'{value("podSecurityContext", "runAsUser")}:{value("podSecurityContext", "runAsGroup")}'
errors = []
if chart_ports != ports:
    errors.append(f"the Containerfile exposes {ports}, the chart's containerPorts (webhook, probe) are {chart_ports}")
if chart_user != user:
    errors.append(f"the Containerfile's USER is {user}, the chart's podSecurityContext runs as {chart_user}")
if errors:
    sys.exit("image facts disagree: " + "; ".join(errors))
print(f"IMAGE_NAME={name}")
print(f"IMAGE_USER={user}")
print(f"IMAGE_PORTS={' '.join(ports)}")
EOF
}

# The base rootfs tarball (cached): distroless cc-debian12's packages, extracted, plus what
# distroless adds itself (nonroot user, CA bundle, /tmp, /home/nonroot, dpkg status.d entries).
# mmdebstrap downloads and verifies the packages (Debian's keyring) and resolves their
# dependencies, which distroless does not ship (debconf, mawk, openssl, ...): its extract
# hook makes the tarball from the listed packages only.
base_tar() {
  local key
  key=$(printf '%s\n' "$DEBIAN_SUITE" "$(arch)" "$BASE_RECIPE" "${BASE_PACKAGES[@]}" | sha256sum | cut -c1-16)
  local tar="$IMAGE_CACHE/base-$DEBIAN_SUITE-$key.tar"
  if [[ -s "$tar" ]]; then
    echo "$tar"
    return
  fi
  mkdir -p "$IMAGE_CACHE"
  log "base rootfs: mmdebstrap $DEBIAN_SUITE ${BASE_PACKAGES[*]} (once, cached as $tar)"
  local hook="$IMAGE_CACHE/.hook-$$.sh"
  cat >"$hook" <<'HOOK'
#!/bin/sh
# mmdebstrap extract hook: $1 = the chroot, with the downloaded packages in var/cache/apt/archives.
# Writes $BASE_TAR from the packages named in $BASE_PACKAGES only, plus what distroless adds.
set -eu
debs=$1/var/cache/apt/archives
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/var/lib/dpkg/status.d"
for package in $BASE_PACKAGES; do
  deb=$(ls "$debs/${package}_"*.deb)
  dpkg-deb --extract "$deb" "$root"
  # As distroless records its packages, for image scanners.
  dpkg-deb --field "$deb" >"$root/var/lib/dpkg/status.d/$package"
done
cat >"$root/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat >"$root/etc/group" <<GROUP
root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
nonroot:x:65532:
GROUP
# Name lookups: files, then DNS (glibc's NSS; libnss_files and libnss_dns come with libc6).
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n' >"$root/etc/nsswitch.conf"
mkdir -p "$root/home/nonroot" "$root/root" "$root/tmp" "$root/etc/ssl/certs"
chown 65532:65532 "$root/home/nonroot"
chmod 0700 "$root/home/nonroot" "$root/root"
chmod 1777 "$root/tmp"
# ca-certificates' postinst (update-ca-certificates) does not run in an extract: the bundle it writes.
find "$root/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort | xargs cat >"$root/etc/ssl/certs/ca-certificates.crt"
tar --create --file "$BASE_TAR" --directory "$root" --numeric-owner --sort=name --mtime=@0 .
HOOK
  chmod +x "$hook"
  # shellcheck disable=SC2064 # expand now
  trap "rm -f '$hook' '$tar.partial'" EXIT
  local include
  include=$(
    IFS=,
    echo "${BASE_PACKAGES[*]}"
  )
  BASE_TAR="$tar.partial" BASE_PACKAGES="${BASE_PACKAGES[*]}" \
    mmdebstrap --quiet --variant=extract --architectures="$(arch)" --include="$include" \
    --extract-hook="$hook" --format=null "$DEBIAN_SUITE" /dev/null "$DEBIAN_MIRROR" >&2
  [[ -s "$tar.partial" ]] || die "mmdebstrap wrote no base rootfs"
  mv "$tar.partial" "$tar"
  rm -f "$hook"
  trap - EXIT
  echo "$tar"
}

# The release binary of this checkout, with its dependency tree embedded (cargo auditable: the
# crates of Cargo.lock it was built from, in its `.dep-v0` section): `cargo auditable build
# --release --locked --bin pod-director`. The one build command of the release binary: the
# Containerfile, e2e/image/run and `build` all run it. cargo-auditable wraps rustc for the
# workspace's own crates only (RUSTC_WORKSPACE_WRAPPER), so switching between it and a plain
# `cargo build --release` rebuilds pod-director and its engine, never the dependencies.
cmd_binary() {
  local auditable binary="${CARGO_TARGET_DIR:-$ROOT/target}/release/pod-director"
  auditable=$(cargo_tool cargo-auditable "$CARGO_AUDITABLE_VERSION")
  log "binary: cargo auditable build --release --locked -p pod-director --bin pod-director (a no-op when up to date)"
  (cd "$ROOT" && "$auditable" auditable build --release --locked -p pod-director --bin pod-director >&2)
  echo "$binary"
}

cmd_build() {
  cmd_packages
  local binary=${1:-}
  [[ -n "$binary" ]] || binary=$(cmd_binary)
  [[ -x "$binary" ]] || die "$binary is not an executable"
  local stage base
  stage=$(VERSION=${VERSION:-$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)} \
    REVISION=${REVISION:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)} cmd_containerfile)
  base=$(base_tar)

  local work
  work=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now
  trap "rm -rf '$work'" EXIT
  # The binary layer: the COPY of the release stage (root-owned, 0755, as COPY makes it).
  local dest
  dest=$(jq -r .binary <<<"$stage")
  install -D -m 0755 "$binary" "$work/layer$dest"
  tar --create --file "$work/binary.tar" --directory "$work/layer" --numeric-owner --owner=0 --group=0 \
    --sort=name --mtime=@0 .

  rm -rf "$LAYOUT.new"
  umoci init --layout "$LAYOUT.new"
  umoci new --image "$LAYOUT.new:$TAG"
  umoci raw add-layer --image "$LAYOUT.new:$TAG" --history.created_by="mmdebstrap --variant=extract $DEBIAN_SUITE ${BASE_PACKAGES[*]} (distroless cc-debian12's packages)" "$base"
  umoci raw add-layer --image "$LAYOUT.new:$TAG" --history.created_by="COPY --from=build-release /out/pod-director $dest" "$work/binary.tar"

  local -a config=(--os linux --architecture "$(arch)" --config.workingdir "$BASE_WORKDIR"
    --config.user "$(jq -r .user <<<"$stage")" --clear=config.entrypoint --clear=config.cmd
    --clear=config.exposedports --clear=config.labels --clear=config.env)
  local item
  for item in "${BASE_ENV[@]}"; do config+=(--config.env "$item"); done
  while read -r item; do config+=(--config.entrypoint "$item"); done < <(jq -r '.entrypoint[]' <<<"$stage")
  while read -r item; do config+=(--config.cmd "$item"); done < <(jq -r '.cmd[]' <<<"$stage")
  while read -r item; do config+=(--config.exposedports "$item"); done < <(jq -r '.exposed_ports[]' <<<"$stage")
  while read -r item; do config+=(--config.label "$item"); done < <(jq -r '.labels | to_entries[] | "\(.key)=\(.value)"' <<<"$stage")
  umoci config --image "$LAYOUT.new:$TAG" --no-history "${config[@]}"
  umoci gc --layout "$LAYOUT.new"

  # The SBOM of this image, stored beside it as an OCI 1.1 artifact whose subject is its manifest.
  local digest
  digest=$(jq -r --arg tag "$TAG" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $tag) | .digest' "$LAYOUT.new/index.json")
  sbom "$base" "$digest" "$(arch)" "$work/sbom.cdx.json" "$(jq -r '.labels["org.opencontainers.image.version"] // empty' <<<"$stage")"
  attach "$LAYOUT.new" "$TAG" "$work/sbom.cdx.json" "$SBOM_MEDIA_TYPE" >/dev/null

  rm -rf "$LAYOUT"
  mv "$LAYOUT.new" "$LAYOUT"
  rm -rf "$work"
  trap - EXIT
  local size
  size=$(du -sb "$LAYOUT/blobs" | cut -f1)
  log "image: $LAYOUT:$TAG ($((size / 1024 / 1024)) MiB compressed; base $(basename "$base")), its SBOM attached ($SBOM_MEDIA_TYPE)"
  echo "$LAYOUT"
}

# The Python that validates SBOMs: jsonschema and CycloneDX's JSON schema files (those that PyPI's
# cyclonedx-python-lib ships; its own code is not used), in a venv in the tools cache, keyed by
# both versions. Prints the venv's directory.
sbom_tools() {
  local dir="$CACHE/tools/cyclonedx-schema-$CYCLONEDX_LIB_VERSION-jsonschema-$JSONSCHEMA_VERSION" lock
  if [[ ! -f "$dir/.ready" ]]; then
    mkdir -p "$CACHE/tools"
    exec {lock}>"$CACHE/tools/.cyclonedx-schema.lock"
    flock "$lock"
    if [[ ! -f "$dir/.ready" ]]; then
      local start=$SECONDS
      log "installing jsonschema $JSONSCHEMA_VERSION and the CycloneDX schema (cyclonedx-python-lib $CYCLONEDX_LIB_VERSION) from PyPI into $dir (once)"
      rm -rf "$dir"
      if ! { python3 -m venv "$dir" >&2 &&
        "$dir/bin/pip" install --quiet --disable-pip-version-check "jsonschema==$JSONSCHEMA_VERSION" >&2 &&
        "$dir/bin/pip" install --quiet --disable-pip-version-check --no-deps "cyclonedx-python-lib==$CYCLONEDX_LIB_VERSION" >&2; }; then
        rm -rf "$dir"
        die "could not install jsonschema $JSONSCHEMA_VERSION / cyclonedx-python-lib $CYCLONEDX_LIB_VERSION from PyPI"
      fi
      touch "$dir/.ready"
      log "installed in $((SECONDS - start))s"
    fi
    exec {lock}>&-
  fi
  echo "$dir"
}

# sbom ROOTFS_TAR DIGEST ARCH OUT [VERSION]: the CycloneDX SBOM (scripts/sbom.py) of the image
# whose manifest is DIGEST: the crates of Cargo.lock's release graph of pod-director (cargo tree,
# cargo metadata) and the Debian packages ROOTFS_TAR records, validated against CycloneDX's schema.
sbom() {
  local rootfs=$1 digest=$2 image_arch=$3 out=$4 version=${5:-} tools schema name
  [[ -n "$version" ]] || version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)
  name=$(cmd_facts | sed -n 's/^IMAGE_NAME=//p')
  tools=$(sbom_tools)
  schema=$("$tools/bin/python" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("cyclonedx").origin).parent / "schema" / "_res")')
  "$tools/bin/python" "$ROOT/scripts/sbom.py" generate --rootfs "$rootfs" --image-name "$name" \
    --image-version "$version" --image-digest "$digest" --arch "$image_arch" --schema "$schema" --out "$out"
}

# attach LAYOUT TAG FILE MEDIA_TYPE: FILE as an OCI 1.1 artifact of the image tagged TAG (what
# `oras attach --oci-layout` makes): a manifest with artifactType MEDIA_TYPE, the empty config, FILE
# as its one layer and the image's manifest as its `subject`, listed in index.json untagged. An
# earlier artifact of that type for that image is replaced. Prints the artifact manifest's digest.
attach() {
  python3 - "$@" <<'EOF'
import datetime, hashlib, json, os, sys

layout, tag, path, media_type = sys.argv[1:5]


def put(data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    blob = os.path.join(layout, "blobs", "sha256", digest)
    if not os.path.exists(blob):
        with open(blob + ".partial", "wb") as fh:
            fh.write(data)
        os.replace(blob + ".partial", blob)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def subject_of(descriptor: dict) -> str | None:
    with open(os.path.join(layout, "blobs", *descriptor["digest"].split(":", 1)), encoding="utf-8") as fh:
        return json.load(fh).get("subject", {}).get("digest")


index_path = os.path.join(layout, "index.json")
with open(index_path, encoding="utf-8") as fh:
    index = json.load(fh)
tagged = [m for m in index["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
if len(tagged) != 1:
    sys.exit(f"{layout}: {len(tagged)} manifests tagged {tag}")
subject = {k: tagged[0][k] for k in ("mediaType", "digest", "size")}
created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
with open(path, "rb") as fh:
    content = fh.read()
manifest = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "artifactType": media_type,
    "config": {"mediaType": "application/vnd.oci.empty.v1+json", **put(b"{}"), "data": "e30="},
    "layers": [{"mediaType": media_type, **put(content), "annotations": {"org.opencontainers.image.title": os.path.basename(path)}}],
    "subject": subject,
    "annotations": {"org.opencontainers.image.created": created},
}
descriptor = {
    "mediaType": manifest["mediaType"],
    **put(json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()),
    "artifactType": media_type,
    "annotations": {"org.opencontainers.image.created": created},
}
earlier = [m for m in index["manifests"] if m.get("artifactType") == media_type and subject_of(m) == subject["digest"]]
index["manifests"] = [m for m in index["manifests"] if m not in earlier] + [descriptor]
with open(index_path + ".partial", "w", encoding="utf-8") as fh:
    json.dump(index, fh, separators=(",", ":"))
os.replace(index_path + ".partial", index_path)
print(descriptor["digest"])
EOF
}

# The SBOM of a pushed image (the release workflow): ROOTFS_TAR is its exported filesystem
# (`docker export`), DIGEST its manifest's digest, OUT the file written.
cmd_sbom() {
  [[ $# -ge 3 ]] || die "usage: scripts/image.sh sbom ROOTFS_TAR DIGEST OUT [ARCH]"
  sbom "$1" "$2" "${4:-$(arch)}" "$3" "${VERSION:-}"
}

case "${1:-}" in
  build) shift && cmd_build "$@" ;;
  binary) cmd_binary ;;
  sbom) shift && cmd_sbom "$@" ;;
  facts) cmd_facts ;;
  containerfile) cmd_containerfile ;;
  packages) cmd_packages ;;
  *)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
    exit 2
    ;;
esac
