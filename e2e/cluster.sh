#!/usr/bin/env bash
# A real Kubernetes cluster on loopback, without Docker: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok (the kubelet of simulated
# nodes) built from Go modules by e2e/tools.sh, with certificates made by openssl.
#
#   e2e/cluster.sh start     start a fresh control plane and wait until it is ready
#                            (a no-op when this state dir's cluster is running & healthy)
#   e2e/cluster.sh stop      stop everything it started (idempotent)
#   e2e/cluster.sh restart   stop, then start
#   e2e/cluster.sh status    exit 0 when running and ready
#   e2e/cluster.sh env       print `export KUBECONFIG=...` (eval "$(e2e/cluster.sh env)")
#   e2e/cluster.sh plugins-start   a second kube-apiserver of the same release beside a running
#                            cluster (`start` first): the reference for the in-tree admission
#                            plugins PodNodeSelector and PodTolerationRestriction, enabled and
#                            configured by $E2E_PLUGINS_ADMISSION_CONFIG (a no-op when it runs
#                            with that file's content)
#   e2e/cluster.sh plugins-stop    stop it (idempotent; `stop` stops it too)
#   e2e/cluster.sh plugins-env     print `export KUBECONFIG=...` of the reference server
#
# Environment:
#   E2E_STATE_DIR                    state dir (default $CACHE/e2e-state): pki/, etcd/,
#                                    logs/, run/, kubeconfig, webhook/{ca.crt,tls.crt,tls.key}
#   E2E_START_TIMEOUT                seconds to wait for readiness (default 120)
#   E2E_APISERVER_TRACING_ENDPOINT   host:port of an OTLP/gRPC receiver: the API server
#                                    exports its spans there (sampling 100%)
#   E2E_SERVICEACCOUNT_ADMISSION     true (default) | false: like envtest, turn off the
#                                    ServiceAccount admission plugin
#   E2E_CLIENT_QPS                   client QPS of kube-controller-manager and kube-scheduler
#                                    (burst: twice that); unset: their defaults (20 and 50).
#                                    The scale simulation (e2e/scale/run) raises it
#   E2E_PLUGINS_ADMISSION_CONFIG     the reference server's AdmissionConfiguration file
#                                    (--admission-control-config-file; default
#                                    e2e/plugins/admission.yaml); its plugins' `path:`s are
#                                    relative to it
#   E2E_KUBE_VERSION                 the Kubernetes release of kube-apiserver,
#                                    kube-controller-manager, kube-scheduler and kubectl
#                                    (e.g. v1.34.4; default: e2e/tools.sh's KUBE_VERSION);
#                                    `start` restarts a cluster that runs another one
#   POD_DIRECTOR_CACHE               cache root, shared with e2e/tools.sh
#
# Nothing listens beyond 127.0.0.1; ports are picked free at random (outside the
# ephemeral range) at each start and written to $STATE/ports.
#
# Pods are scheduled and run: kube-scheduler binds them, and kwok plays the
# kubelet of every Node annotated kwok.x-k8s.io/node=fake (Ready, Lease
# heartbeats, bound pods Running, Job pods Succeeded, deletions finished; no
# containers). A Node without that annotation has no kubelet: it stays NotReady
# and, after the controller-manager's 60 s startup grace period, is tainted
# node.kubernetes.io/unreachable.
#
# The API server authorizes and admits as a real control plane does: the Node
# authorizer and RBAC (--authorization-mode Node,RBAC, kubeadm's), and the
# admission plugins on by default plus NodeRestriction (kubeadm and every managed
# offering enable it): a node (system:node:NAME) may create only mirror pods of
# itself (spec.nodeName its own, an owner reference to its own Node), which is
# what pod-director's mirror-pod exemption relies on.
#
# ServiceAccount admission stays ON, as on real clusters (it also mutates pods:
# token volume), so the controller-manager must have created a namespace's
# "default" ServiceAccount before a pod can be created in it. `start` waits for
# it in "default"; for a new namespace run `e2e/cluster.sh wait-sa NAMESPACE`
# (or retry). The API server's audit log (metadata of pod writes, which carries
# webhooks' audit annotations) is $STATE/logs/audit.log.

