#!/usr/bin/env bash
# Builds the third-party Go tools that the e2e suite, the chart tests and the
# demo need, ONCE, into a cache outside the repository, keyed by version.
#
#   e2e/tools.sh ensure TOOL...   build the missing ones (progress on stderr only)
#   e2e/tools.sh path TOOL        print the binary's absolute path (builds it first)
#   e2e/tools.sh all              ensure every tool
#   e2e/tools.sh list             print "tool version path" for every tool
#
# Tools: kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok helm
#        helm-unittest jaeger prometheus otelcol actionlint karpenter-crds cluster-api-crds
#        openreports-crds promtool.
#        `path karpenter-crds` prints a directory holding karpenter.sh_nodepools.yaml, the NodePool
#        CRD of sigs.k8s.io/karpenter; `path cluster-api-crds` one holding the MachineDeployment and
#        MachineSet CRDs of sigs.k8s.io/cluster-api; `path openreports-crds` one holding
#        openreports.io_reports.yaml and openreports.io_clusterreports.yaml, the OpenReports CRDs of
#        github.com/openreports/reports-api (copied from the modules; nothing of them is built). `path helm-plugins` prints a
#        HELM_PLUGINS directory that holds the helm-unittest plugin:
#          HELM_PLUGINS=$(e2e/tools.sh path helm-plugins) "$(e2e/tools.sh path helm)" unittest chart
#        `path kwok-stages` prints the directory of the kwok stage files e2e/cluster.sh passes
#        with -c (copied from kwok's module: the plain binary has no built-in stages).
#
# Environment:
#   E2E_KUBE_VERSION   the Kubernetes release of kube-apiserver, kube-controller-manager,
#                      kube-scheduler and kubectl (e.g. v1.34.4; default KUBE_VERSION
#                      below): `E2E_KUBE_VERSION=v1.34.4 e2e/tools.sh path kube-apiserver`.
#                      Each release has its own directories (tools/kube-apiserver-v1.34.4/).
#
# Cache: ${POD_DIRECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pod-director}
#   tools/<tool>-<version>/<binary>   the binaries (helm-unittest: a plugin dir;
#                                     kwok: also stages/*.yaml)
#   src/<module>-<version>/           generated wrapper Go modules (go.mod, go.sum)
#   go/{path,mod,build}               GOPATH, GOMODCACHE, GOCACHE
# Nothing here downloads a prebuilt binary: every tool is built from the Go
# modules that the Go module proxy serves. Needs Go >= 1.26 (GOTOOLCHAIN is
# honoured). A tool is rebuilt only when its version below changes; to force a
# rebuild, delete its directory under tools/.

set -euo pipefail

# --- versions (Renovate updates these lines through a regex manager) ----------
KUBE_VERSION=v1.37.2  # renovate: datasource=go depName=k8s.io/kubernetes
KWOK_VERSION=v0.8.0  # renovate: datasource=go depName=sigs.k8s.io/kwok
ETCD_VERSION=v3.6.16  # renovate: datasource=go depName=go.etcd.io/etcd/server/v3
HELM_VERSION=v3.22.0  # renovate: datasource=go depName=helm.sh/helm/v3
HELM_UNITTEST_VERSION=v1.1.2  # renovate: datasource=go depName=github.com/helm-unittest/helm-unittest
JAEGER_VERSION=v1.76.0  # renovate: datasource=go depName=github.com/jaegertracing/jaeger
# Prometheus 3.x: module tags are v0.<minor><patch>.x (v0.316.0 = Prometheus 3.16.0).
PROMETHEUS_VERSION=v0.316.0  # renovate: datasource=go depName=github.com/prometheus/prometheus
# The collector's release is contrib's: the core modules follow from its go.mod.
OTELCOL_VERSION=v0.161.0  # renovate: datasource=go depName=github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor
ACTIONLINT_VERSION=v1.7.12  # renovate: datasource=go depName=github.com/rhysd/actionlint
# Only the NodePool CRD manifest is taken from this module (nothing is built from it).
KARPENTER_VERSION=v1.15.0  # renovate: datasource=go depName=sigs.k8s.io/karpenter
# Only the MachineDeployment and MachineSet CRD manifests are taken from this module.
CLUSTER_API_VERSION=v1.14.2  # renovate: datasource=go depName=sigs.k8s.io/cluster-api
# Only the OpenReports Report and ClusterReport CRD manifests are taken from this module.
OPENREPORTS_VERSION=v0.2.1  # renovate: datasource=go depName=github.com/openreports/reports-api
# -----------------------------------------------------------------------------

