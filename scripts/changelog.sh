#!/usr/bin/env bash
# CHANGELOG.md from the conventional commits, with git-cliff (cliff.toml).
#
#   scripts/changelog.sh update    regenerate CHANGELOG.md
#   scripts/changelog.sh check     exit 1, with a diff, when CHANGELOG.md is not current
#   scripts/changelog.sh path      print the git-cliff binary (installing it first)
#
# Keeping it current: after committing, run `scripts/changelog.sh update` and either
# amend the commit (`git commit --amend --no-edit CHANGELOG.md`: the template has no
# hashes, so the regenerated file stays current) or commit it as
# `chore(changelog): update` (such commits are left out of the changelog).
#
# git-cliff is built once from crates.io with `cargo install --locked` into
# ${POD_DIRECTOR_CACHE:-~/.cache/pod-director}/tools/git-cliff-<version>, keyed by
# version (a few minutes on 2 cores; later runs reuse it). GIT_CLIFF=/path overrides.

set -euo pipefail

GIT_CLIFF_VERSION=2.14.2  # renovate: datasource=crate depName=git-cliff

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/cargo-tool.sh
source "$ROOT/scripts/cargo-tool.sh"

log() { printf '[changelog] %s\n' "$*" >&2; }
die() {
  printf '[changelog] error: %s\n' "$*" >&2
  exit 1
}

# No default features: no network integrations (GitHub/GitLab APIs), no update check.
ensure() { cargo_tool git-cliff "$GIT_CLIFF_VERSION" --no-default-features; }

generate() {
  local cliff
  cliff=$(ensure)
  [[ "$(git -C "$ROOT" rev-parse --is-shallow-repository)" == false ]] ||
    die "the clone is shallow; the changelog needs the whole history (git fetch --unshallow, or fetch-depth: 0)"
  # One newline at the end of the file (see cliff.toml).
  (cd "$ROOT" && RUST_LOG=warn "$cliff" --config cliff.toml) |
    python3 -c 'import sys; sys.stdout.write(sys.stdin.read().rstrip("\n") + "\n")' >"$1"
}

main() {
  case "${1:-}" in
    update)
      generate "$ROOT/CHANGELOG.md"
      log "updated CHANGELOG.md"
      ;;
    check)
      TMP=$(mktemp)
      trap 'rm -f "$TMP"' EXIT
      generate "$TMP"
      if ! diff -u "$ROOT/CHANGELOG.md" "$TMP" >&2; then
        die "CHANGELOG.md is not current: run scripts/changelog.sh update (then amend, or commit as 'chore(changelog): update')"
      fi
      log "CHANGELOG.md is current"
      ;;
    path) ensure ;;
    *)
      sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
      exit 2
      ;;
  esac
}

main "$@"