set -euo pipefail
set +m # no job control: `setsid CMD &` then runs CMD itself (no fork), so $! is its pid

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE="${POD_DIRECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pod-director}"
STATE="${E2E_STATE_DIR:-$CACHE/e2e-state}"
START_TIMEOUT="${E2E_START_TIMEOUT:-120}"
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1 # the first address: the "kubernetes" Service
COMPONENTS=(kwok kube-scheduler kube-controller-manager kube-apiserver etcd) # stop order
# What a real control plane authorizes with and admits with beyond the API server's
# default plugins (kubeadm's: the Node authorizer, and NodeRestriction).
AUTHORIZATION_MODES=Node,RBAC
ADMISSION_PLUGINS=NodeRestriction
# The annotation of the Nodes kwok manages (e2e/scenarios creates its Nodes with it).
KWOK_NODE_ANNOTATION=kwok.x-k8s.io/node=fake

PKI="$STATE/pki"
RUN="$STATE/run"
LOGS="$STATE/logs"
KUBECONFIG_FILE="$STATE/kubeconfig"

log() { printf '[cluster] %s\n' "$*" >&2; }
die() {
  printf '[cluster] error: %s\n' "$*" >&2
  exit 1
}

usage() {
  # The comment block at the top of this file.
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit 2
}

tool() { "$HERE/tools.sh" path "$1"; }

kubectl_() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# --- ports ------------------------------------------------------------------------
# shellcheck source=e2e/ports.sh
source "$HERE/ports.sh"