# E2E_KUBE_VERSION (e.g. v1.34.4) selects the Kubernetes release of kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl, keyed in the cache by it like
# any version; unset, KUBE_VERSION above. helm and helm-unittest keep reporting
# KUBE_VERSION's minor (their cache key is their own version).
CLUSTER_KUBE_VERSION="${E2E_KUBE_VERSION:-$KUBE_VERSION}"

TOOLS=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok helm helm-unittest jaeger prometheus otelcol actionlint karpenter-crds cluster-api-crds openreports-crds promtool)

CACHE="${POD_DIRECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pod-director}"
export GOPATH="$CACHE/go/path"
export GOMODCACHE="$CACHE/go/mod"
export GOCACHE="$CACHE/go/build"
export CGO_ENABLED=0
# -modcacherw: the module cache can be removed with a plain `rm -rf`.
export GOFLAGS="-modcacherw -buildvcs=false"
export GOWORK=off
unset GOOS GOARCH GOBIN

log() { printf '[tools] %s\n' "$*" >&2; }
die() {
  printf '[tools] error: %s\n' "$*" >&2
  exit 1
}

[[ "$CLUSTER_KUBE_VERSION" =~ ^v1\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] ||
  die "E2E_KUBE_VERSION=$CLUSTER_KUBE_VERSION is not a Kubernetes release (like v1.34.4)"

usage() {
  # The comment block at the top of this file.
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit 2
}

# version_of TOOL: the version that keys the tool in the cache.
version_of() {
  case "$1" in
    kube-apiserver | kube-controller-manager | kube-scheduler | kubectl) echo "$CLUSTER_KUBE_VERSION" ;;
    etcd) echo "$ETCD_VERSION" ;;
    kwok | kwok-stages) echo "$KWOK_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    helm-unittest | helm-plugins) echo "$HELM_UNITTEST_VERSION" ;;
    jaeger) echo "$JAEGER_VERSION" ;;
    prometheus | promtool) echo "$PROMETHEUS_VERSION" ;;
    otelcol) echo "$OTELCOL_VERSION" ;;
    actionlint) echo "$ACTIONLINT_VERSION" ;;
    karpenter-crds) echo "$KARPENTER_VERSION" ;;
    cluster-api-crds) echo "$CLUSTER_API_VERSION" ;;
    openreports-crds) echo "$OPENREPORTS_VERSION" ;;
    *) die "unknown tool '$1' (known: ${TOOLS[*]} helm-plugins kwok-stages)" ;;
  esac
}

# The binary name helm-unittest's plugin.yaml runs on this platform
# ("$HELM_PLUGIN_DIR/untt-linux-amd64", "untt-macos-arm64", ...).
untt_name() {
  local os arch
  os=$(uname -s | tr '[:upper:]' '[:lower:]')
  [[ "$os" == darwin ]] && os=macos
  case "$(uname -m)" in
    x86_64 | amd64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) arch=$(uname -m) ;;
  esac
  echo "untt-$os-$arch"
}

# binary_path TOOL: where the tool's binary lives (whether built or not).
binary_path() {
  local tool=$1 version
  version=$(version_of "$tool")
  case "$tool" in
    helm-unittest) echo "$CACHE/tools/helm-plugins-$version/unittest/$(untt_name)" ;;
    helm-plugins) echo "$CACHE/tools/helm-plugins-$version" ;;
    kwok-stages) echo "$CACHE/tools/kwok-$version/stages" ;;
    karpenter-crds | cluster-api-crds | openreports-crds) echo "$CACHE/tools/$tool-$version" ;;
    *) echo "$CACHE/tools/$tool-$version/$tool" ;;
  esac
}

