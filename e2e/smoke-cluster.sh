#!/usr/bin/env bash
# Self-test of the loopback control plane (e2e/cluster.sh): starts it, creates
# a namespace, a pod and a Deployment (whose ReplicaSet must create pods: the
# controller-manager works), a kwok node (Ready; the Deployment's pods are bound
# to it and Running: the scheduler and kwok work), registers a MutatingWebhookConfiguration with
# clientConfig.url https://127.0.0.1:PORT/mutate and the helper-generated
# webhook certificate, and checks that the API server calls a stub webhook
# (python3, when present) and applies its JSON Patch. Stops the cluster at
# the end unless E2E_KEEP_CLUSTER=1. State dir: $E2E_STATE_DIR, else
# $CACHE/e2e-smoke-state (not the default cluster's). E2E_KUBE_VERSION selects the
# Kubernetes release (see e2e/cluster.sh).
#
#   e2e/smoke-cluster.sh
#
# Prints "N passed, N failed" at the end.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Its own state dir by default, so that it never stops a cluster in use.
CACHE="${POD_DIRECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pod-director}"
export E2E_STATE_DIR="${E2E_STATE_DIR:-$CACHE/e2e-smoke-state}"
PASSED=0
FAILED=0
STUB_PID=""
NS="smoke-$$"

say() { printf '[smoke] %s\n' "$*" >&2; }
ok() {
  PASSED=$((PASSED + 1))
  say "ok: $*"
}
fail() {
  FAILED=$((FAILED + 1))
  say "FAIL: $*"
}
# check DESCRIPTION CMD...: one test.
check() {
  local what=$1
  shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}

cleanup() {
  local rc=$?
  if [[ -n "$STUB_PID" ]]; then
    kill "$STUB_PID" 2>/dev/null || true
    wait "$STUB_PID" 2>/dev/null || true
  fi
  if [[ "${E2E_KEEP_CLUSTER:-0}" != 1 ]]; then
    "$HERE/cluster.sh" stop || true
  fi
  echo "$PASSED passed, $FAILED failed"
  ((FAILED == 0)) || exit 1
  exit "$rc"
}
trap cleanup EXIT

t0=$SECONDS
"$HERE/cluster.sh" start
say "cluster.sh start took $((SECONDS - t0))s"
eval "$("$HERE/cluster.sh" env)"
KUBECTL=$("$HERE/tools.sh" path kubectl)
k() { "$KUBECTL" "$@"; }

# until_ok SECONDS CMD...: retry CMD for up to SECONDS.
until_ok() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

server_version=$(k version -o json | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -n 1)
check "server version $server_version (not v0.0.0-master)" \
  test "${server_version#v1.}" != "$server_version" -a "${server_version%master*}" = "$server_version"

check "namespace $NS created" k create namespace "$NS"
check "default ServiceAccount in $NS (controller-manager)" "$HERE/cluster.sh" wait-sa "$NS"

if k -n "$NS" run solo --image=registry.invalid/pause:3 --restart=Never >/dev/null; then
  phase=$(k -n "$NS" get pod solo -o jsonpath='{.status.phase}')
  check "pod solo stored, phase '$phase' (Pending)" test "$phase" = Pending
  tols=$(k -n "$NS" get pod solo -o jsonpath='{.spec.tolerations[*].key}')
  check "built-in admission added tolerations ('$tols')" grep -q node.kubernetes.io/not-ready <<<"$tols"
  vols=$(k -n "$NS" get pod solo -o jsonpath='{.spec.volumes[*].name}')
  check "ServiceAccount admission added the token volume ('$vols')" grep -q kube-api-access <<<"$vols"
else
  fail "kubectl run"
fi

k -n "$NS" create deployment web --image=registry.invalid/pause:3 --replicas=2 >/dev/null
web_pods_are_2() { [[ $(k -n "$NS" get pods -l app=web -o name | wc -l) -eq 2 ]]; }
if until_ok 60 web_pods_are_2; then
  ok "Deployment -> ReplicaSet -> 2 pods (controller-manager works)"
else
  fail "the Deployment's pods did not appear"
  k -n "$NS" get deploy,rs,pods >&2 || true
fi

# --- scheduling: a kwok node; the scheduler binds the pods, kwok runs them -------
NODE="smoke-node-$$"
check "kwok node $NODE created" k create -f - <<EOF
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "$NODE", "annotations": {"kwok.x-k8s.io/node": "fake"}}}
EOF
check "node $NODE Ready (kwok)" k wait --for=condition=Ready "node/$NODE" --timeout=60s
web_pods_run_on_node() {
  [[ "$(k -n "$NS" get pods -l app=web -o jsonpath='{range .items[*]}{.spec.nodeName}/{.status.phase} {end}')" == \
    "$NODE/Running $NODE/Running " ]]
}
if until_ok 60 web_pods_run_on_node; then
  ok "the Deployment's pods bound to $NODE (kube-scheduler) and Running (kwok)"
else
  fail "the Deployment's pods did not run on $NODE"
  k -n "$NS" get pods -o wide >&2 || true
fi
check "node $NODE deleted" k delete node "$NODE"

# --- a url webhook on loopback, with the helper-generated certificate -----------
WH="$E2E_STATE_DIR/webhook"
PORT_FILE=$(mktemp)
if command -v python3 >/dev/null; then
  # A stub that adds the label smoke=patched to every pod it is asked about.
  python3 - "$WH/tls.crt" "$WH/tls.key" "$PORT_FILE" <<'EOF' &
import base64, http.server, json, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        patch = [{"op": "add", "path": "/metadata/labels", "value": {"smoke": "patched"}}]
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True, "patchType": "JSONPatch",
                         "patch": base64.b64encode(json.dumps(patch).encode()).decode()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
open(sys.argv[3], "w").write(str(srv.server_address[1]))
srv.serve_forever()
EOF
  STUB_PID=$!
  until_ok 10 test -s "$PORT_FILE" || true
fi
PORT=$(cat "$PORT_FILE")
rm -f "$PORT_FILE"
PORT=${PORT:-9} # nothing listens there: the configuration is still accepted

CA_BUNDLE=$(base64 -w0 <"$WH/ca.crt")
if k apply -f - >/dev/null <<EOF; then
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: smoke-$NS
webhooks:
- name: smoke.pod-director.invalid
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 5
  clientConfig:
    url: https://127.0.0.1:$PORT/mutate
    caBundle: $CA_BUNDLE
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: $NS}
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [pods]
EOF
  ok "MutatingWebhookConfiguration with clientConfig.url https://127.0.0.1:$PORT/mutate accepted"
else
  fail "MutatingWebhookConfiguration rejected"
fi

if [[ -n "$STUB_PID" ]]; then
  # The configuration takes effect asynchronously: retry the create briefly.
  if until_ok 20 k -n "$NS" run hooked --image=registry.invalid/pause:3 --restart=Never; then
    label=$(k -n "$NS" get pod hooked -o jsonpath='{.metadata.labels.smoke}')
    check "the API server called the url webhook over TLS and applied its patch (smoke=$label)" \
      test "$label" = patched
  else
    fail "pod creation through the stub webhook failed"
    k -n "$NS" run hooked2 --image=registry.invalid/pause:3 --restart=Never >&2 || true
  fi
else
  say "python3 missing: skipped the webhook round trip"
fi
check "webhook configuration deleted" k delete mutatingwebhookconfiguration "smoke-$NS"