# shellcheck disable=SC2317 # called through wait_for
port_listening() {
  local hex
  hex=$(printf '%04X' "$1")
  # state 0A = LISTEN
  awk -v h="$hex" 'NR > 1 { split($2, a, ":"); if (a[2] == h && $4 == "0A") found = 1 } END { exit !found }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# --- certificates -------------------------------------------------------------------
# cert_ok FILE: exists and stays valid for at least another day.
cert_ok() { [[ -f "$1" ]] && openssl x509 -checkend 86400 -noout -in "$1" >/dev/null 2>&1; }

# make_ca DIR NAME: DIR/ca.{key,crt}
make_ca() {
  local dir=$1 name=$2
  mkdir -p "$dir"
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" -subj "/CN=$name" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}

# make_cert CADIR KEY CRT SUBJECT EXTKEYUSAGE [SAN]: a leaf signed by CADIR/ca.
make_cert() {
  local cadir=$1 key=$2 crt=$3 subj=$4 eku=$5 san=${6:-} ext
  ext=$(mktemp)
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    if [[ -n "$san" ]]; then echo "subjectAltName=$san"; fi
  } >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$key" -subj "$subj" 2>/dev/null |
    openssl x509 -req -sha256 -days 365 -CA "$cadir/ca.crt" -CAkey "$cadir/ca.key" \
      -set_serial "0x$(openssl rand -hex 16)" -extfile "$ext" -out "$crt" 2>/dev/null
  rm -f "$ext"
  chmod 600 "$key"
}

ensure_certs() {
  if ! cert_ok "$PKI/ca.crt"; then
    log "generating the cluster CA and certificates in $PKI"
    rm -rf "$PKI"
    make_ca "$PKI" pod-director-e2e-ca
  fi
  cert_ok "$PKI/apiserver.crt" ||
    make_cert "$PKI" "$PKI/apiserver.key" "$PKI/apiserver.crt" "/CN=kube-apiserver" serverAuth \
      "IP:127.0.0.1,DNS:localhost,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert_ok "$PKI/admin.crt" ||
    make_cert "$PKI" "$PKI/admin.key" "$PKI/admin.crt" "/O=system:masters/CN=e2e-admin" clientAuth
  # The bootstrap RBAC policy binds this user to the controller-manager's role.
  cert_ok "$PKI/controller-manager.crt" ||
    make_cert "$PKI" "$PKI/controller-manager.key" "$PKI/controller-manager.crt" \
      "/CN=system:kube-controller-manager" clientAuth
  # ... and this one to the scheduler's (system:kube-scheduler, system:volume-scheduler).
  cert_ok "$PKI/scheduler.crt" ||
    make_cert "$PKI" "$PKI/scheduler.key" "$PKI/scheduler.crt" "/CN=system:kube-scheduler" clientAuth
  # kwok writes what kubelets write, for any node name (Node status, Leases, pod
  # status, events, pod deletions): the bootstrap policy has no role for that
  # (system:node is bound per node by the Node authorizer), so it is an admin.
  cert_ok "$PKI/kwok.crt" ||
    make_cert "$PKI" "$PKI/kwok.key" "$PKI/kwok.crt" "/O=system:masters/CN=e2e-kwok" clientAuth
  if [[ ! -f "$PKI/sa.key" ]]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
    chmod 600 "$PKI/sa.key"
  fi
  # For the webhook under test (pod-director serve --tls-cert/--tls-key), with
  # its own CA: the caBundle of a clientConfig.url https://127.0.0.1:PORT/...
  local wh="$STATE/webhook"
  cert_ok "$wh/ca.crt" || {
    rm -rf "$wh"
    make_ca "$wh" pod-director-e2e-webhook-ca
  }
  cert_ok "$wh/tls.crt" ||
    make_cert "$wh" "$wh/tls.key" "$wh/tls.crt" "/CN=pod-director-e2e-webhook" serverAuth \
      "IP:127.0.0.1,DNS:localhost"
}

# kubeconfig FILE PORT CERT KEY USER: a kubeconfig with embedded credentials.
write_kubeconfig() {
  local file=$1 port=$2 crt=$3 key=$4 user=$5
  cat >"$file.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: pod-director-e2e
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$crt")
    client-key-data: $(base64 -w0 <"$key")
contexts:
- name: pod-director-e2e
  context:
    cluster: pod-director-e2e
    user: $user
current-context: pod-director-e2e
EOF
  chmod 600 "$file.tmp"
  mv -f "$file.tmp" "$file"
}

# --- processes ------------------------------------------------------------------------
# spawn NAME CMD...: run CMD in its own session (so its process group can be
# killed as a whole), stdout+stderr to $LOGS/NAME.log, pid to $RUN/NAME.pid.
spawn() {
  local name=$1
  shift
  echo "=== $(date -u +%FT%TZ) $*" >>"$LOGS/$name.log"
  setsid "$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
  echo $! >"$RUN/$name.pid"
}

# pid_of NAME: the pid from $RUN/NAME.pid if that process is alive and still
# runs a command that mentions this state dir (pids get recycled).
pid_of() {
  local f="$RUN/$1.pid" pid
  [[ -f "$f" ]] || return 1
  pid=$(<"$f")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$STATE/" || return 1
  echo "$pid"
}

alive() { pid_of "$1" >/dev/null; }

# running PID: the process exists and is not a zombie.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ "${stat%% *}" != Z ]]
}

# Leftovers whose pid file was lost: processes running one of our tool
# binaries ($CACHE/tools/...) with this state dir on their command line.
state_pids() {
  local d cmdline
  for d in /proc/[0-9]*; do
    cmdline=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
    case "$cmdline" in
      "$CACHE/tools/"*"$STATE/"*) echo "${d#/proc/}" ;;
    esac
  done
}

fail_with_log() {
  local name=$1
  log "$name is not running; last lines of $LOGS/$name.log:"
  tail -n 30 "$LOGS/$name.log" >&2 || true
  exit 1
}

# wait_for WHAT CHECK...: poll CHECK until it succeeds, failing early when a
# component died, and after $START_TIMEOUT seconds.
wait_for() {
  local what=$1 deadline=$((SECONDS + START_TIMEOUT)) c
  shift
  until "$@" >/dev/null 2>&1; do
    for c in "${COMPONENTS[@]}"; do
      if [[ -f "$RUN/$c.pid" ]] && ! alive "$c"; then fail_with_log "$c"; fi
    done
    ((SECONDS < deadline)) || die "timed out after ${START_TIMEOUT}s waiting for $what"
    sleep 0.5
  done
}