# module_dir MODULE VERSION / module_gomod MODULE VERSION: download a module
# and print its source directory / its go.mod file.
module_field() {
  (cd "$CACHE" && go mod download -json "$2@$3" | sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",*\$/\1/p")
}
module_dir() { module_field Dir "$@"; }
module_gomod() { module_field GoMod "$@"; }

# copied_replaces GOMOD: the replace directives of a go.mod that point at
# another module version (not at a local directory). `go install pkg@version`
# refuses modules with replaces; a wrapper module that copies them builds the
# tool the way its authors do.
copied_replaces() {
  sed -En 's#^[[:space:]]*(replace[[:space:]]+)?([^[:space:]()]+( v[^[:space:]]+)?) => ([^./[:space:]][^[:space:]]* v[^[:space:]]+)[[:space:]]*(//.*)?$#\2 => \4#p' "$1"
}

# wrapper_module KEY MODULE VERSION [REPLACE...]: print the directory of a
# generated Go module that requires MODULE@VERSION, with MODULE's own
# versioned replaces plus the given "old => new version" ones; create it first
# when missing.
wrapper_module() {
  local key=$1 module=$2 version=$3
  shift 3
  local dir="$CACHE/src/$key" gomod
  if [[ ! -f "$dir/.ready" ]]; then
    gomod=$(module_gomod "$module" "$version")
    [[ -f "$gomod" ]] || die "could not download $module@$version"
    local -a replaces=("$@")
    local line
    while IFS= read -r line; do replaces+=("$line"); done < <(copied_replaces "$gomod")
    rm -rf "$dir"
    mkdir -p "$dir"
    {
      echo "// Generated by e2e/tools.sh to build $module@$version; do not edit."
      echo "module pod-director.invalid/e2e-tools/$key"
      echo
      echo "go 1.26"
      echo
      echo "require $module $version"
      if ((${#replaces[@]})); then
        echo
        echo "replace ("
        printf '\t%s\n' "${replaces[@]}"
        echo ")"
      fi
    } >"$dir/go.mod"
  fi
  echo "$dir"
}

# go_build DIR PKG@VERSION OUT LDFLAGS [TAGS]: build PKG (a main package of a
# dependency of the wrapper module DIR) into OUT, atomically, with the given
# comma-separated build tags.
go_build() {
  local dir=$1 pkg=${2%@*} version=${2##*@} out=$3 ldflags=$4 tags=${5:-}
  local start=$SECONDS
  log "resolving $pkg@$version"
  # An explicit version: a bare `go get` would mean @upgrade.
  (cd "$dir" && go get -tool "$pkg@$version" >&2) || die "go get -tool $pkg@$version failed"
  touch "$dir/.ready"
  go_compile "$dir" "$pkg" "$out" "$ldflags" "$tags"
  log "built $(basename "$out") in $((SECONDS - start))s"
}

# go_compile DIR PKG OUT LDFLAGS [TAGS]: `go build` PKG inside module DIR into OUT, atomically.
go_compile() {
  local dir=$1 pkg=$2 out=$3 ldflags=$4 tags=${5:-}
  log "building $pkg${tags:+ (tags $tags)} -> $out"
  mkdir -p "$(dirname "$out")"
  (cd "$dir" && go build -p 2 -trimpath ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$out.tmp.$$" "$pkg" >&2) ||
    {
      rm -f "$out.tmp.$$"
      die "go build $pkg failed"
    }
  mv -f "$out.tmp.$$" "$out"
}

# --- Kubernetes: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl ---
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them
# with ./staging/src/...; the wrapper module replaces each with the published
# k8s.io/<module> v0.<minor>.<patch>. The list is derived from kubernetes' own
# go.mod: every module that it both requires at v0.0.0 and replaces by a
# staging directory (sample-cli-plugin etc. are replaced but not required).
kube_module() {
  local staging="v0.${CLUSTER_KUBE_VERSION#v1.}" gomod m
  gomod=$(module_gomod k8s.io/kubernetes "$CLUSTER_KUBE_VERSION")
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$CLUSTER_KUBE_VERSION"
  local -a replaces=()
  while read -r m; do
    if grep -Eq "^[[:space:]]*(require[[:space:]]+)?${m//./\\.} v0\.0\.0([[:space:]]|$)" "$gomod"; then
      replaces+=("$m => $m $staging")
    fi
  done < <(sed -n 's#^[[:space:]]*\(k8s.io/[A-Za-z0-9._-]*\) => \./staging/src/.*#\1#p' "$gomod")
  ((${#replaces[@]} > 0)) || die "found no staging modules in $gomod"
  wrapper_module "kubernetes-$CLUSTER_KUBE_VERSION" k8s.io/kubernetes "$CLUSTER_KUBE_VERSION" "${replaces[@]}"
}

# The -X flags of kubernetes' hack/lib/version.sh, or /version says v0.0.0-master.
kube_ldflags() {
  local v=${CLUSTER_KUBE_VERSION#v} major minor date flags="-s -w" pkg
  major=${v%%.*}
  minor=${v#*.}
  minor=${minor%%.*}
  # Reproducible: the release's publication time from the proxy.
  date=$(cd "$CACHE" && go list -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' \
    "k8s.io/kubernetes@$CLUSTER_KUBE_VERSION" 2>/dev/null) || date=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$CLUSTER_KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean${date:+ -X $pkg.buildDate=$date}"
  done
  echo "$flags"
}

build_kube() {
  local tool=$1 dir
  dir=$(kube_module)
  log "building $tool $CLUSTER_KUBE_VERSION (a cold Kubernetes build takes 10-20 min on 2 cores)"
  go_build "$dir" "k8s.io/kubernetes/cmd/$tool@$CLUSTER_KUBE_VERSION" "$(binary_path "$tool")" "$(kube_ldflags)"
}

# --- kwok: plays the kubelet of Node objects (no containers) ------------------------
# Its go.mod has no replace; the stage files it needs (node initialize + Lease
# heartbeat, pod ready/complete/delete, the "fast" set) are copied from its module
# into the tools dir beside the binary, before the binary (whose presence marks the
# tool built) is moved into place.
KWOK_STAGES=(
  kustomize/stage/node/fast/node-initialize.yaml
  kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  kustomize/stage/pod/fast/pod-ready.yaml
  kustomize/stage/pod/fast/pod-complete.yaml
  kustomize/stage/pod/fast/pod-delete.yaml
)

build_kwok() {
  local dir src stages f
  dir=$(wrapper_module "kwok-$KWOK_VERSION" sigs.k8s.io/kwok "$KWOK_VERSION")
  src=$(module_dir sigs.k8s.io/kwok "$KWOK_VERSION")
  [[ -d "$src" ]] || die "could not download sigs.k8s.io/kwok@$KWOK_VERSION"
  stages=$(binary_path kwok-stages)
  rm -rf "$stages.tmp"
  mkdir -p "$stages.tmp"
  for f in "${KWOK_STAGES[@]}"; do
    [[ -f "$src/$f" ]] || die "kwok $KWOK_VERSION ships no $f"
    cp "$src/$f" "$stages.tmp/"
    chmod 644 "$stages.tmp/$(basename "$f")"
  done
  rm -rf "$stages"
  mv "$stages.tmp" "$stages"
  go_build "$dir" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "$(binary_path kwok)" \
    "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
}

# --- etcd (the root package of go.etcd.io/etcd/server/v3 is its main) ----------
build_etcd() {
  local dir
  dir=$(wrapper_module "etcd-$ETCD_VERSION" go.etcd.io/etcd/server/v3 "$ETCD_VERSION")
  go_build "$dir" "go.etcd.io/etcd/server/v3@$ETCD_VERSION" "$(binary_path etcd)" \
    "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
}

# --- helm and the helm-unittest plugin ---------------------------------------
# Without -X flags .Capabilities.KubeVersion is v1.20. helm's Makefile derives
# it from the client-go it is built with; here both helm and helm-unittest
# (whose helm library lags) report the Kubernetes minor of KUBE_VERSION, the
# version the e2e cluster runs by default, so `helm template` and `helm unittest`
# agree (E2E_KUBE_VERSION does not change them: their cache key is their own version).
helm_kube_flags() {
  local v=${KUBE_VERSION#v} major minor pkg flags=""
  major=${v%%.*}
  minor=${v#*.}
  minor=${minor%%.*}
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    flags+=" -X $pkg.k8sVersionMajor=$major -X $pkg.k8sVersionMinor=$minor"
  done
  echo "$flags"
}

build_helm() {
  local dir
  dir=$(wrapper_module "helm-$HELM_VERSION" helm.sh/helm/v3 "$HELM_VERSION")
  go_build "$dir" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$(binary_path helm)" \
    "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean$(helm_kube_flags)"
}

# The plugin is a directory in $HELM_PLUGINS holding plugin.yaml and the binary
# that plugin.yaml's platformCommand names. Its install/update hooks (which
# download a release binary) only run on `helm plugin install|update`; they
# are dropped from the copied plugin.yaml anyway, so nothing is ever fetched.
build_helm_unittest() {
  local dir src plugin_dir bin
  dir=$(wrapper_module "helm-unittest-$HELM_UNITTEST_VERSION" github.com/helm-unittest/helm-unittest "$HELM_UNITTEST_VERSION")
  bin=$(binary_path helm-unittest)
  plugin_dir=$(dirname "$bin")
  src=$(module_dir github.com/helm-unittest/helm-unittest "$HELM_UNITTEST_VERSION")
  grep -q "/$(basename "$bin")\"" "$src/plugin.yaml" ||
    die "helm-unittest's plugin.yaml names no binary $(basename "$bin") for this platform"
  mkdir -p "$plugin_dir"
  awk '/^[A-Za-z]/ { skip = ($1 == "hooks:" || $1 == "platformHooks:") } !skip' \
    "$src/plugin.yaml" >"$plugin_dir/plugin.yaml"
  go_build "$dir" "github.com/helm-unittest/helm-unittest/cmd/helm-unittest@$HELM_UNITTEST_VERSION" "$bin" \
    "-s -w -X github.com/helm-unittest/helm-unittest/internal/build.version=${HELM_UNITTEST_VERSION#v}$(helm_kube_flags)"
  ln -sfn "$(basename "$bin")" "$plugin_dir/untt"
}

# --- jaeger v2 (module tags are v1.x; cmd/jaeger is the v2 binary) -------------
build_jaeger() {
  local dir
  dir=$(wrapper_module "jaeger-$JAEGER_VERSION" github.com/jaegertracing/jaeger "$JAEGER_VERSION")
  go_build "$dir" "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION" "$(binary_path jaeger)" "-s -w"
}

# --- Prometheus ------------------------------------------------------------------
# cmd/prometheus registers every service-discovery plugin (AWS, Azure, GCE,
# Kubernetes, ... and their SDKs) through prometheus/plugins/plugin_*.go, each
# guarded by `//go:build !remove_all_sd || enable_<name>_sd`. The e2e suite only
# scrapes static targets, so `remove_all_sd` drops them all (plugins/minimum.go
# keeps file and http SD). Without `builtinassets` the web UI is not embedded
# (the HTTP API, all the suite uses, is unaffected).
build_prometheus() {
  local dir v=${PROMETHEUS_VERSION#v0.} major minor patch
  # v0.316.0 -> 3.16.0: the release is <major><minor as two digits>.
  major=${v%%.*}
  major=${major:0:1}
  minor=${v#"$major"}
  minor=${minor%%.*}
  patch=${v##*.}
  dir=$(wrapper_module "prometheus-$PROMETHEUS_VERSION" github.com/prometheus/prometheus "$PROMETHEUS_VERSION")
  go_build "$dir" "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION" "$(binary_path prometheus)" \
    "-s -w -X github.com/prometheus/common/version.Version=$major.$((10#$minor)).$patch -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.Revision=$PROMETHEUS_VERSION" \
    remove_all_sd
}

# promtool (`promtool test rules`: the chart's alert rules on synthetic series), from the same
# module and wrapper as prometheus, with the same tag.
build_promtool() {
  local dir
  dir=$(wrapper_module "prometheus-$PROMETHEUS_VERSION" github.com/prometheus/prometheus "$PROMETHEUS_VERSION")
  go_build "$dir" "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" "$(binary_path promtool)" \
    "-s -w" remove_all_sd
}

# --- OpenTelemetry Collector: exactly the components of otel/collector.yaml -----
# A wrapper module with a main.go + components.go (what the collector's builder,
# ocb, generates), requiring only the modules of the components that
# otel/collector.yaml uses: the otlp receiver, memory_limiter, tail_sampling and
# batch processors, the otlp exporter, the health_check extension. Every
# collector module is at ONE release: contrib's OTELCOL_VERSION, and the core
# versions (v0.x and the stable v1.x modules) that its tailsamplingprocessor's
# go.mod requires; the build fails when resolution moved any collector module
# to another release. e2e/tracing/run runs otel/collector.yaml itself with it.
OTELCOL_COMPONENTS=(
  "receiver go.opentelemetry.io/collector/receiver/otlpreceiver core"
  "processor go.opentelemetry.io/collector/processor/memorylimiterprocessor core"
  "processor github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor contrib"
  "processor go.opentelemetry.io/collector/processor/batchprocessor core"
  "exporter go.opentelemetry.io/collector/exporter/otlpexporter core"
  "extension github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckextension contrib"
)

# otelcol_sources DIR CORE STABLE: write go.mod, main.go and components.go.
otelcol_sources() {
  local dir=$1 core=$2 stable=$3 entry kind module release
  {
    echo "// Generated by e2e/tools.sh: a collector with the components of otel/collector.yaml; do not edit."
    echo "module pod-director.invalid/e2e-tools/otelcol-$OTELCOL_VERSION"
    echo
    echo "go 1.26"
    echo
    echo "require ("
    for entry in "${OTELCOL_COMPONENTS[@]}"; do
      read -r kind module release <<<"$entry"
      if [[ "$release" == contrib ]]; then echo "	$module $OTELCOL_VERSION"; else echo "	$module $core"; fi
    done
    printf '\t%s\n' "go.opentelemetry.io/collector/otelcol $core" "go.opentelemetry.io/collector/service $core" \
      "go.opentelemetry.io/collector/component $stable" "go.opentelemetry.io/collector/confmap $stable" \
      "go.opentelemetry.io/collector/confmap/provider/envprovider $stable" \
      "go.opentelemetry.io/collector/confmap/provider/fileprovider $stable" \
      "go.opentelemetry.io/collector/confmap/provider/yamlprovider $stable"
    echo ")"
  } >"$dir/go.mod"
  cat >"$dir/main.go" <<EOF
// Generated by e2e/tools.sh; do not edit.
package main

import (
	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/otelcol"
)

func main() {
	info := component.BuildInfo{
		Command:     "otelcol",
		Description: "OpenTelemetry Collector with the components of pod-director's otel/collector.yaml",
		Version:     "${OTELCOL_VERSION#v}",
	}
	settings := otelcol.CollectorSettings{
		BuildInfo: info,
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				// yaml: serves --set (e.g. the collector's own telemetry, off in e2e).
				ProviderFactories: []confmap.ProviderFactory{envprovider.NewFactory(), fileprovider.NewFactory(), yamlprovider.NewFactory()},
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatal(err)
	}
}
EOF
  {
    echo "// Generated by e2e/tools.sh; do not edit."
    echo "package main"
    echo
    echo "import ("
    for kind in exporter extension otelcol processor receiver; do
      echo "	\"go.opentelemetry.io/collector/$kind\""
    done
    echo "	\"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry\""
    for entry in "${OTELCOL_COMPONENTS[@]}"; do
      read -r kind module release <<<"$entry"
      echo "	\"$module\""
    done
    echo ")"
    echo
    echo "func components() (otelcol.Factories, error) {"
    echo "	var err error"
    echo "	factories := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}"
    local -a news
    for kind in extension receiver processor exporter; do
      news=()
      for entry in "${OTELCOL_COMPONENTS[@]}"; do
        read -r k module release <<<"$entry"
        [[ "$k" == "$kind" ]] && news+=("${module##*/}.NewFactory()")
      done
      echo "	if factories.${kind^}s, err = otelcol.MakeFactoryMap[$kind.Factory]($(printf '%s, ' "${news[@]}" | sed 's/, $//')); err != nil {"
      echo "		return otelcol.Factories{}, err"
      echo "	}"
    done
    echo "	return factories, nil"
    echo "}"
  } >"$dir/components.go"
}

otelcol_module() {
  local dir="$CACHE/src/otelcol-$OTELCOL_VERSION" gomod core stable stray
  if [[ ! -f "$dir/.ready" ]]; then
    gomod=$(module_gomod github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor "$OTELCOL_VERSION")
    [[ -f "$gomod" ]] || die "could not download the tailsamplingprocessor at $OTELCOL_VERSION"
    core=$(sed -En 's#^[[:space:]]*go\.opentelemetry\.io/collector/processor/processortest (v0\.[0-9.]+).*#\1#p' "$gomod" | head -n1)
    stable=$(sed -En 's#^[[:space:]]*go\.opentelemetry\.io/collector/component (v1\.[0-9.]+).*#\1#p' "$gomod" | head -n1)
    [[ -n "$core" && -n "$stable" ]] || die "$gomod names no core collector release (processortest v0.x, component v1.x)"
    log "collector: contrib $OTELCOL_VERSION, core $core and $stable; resolving its modules"
    rm -rf "$dir"
    mkdir -p "$dir"
    otelcol_sources "$dir" "$core" "$stable"
    (cd "$dir" && go mod tidy >&2) || die "go mod tidy failed for the collector ($dir)"
    # One release: core modules at core/stable, contrib modules at OTELCOL_VERSION.
    stray=$(cd "$dir" && go list -m -f '{{.Path}} {{.Version}}' all |
      awk -v core="$core" -v stable="$stable" -v contrib="$OTELCOL_VERSION" '
        $1 ~ /^go\.opentelemetry\.io\/collector(\/|$)/ && $2 != core && $2 != stable { print }
        $1 ~ /^github\.com\/open-telemetry\/opentelemetry-collector-contrib\// && $2 != contrib { print }')
    [[ -z "$stray" ]] || die "the collector's modules are not all at one release (contrib $OTELCOL_VERSION, core $core and $stable): $stray"
    touch "$dir/.ready"
  fi
  echo "$dir"
}

build_otelcol() {
  local dir start=$SECONDS
  dir=$(otelcol_module)
  go_compile "$dir" . "$(binary_path otelcol)" "-s -w"
  log "built otelcol in $((SECONDS - start))s"
}

# --- actionlint -----------------------------------------------------------------
build_actionlint() {
  local dir
  dir=$(wrapper_module "actionlint-$ACTIONLINT_VERSION" github.com/rhysd/actionlint "$ACTIONLINT_VERSION")
  go_build "$dir" "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION" "$(binary_path actionlint)" \
    "-s -w -X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION"
}

# --- CRD manifests, files of a module (building it may need a newer Go) ------------
# module_files TOOL MODULE VERSION FILE...: copies FILEs (paths inside the module) into the
# tool's directory.
module_files() {
  local tool=$1 module=$2 version=$3 json zip out
  shift 3
  # `go mod download` places the module's zip in the cache, then may report that the module
  # wants a newer Go than ours: only the zip is needed.
  json=$(cd "$CACHE" && GOTOOLCHAIN=local go mod download -json "$module@$version" || true)
  zip=$(sed -n 's/^[[:space:]]*"Zip": "\(.*\)",*$/\1/p' <<<"$json")
  [[ -f "$zip" ]] || die "could not download $module@$version: $json"
  out=$(binary_path "$tool")
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp"
  python3 - "$zip" "$module@$version" "$out.tmp" "$@" <<'PY' || die "$module@$version lacks one of: $*"
import os, sys, zipfile
archive, prefix, out, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
with zipfile.ZipFile(archive) as z:
    for f in files:
        with open(os.path.join(out, os.path.basename(f)), "wb") as target:
            target.write(z.read(f"{prefix}/{f}"))
PY
  rm -rf "$out"
  mv "$out.tmp" "$out"
}

build_karpenter_crds() {
  module_files karpenter-crds sigs.k8s.io/karpenter "$KARPENTER_VERSION" pkg/apis/crds/karpenter.sh_nodepools.yaml
}

build_cluster_api_crds() {
  module_files cluster-api-crds sigs.k8s.io/cluster-api "$CLUSTER_API_VERSION" \
    core/config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml \
    core/config/crd/bases/cluster.x-k8s.io_machinesets.yaml
}

build_openreports_crds() {
  module_files openreports-crds github.com/openreports/reports-api "$OPENREPORTS_VERSION" \
    config/crd/openreports.io_reports.yaml \
    config/crd/openreports.io_clusterreports.yaml
}

# --- dispatcher -------------------------------------------------------------------
build_tool() {
  case "$1" in
    kube-apiserver | kube-controller-manager | kube-scheduler | kubectl) build_kube "$1" ;;
    etcd) build_etcd ;;
    kwok) build_kwok ;;
    helm) build_helm ;;
    helm-unittest) build_helm_unittest ;;
    jaeger) build_jaeger ;;
    prometheus) build_prometheus ;;
    promtool) build_promtool ;;
    otelcol) build_otelcol ;;
    actionlint) build_actionlint ;;
    karpenter-crds) build_karpenter_crds ;;
    cluster-api-crds) build_cluster_api_crds ;;
    openreports-crds) build_openreports_crds ;;
    *) die "no build recipe for '$1'" ;;
  esac
}

ensure_one() {
  local tool=$1 bin lock
  [[ "$tool" == helm-plugins ]] && tool=helm-unittest
  [[ "$tool" == kwok-stages ]] && tool=kwok
  bin=$(binary_path "$tool")
  [[ -x "$bin" ]] && return 0
  mkdir -p "$CACHE/tools"
  # One build at a time (2 cores), also across concurrent invocations.
  exec {lock}>"$CACHE/tools/.lock"
  flock "$lock"
  [[ -x "$bin" ]] || build_tool "$tool"
  exec {lock}>&-
}

main() {
  (($#)) || usage
  mkdir -p "$CACHE"
  local cmd=$1 t
  shift
  case "$cmd" in
    ensure)
      (($#)) || usage
      for t in "$@"; do version_of "$t" >/dev/null; done
      for t in "$@"; do ensure_one "$t"; done
      ;;
    path)
      (($# == 1)) || usage
      version_of "$1" >/dev/null
      ensure_one "$1"
      binary_path "$1"
      ;;
    all)
      for t in "${TOOLS[@]}"; do ensure_one "$t"; done
      ;;
    list)
      for t in "${TOOLS[@]}"; do printf '%s %s %s\n' "$t" "$(version_of "$t")" "$(binary_path "$t")"; done
      ;;
    *) usage ;;
  esac
}

main "$@"
exit
