#!/usr/bin/env bash
# The book (docs/, an mdBook): generated pages, build and links.
#
#   scripts/book.sh [check]   what scripts/test-all's "docs book" step runs: the generated reference
#                             pages equal what the binary prints, the book builds (a page SUMMARY.md
#                             lists but that does not exist fails it), every link and anchor resolves,
#                             every command shown names commands, flags, targets and scripts that exist,
#                             every chart key the pages and the commands' --help name is in chart/values.yaml
#   scripts/book.sh update    rewrite the generated reference pages (docs/src/reference/cli.md,
#                             config-schema.md) from the binary, after changing a flag or a config key
#   scripts/book.sh build     build the book into docs/book/ (not committed)
#   scripts/book.sh path      print the mdbook binary (installing it first)
#
# mdbook is built once from crates.io with `cargo install --locked` into
# ${POD_DIRECTOR_CACHE:-~/.cache/pod-director}/tools/mdbook-<version>, keyed by version (about
# 5 minutes on 2 cores; later runs reuse it). MDBOOK=/path overrides it. The generated pages are
# written from the debug binary (cargo build), or from $POD_DIRECTOR_BIN when set.

set -euo pipefail

MDBOOK_VERSION=0.5.4  # renovate: datasource=crate depName=mdbook

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/cargo-tool.sh
source "$ROOT/scripts/cargo-tool.sh"

log() { printf '[book] %s\n' "$*" >&2; }
die() {
  printf '[book] error: %s\n' "$*" >&2
  exit 1
}

# No default features: no `serve` / `watch` (a web server and a file watcher) to build.
mdbook() { cargo_tool mdbook "$MDBOOK_VERSION" --no-default-features --features search; }

# The pod-director binary the reference pages are generated from.
binary() {
  if [[ -n "${POD_DIRECTOR_BIN:-}" ]]; then
    echo "$POD_DIRECTOR_BIN"
    return
  fi
  (cd "$ROOT" && cargo build --locked --quiet --bin pod-director --message-format=json) |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "pod-director":
        print(m["executable"])
' | tail -n 1
}

reference() {
  local bin
  bin=$(binary)
  [[ -x "$bin" ]] || die "no pod-director binary to generate the reference pages from"
  python3 "$ROOT/scripts/book-reference.py" --bin "$bin" "$@"
}

build() {
  local bin
  bin=$(mdbook)
  # mdbook logs every page it renders at INFO; its warnings and errors are what matters here.
  MDBOOK_LOG=warn "$bin" build "$ROOT/docs" || die "mdbook build failed (docs/book.toml, docs/src/SUMMARY.md)"
  [[ -f "$ROOT/docs/book/index.html" ]] || die "mdbook wrote no docs/book/index.html"
  log "built docs/book/ ($(find "$ROOT/docs/book" -name '*.html' | wc -l) pages)"
}

check() {
  reference --check || die "a generated reference page is stale: run scripts/book.sh update"
  build
  python3 "$ROOT/scripts/book-links.py" --self-test
  python3 "$ROOT/scripts/book-links.py"
  python3 "$ROOT/scripts/book-commands.py" --self-test
  python3 "$ROOT/scripts/book-commands.py"
  python3 "$ROOT/scripts/book-chart-keys.py" --self-test
  python3 "$ROOT/scripts/book-chart-keys.py"
}

case "${1:-check}" in
  check) check ;;
  update) reference ;;
  build) build ;;
  path) mdbook ;;
  *)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