# --- the reference server of the in-tree plugins ------------------------------------------
# A second kube-apiserver on the cluster's etcd (a key prefix of its own, new at each start, so
# it never sees a previous run's objects) with the cluster's certificates, authorization and
# admission plugins plus PodNodeSelector and PodTolerationRestriction. No controller-manager,
# scheduler or kwok: a namespace gets no `default` ServiceAccount (create it before pods), pods
# stay Pending, a deleted namespace stays Terminating unless finalized (PUT .../finalize).
PLUGINS="$STATE/plugins"
PLUGINS_ADMISSION=(NodeRestriction PodNodeSelector PodTolerationRestriction)

# plugins_config_files: the AdmissionConfiguration file and the files its plugins' `path:`s name.
# The flags both API servers (the cluster's and the reference server) start with: loopback, the
# e2e PKI, etcd, service accounts, authorization, admission plugins. Into the array named $1;
# $2 the secure port, $3 etcd's port, $4 the cert dir, $5 the admission plugins (a comma list).
apiserver_flags() {
  local -n into=$1
  into=(
    --bind-address 127.0.0.1 --secure-port "$2"
    --advertise-address 127.0.0.1 --endpoint-reconciler-type none
    --etcd-servers "http://127.0.0.1:$3"
    --cert-dir "$4"
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key"
    --client-ca-file "$PKI/ca.crt"
    --service-account-issuer "https://127.0.0.1:$2"
    --service-account-key-file "$PKI/sa.pub"
    --service-account-signing-key-file "$PKI/sa.key"
    --service-cluster-ip-range "$SERVICE_CIDR"
    --authorization-mode "$AUTHORIZATION_MODES"
    --allow-privileged=true
    --profiling=false
    --enable-admission-plugins="$5"
  )
  if [[ "${E2E_SERVICEACCOUNT_ADMISSION:-true}" == false ]]; then
    into+=(--disable-admission-plugins=ServiceAccount)
  fi
}

