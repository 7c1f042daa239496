#!/usr/bin/env bash
# The release image without a container engine or a registry: an OCI image layout equivalent to
# the Containerfile's `release` target, for this machine and for CI (scripts/test-all's image step).
#
#   scripts/image.sh build [BINARY]   the OCI layout (prints its path): a base layer of distroless
#                                     cc-debian12's Debian packages (mmdebstrap, cached by package set
#                                     and release), a layer with BINARY (default: the release build,
#                                     target/release/pod-director, built when missing or stale), and
#                                     the image config read from the Containerfile's release stage
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
# (the OCI image layout, tag `release`, rebuilt by every `build`).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE="${POD_DIRECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pod-director}"
IMAGE_CACHE="$CACHE/image"
LAYOUT="$IMAGE_CACHE/layout"
TAG=release

# distroless cc-debian12: its Debian packages and release.
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE_PACKAGES=(base-files netbase tzdata ca-certificates libc6 libgcc-s1)
# distroless's :nonroot image config (github.com/GoogleContainerTools/distroless, base/base.bzl).
BASE_ENV=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt)
BASE_WORKDIR=/home/nonroot
# Bumped when the base recipe (the hook below) changes: part of the cache key.
BASE_RECIPE=2

log() { printf '[image] %s\n' "$*" >&2; }
die() {
  printf '[image] error: %s\n' "$*" >&2
  exit 1
}

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

# The release binary of this checkout (`cargo build --release --locked`, as the Containerfile).
release_binary() {
  local binary="${CARGO_TARGET_DIR:-$ROOT/target}/release/pod-director"
  log "binary: cargo build --release --locked --bin pod-director (a no-op when up to date)"
  (cd "$ROOT" && cargo build --release --locked --bin pod-director >&2)
  echo "$binary"
}

cmd_build() {
  cmd_packages
  local binary=${1:-}
  [[ -n "$binary" ]] || binary=$(release_binary)
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
  rm -rf "$LAYOUT"
  mv "$LAYOUT.new" "$LAYOUT"
  rm -rf "$work"
  trap - EXIT
  local size
  size=$(du -sb "$LAYOUT/blobs" | cut -f1)
  log "image: $LAYOUT:$TAG ($((size / 1024 / 1024)) MiB compressed; base $(basename "$base"))"
  echo "$LAYOUT"
}

case "${1:-}" in
  build) shift && cmd_build "$@" ;;
  facts) cmd_facts ;;
  containerfile) cmd_containerfile ;;
  packages) cmd_packages ;;
  *)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
    exit 2
    ;;
esac
