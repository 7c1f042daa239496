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
# shellcheck source=scripts/cargo-tool.sh
source "$ROOT/scripts/cargo-tool.sh"

log() { printf '[deny] %s\n' "$*" >&2; }
die() {
  printf '[deny] error: %s\n' "$*" >&2
  exit 1
}

ensure() { cargo_tool cargo-deny "$CARGO_DENY_VERSION"; }

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