plugins_config_files() {
  local file=$1 dir p
  dir=$(dirname "$file")
  echo "$file"
  # `path: x` (YAML) or `"path": "x"` (JSON), one per line.
  sed -n 's/^[[:space:]-]*"\{0,1\}path"\{0,1\}:[[:space:]]*["'\'']\{0,1\}\([^"'\'' #,]*\).*/\1/p' "$file" | while read -r p; do
    [[ -n "$p" ]] || continue
    if [[ "$p" == /* ]]; then echo "$p"; else echo "$dir/$p"; fi
  done
}

plugins_settings() {
  local file=$1 f
  settings
  echo "plugins=${PLUGINS_ADMISSION[*]}"
  while read -r f; do
    [[ -r "$f" ]] || die "$f (named by $file) is not readable"
    echo "$f $(sha256sum <"$f" | cut -d' ' -f1)"
  done < <(plugins_config_files "$file")
}

plugins_healthy() {
  alive plugins-apiserver && [[ -f "$PLUGINS/kubeconfig" ]] &&
    "$KUBECTL" --kubeconfig "$PLUGINS/kubeconfig" get --raw /readyz >/dev/null 2>&1
}

cmd_plugins_stop() {
  local pid i
  pid=$(pid_of plugins-apiserver) || {
    rm -f "$RUN/plugins-apiserver.pid"
    return 0
  }
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    running "$pid" || break
    ((i == 80)) && { kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; }
    sleep 0.1
  done
  rm -f "$RUN/plugins-apiserver.pid"
  log "reference server stopped"
}

PLUGINS_STARTED=0
# shellcheck disable=SC2317 # an EXIT trap
on_plugins_start_exit() {
  local rc=$?
  if ((PLUGINS_STARTED == 0)); then
    log "plugins-start failed or was interrupted: stopping the reference server"
    cmd_plugins_stop || true
  fi
  return "$rc"
}

cmd_plugins_start() {
  local config="${E2E_PLUGINS_ADMISSION_CONFIG:-$HERE/plugins/admission.yaml}" wanted t0=$SECONDS
  [[ -r "$config" ]] || die "E2E_PLUGINS_ADMISSION_CONFIG=$config is not readable"
  config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
  healthy || die "the cluster of $STATE is not running: e2e/cluster.sh start first"
  wanted=$(plugins_settings "$config")
  if plugins_healthy && [[ "$(cat "$PLUGINS/settings" 2>/dev/null)" == "$wanted" ]]; then
    log "reference server already running with $config"
    return 0
  fi
  trap on_plugins_start_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cmd_plugins_stop
  mkdir -p "$PLUGINS"
  rm -f "$PLUGINS/settings" "$PLUGINS/kubeconfig"
  local etcd_port api_port kas
  etcd_port=$(sed -n 's/^etcd=//p' "$STATE/ports")
  [[ -n "$etcd_port" ]] || die "no etcd port in $STATE/ports"
  free_port api_port
  kas=$(tool kube-apiserver)
  local -a flags
  apiserver_flags flags "$api_port" "$etcd_port" "$PLUGINS" "$(
    IFS=,
    echo "${PLUGINS_ADMISSION[*]}"
  )"
  log "starting the reference server (PodNodeSelector, PodTolerationRestriction; $config) on 127.0.0.1:$api_port"
  spawn plugins-apiserver "$kas" "${flags[@]}" \
    --etcd-prefix "/registry-plugins-$(date +%s%N)" \
    --admission-control-config-file "$config"
  write_kubeconfig "$PLUGINS/kubeconfig" "$api_port" "$PKI/admin.crt" "$PKI/admin.key" e2e-admin
  local deadline=$((SECONDS + START_TIMEOUT))
  until "$KUBECTL" --kubeconfig "$PLUGINS/kubeconfig" get --raw /readyz >/dev/null 2>&1; do
    alive plugins-apiserver || fail_with_log plugins-apiserver
    ((SECONDS < deadline)) || die "timed out after ${START_TIMEOUT}s waiting for the reference server's /readyz"
    sleep 0.5
  done
  echo "$wanted" >"$PLUGINS/settings"
  PLUGINS_STARTED=1
  trap - EXIT INT TERM
  log "reference server ready in $((SECONDS - t0))s: KUBECONFIG=$PLUGINS/kubeconfig, https://127.0.0.1:$api_port"
}

cmd_plugins_env() {
  echo "export KUBECONFIG=$PLUGINS/kubeconfig"
  echo "export E2E_STATE_DIR=$STATE"
}

# --- commands -------------------------------------------------------------------------------
cmd_stop() {
  cmd_plugins_stop
  local c pid pids=() i
  for c in "${COMPONENTS[@]}"; do
    if pid=$(pid_of "$c"); then
      pids+=("$pid")
      # The whole process group: the component and anything it forked.
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for pid in $(state_pids); do
    [[ " ${pids[*]} " == *" $pid "* ]] && continue
    pids+=("$pid")
    kill -TERM "$pid" 2>/dev/null || true
  done
  if ((${#pids[@]})); then
    log "stopping ${#pids[@]} process(es)"
    for ((i = 0; i < 100; i++)); do
      local left=()
      for pid in "${pids[@]}"; do
        if running "$pid"; then left+=("$pid"); fi
      done
      ((${#left[@]})) || break
      if ((i == 80)); then
        for pid in "${left[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; done
      fi
      sleep 0.1
    done
  fi
  rm -f "$RUN"/*.pid
  return 0
}

# The settings that a running cluster must have been started with for `start`
# to reuse it.
settings() {
  local kube s
  kube=$("$HERE/tools.sh" list | awk '$1 == "kube-apiserver" { print $2 }')
  s="kubernetes=$kube tracing=${E2E_APISERVER_TRACING_ENDPOINT:-} serviceaccount-admission=${E2E_SERVICEACCOUNT_ADMISSION:-true}"
  s+=" authorization=$AUTHORIZATION_MODES admission-plugins=$ADMISSION_PLUGINS"
  if [[ -n "${E2E_CLIENT_QPS:-}" ]]; then s+=" client-qps=$E2E_CLIENT_QPS"; fi
  echo "$s"
}

# shellcheck disable=SC2317 # called through wait_for
https_healthy() { curl -ksf --max-time 2 "https://127.0.0.1:$1/healthz" >/dev/null; }
# shellcheck disable=SC2317 # called through wait_for
http_healthy() { curl -sf --max-time 2 "http://127.0.0.1:$1/healthz" >/dev/null; }

healthy() {
  [[ -f "$KUBECONFIG_FILE" ]] || return 1
  local c
  for c in "${COMPONENTS[@]}"; do alive "$c" || return 1; done
  KUBECTL=$(tool kubectl)
  kubectl_ get --raw /readyz >/dev/null 2>&1
}

cmd_status() {
  if healthy; then
    log "running and ready: $(kubectl_ config view -o jsonpath='{.clusters[0].cluster.server}')"
  else
    log "not running"
    return 1
  fi
}

STARTED=0
# shellcheck disable=SC2317 # an EXIT trap
on_start_exit() {
  local rc=$?
  if ((STARTED == 0)); then
    log "start failed or was interrupted: stopping what was started"
    cmd_stop || true
  fi
  return "$rc"
}

cmd_start() {
  if healthy; then
    if [[ "$(cat "$STATE/settings" 2>/dev/null)" == "$(settings)" ]]; then
      log "already running and ready (E2E_STATE_DIR=$STATE); use restart for a fresh one"
      return 0
    fi
    log "running with other settings ($(cat "$STATE/settings" 2>/dev/null)): restarting"
  fi
  local t0=$SECONDS
  trap on_start_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cmd_stop
  "$HERE/tools.sh" ensure etcd kube-apiserver kube-controller-manager kube-scheduler kwok kubectl
  local etcd kas kcm ksched kwok stages
  etcd=$(tool etcd)
  kas=$(tool kube-apiserver)
  kcm=$(tool kube-controller-manager)
  ksched=$(tool kube-scheduler)
  kwok=$(tool kwok)
  stages=$(tool kwok-stages)
  KUBECTL=$(tool kubectl)

  mkdir -p "$STATE" "$RUN" "$LOGS"
  chmod 700 "$STATE"
  ensure_certs
  rm -rf "$STATE/etcd" "$STATE/settings" "$KUBECONFIG_FILE" "$STATE"/{controller-manager,scheduler,kwok}.kubeconfig
  local t_start=$SECONDS

  local etcd_port etcd_peer api_port kcm_port sched_port kwok_port
  free_port etcd_port
  free_port etcd_peer
  free_port api_port
  free_port kcm_port
  free_port sched_port
  free_port kwok_port
  printf 'etcd=%s\netcd-peer=%s\napiserver=%s\ncontroller-manager=%s\nscheduler=%s\nkwok=%s\n' \
    "$etcd_port" "$etcd_peer" "$api_port" "$kcm_port" "$sched_port" "$kwok_port" >"$STATE/ports"

  log "starting etcd on 127.0.0.1:$etcd_port"
  spawn etcd "$etcd" --name e2e --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "e2e=http://127.0.0.1:$etcd_peer" \
    --unsafe-no-fsync --log-level warn
  wait_for "etcd to listen on $etcd_port" port_listening "$etcd_port"

  # Audit: metadata of pod writes (webhooks' audit annotations land there).
  cat >"$STATE/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: [pods]}]
  verbs: [create, update, patch]
- level: None
EOF
  local -a tracing=()
  rm -f "$STATE/tracing.yaml"
  if [[ -n "${E2E_APISERVER_TRACING_ENDPOINT:-}" ]]; then
    cat >"$STATE/tracing.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: $E2E_APISERVER_TRACING_ENDPOINT
samplingRatePerMillion: 1000000
EOF
    tracing=(--tracing-config-file "$STATE/tracing.yaml")
    log "API server traces go to $E2E_APISERVER_TRACING_ENDPOINT"
  fi
  local -a flags
  apiserver_flags flags "$api_port" "$etcd_port" "$PKI" "$ADMISSION_PLUGINS"

  log "starting kube-apiserver on 127.0.0.1:$api_port"
  spawn kube-apiserver "$kas" "${flags[@]}" \
    --audit-policy-file "$STATE/audit-policy.yaml" \
    --audit-log-path "$LOGS/audit.log" --audit-log-maxsize 100 --audit-log-maxbackup 1 \
    "${tracing[@]}"
  write_kubeconfig "$KUBECONFIG_FILE" "$api_port" "$PKI/admin.crt" "$PKI/admin.key" e2e-admin
  write_kubeconfig "$STATE/controller-manager.kubeconfig" "$api_port" \
    "$PKI/controller-manager.crt" "$PKI/controller-manager.key" system:kube-controller-manager
  write_kubeconfig "$STATE/scheduler.kubeconfig" "$api_port" "$PKI/scheduler.crt" "$PKI/scheduler.key" system:kube-scheduler
  write_kubeconfig "$STATE/kwok.kubeconfig" "$api_port" "$PKI/kwok.crt" "$PKI/kwok.key" e2e-kwok
  wait_for "the API server's /readyz" kubectl_ get --raw /readyz

  local -a qps=()
  if [[ -n "${E2E_CLIENT_QPS:-}" ]]; then
    [[ "$E2E_CLIENT_QPS" =~ ^[1-9][0-9]*$ ]] || die "E2E_CLIENT_QPS=$E2E_CLIENT_QPS: expected a positive integer"
    qps=(--kube-api-qps "$E2E_CLIENT_QPS" --kube-api-burst "$((2 * E2E_CLIENT_QPS))")
    log "controller-manager and scheduler client QPS $E2E_CLIENT_QPS (burst $((2 * E2E_CLIENT_QPS)))"
  fi

  log "starting kube-controller-manager (secure port 127.0.0.1:$kcm_port)"
  spawn kube-controller-manager "$kcm" \
    --kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$kcm_port" \
    --cert-dir "$STATE/controller-manager-certs" \
    --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file "$PKI/sa.key" \
    --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --cluster-name pod-director-e2e \
    --profiling=false "${qps[@]}"
  wait_for "kubectl get ns" kubectl_ get ns

  log "starting kube-scheduler (secure port 127.0.0.1:$sched_port)"
  spawn kube-scheduler "$ksched" \
    --kubeconfig "$STATE/scheduler.kubeconfig" \
    --authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
    --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$sched_port" \
    --cert-dir "$STATE/scheduler-certs" \
    --leader-elect=false \
    --profiling=false "${qps[@]}"

  # kwok: the stage files of its "fast" set plus Lease heartbeats (e2e/tools.sh copies them
  # from its module); only the Nodes with the annotation; a /16 of pod IPs (the default /24
  # runs out after 254 pods).
  local -a stage_args=() f
  for f in "$stages"/*.yaml; do stage_args+=(-c "$f"); done
  ((${#stage_args[@]})) || die "no kwok stage files in $stages"
  log "starting kwok (healthz on 127.0.0.1:$kwok_port) for the Nodes annotated $KWOK_NODE_ANNOTATION"
  spawn kwok "$kwok" \
    --kubeconfig "$STATE/kwok.kubeconfig" \
    "${stage_args[@]}" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector="$KWOK_NODE_ANNOTATION" \
    --cidr=10.0.0.0/16 \
    --node-ip=127.0.0.1 \
    --server-address="127.0.0.1:$kwok_port"

  wait_for "the default ServiceAccount" kubectl_ -n default get serviceaccount default
  wait_for "kube-scheduler's /healthz" https_healthy "$sched_port"
  wait_for "kwok's /healthz" http_healthy "$kwok_port"

  settings >"$STATE/settings"
  STARTED=1
  trap - EXIT INT TERM
  log "ready in $((SECONDS - t_start))s (total $((SECONDS - t0))s): KUBECONFIG=$KUBECONFIG_FILE, API server https://127.0.0.1:$api_port"
}

cmd_env() {
  echo "export KUBECONFIG=$KUBECONFIG_FILE"
  echo "export E2E_STATE_DIR=$STATE"
}

cmd_wait_sa() {
  (($#)) || usage
  KUBECTL=$(tool kubectl)
  local ns
  for ns in "$@"; do
    wait_for "ServiceAccount $ns/default" kubectl_ -n "$ns" get serviceaccount default
  done
}

main() {
  (($#)) || usage
  local cmd=$1
  shift
  case "$cmd" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    restart)
      cmd_stop
      cmd_start
      ;;
    status) cmd_status ;;
    env) cmd_env ;;
    wait-sa) cmd_wait_sa "$@" ;;
    plugins-start) cmd_plugins_start ;;
    plugins-stop) cmd_plugins_stop ;;
    plugins-env) cmd_plugins_env ;;
    *) usage ;;
  esac
}

main "$@"
exit
