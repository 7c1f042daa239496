{{/* Chart name. */}}
{{- define "pod-director.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full resource name. Cluster-scoped objects (webhook configurations, ClusterRole)
carry it too, so two releases never share one.
*/}}
{{- define "pod-director.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pod-director.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pod-director.labels" -}}
helm.sh/chart: {{ include "pod-director.chart" . }}
{{ include "pod-director.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pod-director
{{- end }}

{{- define "pod-director.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pod-director.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pod-director.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pod-director.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pod-director.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret the pods mount as /etc/pod-director/tls. */}}
{{- define "pod-director.tlsSecretName" -}}
{{- if eq .Values.certificates.source "existingSecret" }}
{{- required "certificates.existingSecret.name is required when certificates.source is existingSecret" .Values.certificates.existingSecret.name }}
{{- else }}
{{- default (printf "%s-tls" (include "pod-director.fullname" .)) .Values.certificates.secretName }}
{{- end }}
{{- end }}

{{/* DNS names of the webhook Service, for the serving certificate. */}}
{{- define "pod-director.dnsNames" -}}
{{- $svc := include "pod-director.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson }}
{{- end }}

{{/* The configuration document as it is written to the ConfigMap. */}}
{{- define "pod-director.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- if not $cfg.defaultGroup }}
{{- $_ := unset $cfg "defaultGroup" }}
{{- end }}
{{- if and $cfg.namespaceGuard (not $cfg.namespaceGuard.mode) }}
{{- $_ := unset $cfg.namespaceGuard "mode" }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
Groups by the webhook entry they belong to, as JSON:
  {"enforce": [...], "observe": [...], "all": [...], "defaultEntry": "enforce|observe|"}
A group's mode is its own `mode`, else config.defaultMode. dryRun and warn never
block pods, so they share the "observe" entry (failurePolicy Ignore).
*/}}
{{- define "pod-director.groupsByEntry" -}}
{{- $cfg := .Values.config }}
{{- $groups := $cfg.groups | default dict }}
{{- $enforce := list }}
{{- $observe := list }}
{{- range $name := keys $groups | sortAlpha }}
{{- $group := get $groups $name | default dict }}
{{- $mode := $group.mode | default $cfg.defaultMode }}
{{- if eq $mode "enforce" }}
{{- $enforce = append $enforce $name }}
{{- else }}
{{- $observe = append $observe $name }}
{{- end }}
{{- end }}
{{- $defaultEntry := "" }}
{{- with $cfg.defaultGroup }}
{{- if not (hasKey $groups .) }}
{{- fail (printf "config.defaultGroup %q names no group in config.groups (defined: %s)" . (keys $groups | sortAlpha | join ", " | default "none")) }}
{{- end }}
{{- $defaultEntry = ternary "enforce" "observe" (has . $enforce) }}
{{- end }}
{{- dict "enforce" $enforce "observe" $observe "all" (keys $groups | sortAlpha) "defaultEntry" $defaultEntry | toJson }}
{{- end }}

{{/*
The matchCondition `binding-not-by-a-trusted-scheduler` of the /validate entries and the
reservation entry: it lets through only bindings (pods/binding) that a trusted scheduler does
not send — system:kube-scheduler and config.trustedSchedulers (users, and serviceAccounts as
system:serviceaccount:NS:NAME) — and every other request. The server renders the same
(src/cluster/webhooks/reservation.rs); the goldens hold the two equal.
*/}}
{{- define "pod-director.bindingExpression" -}}
{{- $binding := "has(request.subResource) && request.subResource == 'binding'" }}
{{- $trusted := .Values.config.trustedSchedulers | default dict }}
{{- $schedulers := list "system:kube-scheduler" }}
{{- range $user := $trusted.users | default list }}
{{- $schedulers = append $schedulers $user }}
{{- end }}
{{- range $sa := $trusted.serviceAccounts | default list }}
{{- $schedulers = append $schedulers (printf "system:serviceaccount:%s" (replace "/" ":" $sa)) }}
{{- end }}
{{- $quoted := list }}
{{- range $name := $schedulers | uniq | sortAlpha }}
{{- $quoted = append $quoted (printf "'%s'" $name) }}
{{- end }}
{{- printf "!(%s) || !(request.userInfo.username in [%s])" $binding ($quoted | join ", ") }}
{{- end }}

{{/*
The reservation entry (`reservation.<fullname>.pod-director.io`, /validate-reservation), as
JSON {failurePolicy, expression, bindingExpression}, or "" when no group reserves its nodes
(then it is not rendered). The expression is the matchCondition that lets the API server send
only pods that may intrude: a spec.nodeName the request sets, or a toleration without a key or
with a key the groups reserve (tolerations of effect NoSchedule, NoExecute or every effect; not
the node lifecycle keys node.kubernetes.io/*, node.cloudprovider.kubernetes.io/*); a binding
passes it. The bindingExpression is "pod-director.bindingExpression". The server renders the same
(src/cluster/webhooks/reservation.rs); the goldens hold the two equal.
*/}}
{{- define "pod-director.reservationEntry" -}}
{{- $cfg := .Values.config }}
{{- $groups := $cfg.groups | default dict }}
{{- $keys := list }}
{{- $reserving := false }}
{{- $enforced := false }}
{{- range $name := keys $groups | sortAlpha }}
{{- $group := get $groups $name | default dict }}
{{- /* `reserve: {}` reserves too (an empty dict is false to `with`); `reserve: null` does not. */ -}}
{{- if and (hasKey $group "reserve") (not (kindIs "invalid" $group.reserve)) }}
{{- $reserving = true }}
{{- if eq ($group.reserve.mode | default "dryRun") "enforce" }}
{{- $enforced = true }}
{{- end }}
{{- range $t := $group.tolerations | default list }}
{{- $key := $t.key | default "" }}
{{- $effect := $t.effect | default "" }}
{{- if and $key (has $effect (list "" "NoSchedule" "NoExecute")) (not (hasPrefix "node.kubernetes.io/" $key)) (not (hasPrefix "node.cloudprovider.kubernetes.io/" $key)) }}
{{- $keys = append $keys (printf "'%s'" $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if $reserving }}
{{- $binding := "has(request.subResource) && request.subResource == 'binding'" }}
{{- $expression := printf "(%s) || (has(object.spec.nodeName) && (oldObject == null || !has(oldObject.spec.nodeName))) || (has(object.spec.tolerations) && object.spec.tolerations.exists(t, !has(t.key) || t.key == '' || t.key in [%s]))" $binding ($keys | uniq | sortAlpha | join ", ") }}
{{- $bindingExpression := include "pod-director.bindingExpression" . }}
{{- dict "failurePolicy" (ternary .Values.webhook.failurePolicy.enforce "Ignore" $enforced) "expression" $expression "bindingExpression" $bindingExpression | toJson }}
{{- end }}
{{- end }}

{{/*
The in-tree plugins' entries (`in-tree.<mutate|validate>.<fullname>.pod-director.io`, /mutate-in-tree and
/validate-in-tree), as JSON {failurePolicy}, or "" while config.inTreePlugins is not set (then neither is
rendered). `inTreePlugins: {}` sets it, in mode dryRun (the section's own default, not config.defaultMode);
`inTreePlugins: null` does not. failurePolicy: webhook.failurePolicy.enforce in enforce, Ignore in dryRun and
warn. The server renders the same (crates/engine/src/compile/webhook_entries/in_tree.rs); the goldens hold the
two equal.
*/}}
{{- define "pod-director.inTreeEntry" -}}
{{- $cfg := .Values.config }}
{{- if and (hasKey $cfg "inTreePlugins") (not (kindIs "invalid" $cfg.inTreePlugins)) }}
{{- $mode := $cfg.inTreePlugins.mode | default "dryRun" }}
{{- dict "failurePolicy" (ternary .Values.webhook.failurePolicy.enforce "Ignore" (eq $mode "enforce")) | toJson }}
{{- end }}
{{- end }}

{{/*
Namespaces the webhooks never select: configured ones (the server's default list when
the key is absent) + kube-system + the release's own.
*/}}
{{- define "pod-director.excludedNamespaces" -}}
{{- $configured := list "kube-system" "kube-public" "kube-node-lease" }}
{{- if hasKey .Values.config "excludedNamespaces" }}
{{- $configured = .Values.config.excludedNamespaces | default list }}
{{- end }}
{{- concat $configured (list "kube-system" .Release.Namespace) | uniq | sortAlpha | toJson }}
{{- end }}

{{/*
The matchCondition of the validating entries of groups in dryRun and warn (`observe`, and
`default-group` while it follows it; "shadow" in pod-director.webhookEntries): /mutate predicts
the fate of their pod CREATEs, so /validate judges only the sample config.shadowValidation
draws (oneIn16 by default: the pods of one controller in 16, every pod without an owner); every
other request still goes to /validate (bindings, DaemonSets, UPDATEs, pods naming spec.nodeName).
"" with shadowValidation every. The server renders the same
(crates/engine/src/compile/webhook_entries.rs, SHADOW_SAMPLE_CONDITION); the goldens hold the two equal.
*/}}
{{- define "pod-director.shadowSampleExpression" -}}
{{- $sample := .Values.config.shadowValidation | default "oneIn16" }}
{{- $owner := "" }}
{{- if eq $sample "none" }}
{{- $owner = "false" }}
{{- else if ne $sample "every" }}
{{- $suffix := ternary "00" "0" (eq $sample "oneIn256") }}
{{- $owner = printf "(!has(object.metadata.ownerReferences) || size(object.metadata.ownerReferences) == 0 || object.metadata.ownerReferences[0].uid.endsWith(\"%s\"))" $suffix }}
{{- end }}
{{- if $owner -}}
(has(request.subResource) && request.subResource == 'binding') || (request.resource.resource != "pods" || request.operation != "CREATE" || (has(object.spec.nodeName) && object.spec.nodeName != "")) || {{ $owner }}
{{- end }}
{{- end }}

{{/*
The webhook entries, as a JSON list of {name, failurePolicy, matchExpressions, shadow}.
Label selector semantics matter here: `NotIn` also matches namespaces WITHOUT the
label, so every entry for labelled namespaces pairs its condition with the label's
presence (In implies it; the unknown-group entry adds Exists).
  enforce        label In [groups in enforce]             webhook.failurePolicy.enforce (Fail)
  observe        label In [groups in dryRun/warn]         Ignore, always
  default-group  label DoesNotExist (config.defaultGroup)  the default group's entry's policy
  unknown-group  label Exists, NotIn [all groups]         webhook.failurePolicy.unknownGroup (Ignore)
Every entry also has `kubernetes.io/metadata.name NotIn [excluded namespaces]`.
All four are always rendered: an entry with nothing to serve (no group in that mode,
no defaultGroup) selects `kubernetes.io/metadata.name In [none.pod-director.io]`, which
no namespace can match (the API server sets that label to the namespace's name, and
names have no dots). So the server, which keeps these selectors in step with its live
configuration (webhook.reconcile), never needs an entry that does not exist. The
server computes the same function (crates/engine/src/webhook_entries.rs); tests/webhook_selectors/ holds
the goldens both are checked against (scripts/chart-test.sh selectors).
*/}}
{{- define "pod-director.webhookEntries" -}}
{{- $label := .Values.config.namespaceLabel }}
{{- $by := include "pod-director.groupsByEntry" . | fromJson }}
{{- $excluded := dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (include "pod-director.excludedNamespaces" . | fromJsonArray) }}
{{- $nothing := list (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" (list "none.pod-director.io")) $excluded }}
{{- $policies := dict "enforce" .Values.webhook.failurePolicy.enforce "observe" "Ignore" }}
{{- $entries := list }}
{{- range $entry := list "enforce" "observe" }}
{{- $groups := get $by $entry }}
{{- $expressions := $nothing }}
{{- if $groups }}
{{- $expressions = list (dict "key" $label "operator" "In" "values" $groups) $excluded }}
{{- end }}
{{- $entries = append $entries (dict "name" $entry "failurePolicy" (get $policies $entry) "matchExpressions" $expressions "shadow" (eq $entry "observe")) }}
{{- end }}
{{- $default := $nothing }}
{{- if $by.defaultEntry }}
{{- $default = list (dict "key" $label "operator" "DoesNotExist") $excluded }}
{{- end }}
{{- $entries = append $entries (dict "name" "default-group" "failurePolicy" (get $policies ($by.defaultEntry | default "observe")) "matchExpressions" $default "shadow" (ne $by.defaultEntry "enforce")) }}
{{- $unknown := list (dict "key" $label "operator" "Exists") }}
{{- if $by.all }}
{{- $unknown = append $unknown (dict "key" $label "operator" "NotIn" "values" $by.all) }}
{{- end }}
{{- $entries = append $entries (dict "name" "unknown-group" "failurePolicy" .Values.webhook.failurePolicy.unknownGroup "matchExpressions" (append $unknown $excluded) "shadow" false) }}
{{- toJson $entries }}
{{- end }}

{{/* clientConfig of a webhook; argument: (dict "ctx" $ "path" "/mutate" "caBundle" "…") */}}
{{- define "pod-director.clientConfig" -}}
{{- $ctx := .ctx }}
{{- if $ctx.Values.webhook.url }}
url: {{ printf "%s%s" (trimSuffix "/" $ctx.Values.webhook.url) .path | quote }}
{{- else }}
service:
  name: {{ include "pod-director.fullname" $ctx }}
  namespace: {{ $ctx.Release.Namespace }}
  path: {{ .path }}
  port: {{ $ctx.Values.service.port }}
{{- end }}
{{- with .caBundle }}
caBundle: {{ . }}
{{- end }}
{{- end }}

{{/* "true" when the continuous audit runs (audit.interval is not zero). */}}
{{- define "pod-director.auditEnabled" -}}
{{- $interval := toString .Values.audit.interval }}
{{- if not (regexMatch "^0+(\\.0+)?(ms|s|m|h)?$" $interval) }}true{{ end }}
{{- end }}

{{/*
The namespace label guard's two entries, as a JSON list of {name, failurePolicy,
objectSelector}. The API server sends a namespace write to an entry when its old OR its
new labels match the objectSelector, so:
  enforce  namespaces in a group in enforce before or after the write (with an enforced
           defaultGroup: label NotIn [other groups], unlabelled included), failurePolicy
           webhook.failurePolicy.enforce unless namespaceGuard.mode is dryRun/warn;
  observe  the other labelled ones, Ignore unless namespaceGuard.mode is enforce.
So only namespaces of enforce groups become unwritable while pod-director is down. An
entry with nothing to serve selects `kubernetes.io/metadata.name In [none.pod-director.io]`.
The server computes the same (crates/engine/src/webhook_entries.rs guard_object_selectors) and reconciles it.
*/}}
{{- define "pod-director.guardEntries" -}}
{{- $label := .Values.config.namespaceLabel }}
{{- $by := include "pod-director.groupsByEntry" . | fromJson }}
{{- $mode := (.Values.config.namespaceGuard | default dict).mode | default "" }}
{{- $nothing := list (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" (list "none.pod-director.io")) }}
{{- $enforced := $nothing }}
{{- $observed := $nothing }}
{{- if eq $by.defaultEntry "enforce" }}
{{- $enforced = list (dict "key" $label "operator" "NotIn" "values" ($by.observe | default (list "none.pod-director.io"))) }}
{{- if $by.observe }}
{{- $observed = list (dict "key" $label "operator" "In" "values" $by.observe) }}
{{- end }}
{{- else }}
{{- if $by.enforce }}
{{- $enforced = list (dict "key" $label "operator" "In" "values" $by.enforce) }}
{{- end }}
{{- $observed = list (dict "key" $label "operator" "Exists") }}
{{- if $by.enforce }}
{{- $observed = append $observed (dict "key" $label "operator" "NotIn" "values" $by.enforce) }}
{{- end }}
{{- end }}
{{- $enforcePolicy := .Values.webhook.failurePolicy.enforce }}
{{- $entries := list
  (dict "name" "enforce" "failurePolicy" (ternary "Ignore" $enforcePolicy (has $mode (list "dryRun" "warn"))) "matchExpressions" $enforced)
  (dict "name" "observe" "failurePolicy" (ternary $enforcePolicy "Ignore" (eq $mode "enforce")) "matchExpressions" $observed) }}
{{- toJson $entries }}
{{- end }}

{{/*
The names pod-director may give admission policies and bindings, as a JSON list: the server's
object name (src: placement::policy::object_name) of every group of config.groups —
pod-director-<group>, or for a group name that is not a valid object name its lowercase form
with every other character as "-" and the first 8 hex digits of its SHA-256 — plus the names of
the objects pod-director applied before (label app.kubernetes.io/managed-by=pod-director, name
pod-director-*), found by `lookup` at install/upgrade where the API server serves them (none under
`helm template`), so that it may delete those of groups since removed.
*/}}
{{- define "pod-director.admissionPolicyNames" -}}
{{- $names := list }}
{{- range $group := keys (.Values.config.groups | default dict) }}
{{- if regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $group }}
{{- $names = append $names (printf "pod-director-%s" $group) }}
{{- else if $group }}
{{- $cleaned := regexReplaceAll "[^a-zA-Z0-9]" $group "-" | lower | trimAll "-" }}
{{- $names = append $names (printf "pod-director-%s-%s" $cleaned (sha256sum $group | trunc 8)) }}
{{- end }}
{{- end }}
{{- range $kind := list "MutatingAdmissionPolicy" "MutatingAdmissionPolicyBinding" "ValidatingAdmissionPolicy" "ValidatingAdmissionPolicyBinding" }}
{{- if $.Capabilities.APIVersions.Has (printf "admissionregistration.k8s.io/v1/%s" $kind) }}
{{- range $object := (lookup "admissionregistration.k8s.io/v1" $kind "" "").items | default list }}
{{- $labels := $object.metadata.labels | default dict }}
{{- if and (eq (get $labels "app.kubernetes.io/managed-by") "pod-director") (hasPrefix "pod-director-" $object.metadata.name) }}
{{- $names = append $names $object.metadata.name }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $names | uniq | sortAlpha | toJson }}
{{- end }}
