#!/usr/bin/env bash
# Dependency policy (deny.toml) with cargo-deny: banned crates (aws-lc-rs: ring only),
# duplicate major versions, licenses, sources.
#
#   scripts/deny.sh          cargo deny check bans licenses sources
#   scripts/deny.sh path     print the cargo-deny binary (installing it first)
#
# cargo-deny is built once from crates.io with `cargo install --locked` into
# ${POD_DIRECTOR_CACHE:-~/.cache/pod-director}/tools/cargo-deny-<version>, keyed by
# version (several minutes on 2 cores; later runs reuse it). CARGO_DENY=/path overrides.
# Advisories are not checked here: they need the advisory database from the network.

set -euo pipefail

CARGO_DENY_VERSION=0.20.2  # renovate: datasource=crate depName=cargo-deny

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE="${POD_DIRECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pod-director}"
DIR="$CACHE/tools/cargo-deny-$CARGO_DENY_VERSION"

log() { printf '[deny] %s\n' "$*" >&2; }
die() {
  printf '[deny] error: %s\n' "$*" >&2
  exit 1
}

ensure() {
  if [[ -n "${CARGO_DENY:-}" ]]; then
    echo "$CARGO_DENY"
    return
  fi
  local bin="$DIR/bin/cargo-deny" lock
  if [[ ! -x "$bin" ]]; then
    command -v cargo >/dev/null || die "cargo is needed to install cargo-deny $CARGO_DENY_VERSION"
    mkdir -p "$CACHE/tools"
    exec {lock}>"$CACHE/tools/.cargo-deny.lock"
    flock "$lock"
    if [[ ! -x "$bin" ]]; then
      local start=$SECONDS tmp="$DIR.tmp.$$"
      log "installing cargo-deny $CARGO_DENY_VERSION from crates.io into $DIR (once)"
      rm -rf "$tmp"
      cargo install cargo-deny --version "$CARGO_DENY_VERSION" --locked --root "$tmp" --quiet >&2 || {
        rm -rf "$tmp"
        die "cargo install cargo-deny $CARGO_DENY_VERSION failed"
      }
      rm -rf "$DIR"
      mv "$tmp" "$DIR"
      log "installed cargo-deny in $((SECONDS - start))s"
    fi
    exec {lock}>&-
  fi
  echo "$bin"
}

main() {
  case "${1:-check}" in
    check)
      local deny
      deny=$(ensure)
      (cd "$ROOT" && "$deny" --locked check bans licenses sources)
      ;;
    path) ensure ;;
    *)
      sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
      exit 2
      ;;
  esac
}

main "$@"
