//! The container image and the OCI runtime spec a kubelet would hand its runtime: the image
//! config read from an OCI image layout (`scripts/image.sh build`), the Containerfile's release
//! stage read independently of that script, and a pod spec (the chart's Deployment) turned into
//! a `config.json` for runc, with the kubelet's rules for args, env, users and mounts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// An image of an OCI image layout, by tag.
pub struct Image {
    pub layout: PathBuf,
    pub tag: String,
    /// The descriptor of its manifest (mediaType, digest, size; the index's annotations left out).
    pub manifest: Value,
    /// The image configuration's `config` (User, Entrypoint, Cmd, Env, ExposedPorts, Labels, WorkingDir).
    pub config: Value,
    /// The manifest's layers (compressed sizes summed).
    pub compressed_size: u64,
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    let (algorithm, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
    layout.join("blobs").join(algorithm).join(hex)
}

impl Image {
    pub fn open(layout: &Path, tag: &str) -> Self {
        let index = read_json(&layout.join("index.json"));
        let manifest = index["manifests"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
            .unwrap_or_else(|| panic!("{} has no image tagged {tag}", layout.display()));
        let descriptor = json!({
            "mediaType": manifest["mediaType"],
            "digest": manifest["digest"],
            "size": manifest["size"],
        });
        let manifest = read_json(&blob(layout, manifest["digest"].as_str().expect("a digest")));
        let config = read_json(&blob(
            layout,
            manifest["config"]["digest"].as_str().expect("a config digest"),
        ));
        let compressed_size = manifest["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["size"].as_u64())
            .sum::<u64>()
            + manifest["config"]["size"].as_u64().unwrap_or(0);
        Self {
            layout: layout.to_owned(),
            tag: tag.to_owned(),
            manifest: descriptor,
            config: config["config"].clone(),
            compressed_size,
        }
    }

    fn strings(&self, field: &str) -> Vec<String> {
        self.config[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    pub fn user(&self) -> &str {
        self.config["User"].as_str().unwrap_or("")
    }

    pub fn entrypoint(&self) -> Vec<String> {
        self.strings("Entrypoint")
    }

    pub fn cmd(&self) -> Vec<String> {
        self.strings("Cmd")
    }

    pub fn env(&self) -> Vec<String> {
        self.strings("Env")
    }

    /// `8443/tcp`, … in the image's order (JSON object order is kept).
    pub fn exposed_ports(&self) -> Vec<String> {
        self.config["ExposedPorts"]
            .as_object()
            .map(|ports| ports.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub fn working_dir(&self) -> String {
        self.config["WorkingDir"].as_str().unwrap_or("/").to_owned()
    }

    /// The manifest's digest, `sha256:…`.
    pub fn digest(&self) -> &str {
        self.manifest["digest"].as_str().unwrap_or_default()
    }

    /// The artifacts of type `artifact_type` that refer to this image (OCI 1.1: a manifest in the
    /// layout's index whose `subject` is this image's manifest), each blob read and its digest
    /// and size checked.
    pub fn referrers(&self, artifact_type: &str) -> Vec<Referrer> {
        let index = read_json(&self.layout.join("index.json"));
        let mut referrers = Vec::new();
        for descriptor in index["manifests"].as_array().into_iter().flatten() {
            if descriptor["artifactType"] != artifact_type {
                continue;
            }
            let bytes = read_blob(&self.layout, descriptor);
            let manifest: Value = serde_json::from_slice(&bytes).expect("an artifact manifest is JSON");
            if manifest["subject"]["digest"] != self.manifest["digest"] {
                continue;
            }
            let layers = manifest["layers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|layer| (layer.clone(), read_blob(&self.layout, layer)))
                .collect();
            referrers.push(Referrer {
                descriptor: descriptor.clone(),
                manifest,
                layers,
            });
        }
        referrers
    }

    /// Unpacks the image into `bundle/rootfs` (`umoci unpack`, as root: owners as in the layers).
    pub fn unpack(&self, bundle: &Path) {
        let output = std::process::Command::new("umoci")
            .arg("unpack")
            .arg("--image")
            .arg(format!("{}:{}", self.layout.display(), self.tag))
            .arg(bundle)
            .output()
            .expect("umoci runs (scripts/image.sh packages installs it)");
        assert!(
            output.status.success(),
            "umoci unpack failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// An artifact that refers to an image: its descriptor in the index, its manifest, and its layers
/// (descriptor, content).
pub struct Referrer {
    pub descriptor: Value,
    pub manifest: Value,
    pub layers: Vec<(Value, Vec<u8>)>,
}

/// The blob a descriptor names, checked against the descriptor's digest and size.
fn read_blob(layout: &Path, descriptor: &Value) -> Vec<u8> {
    use sha2::Digest as _;
    let digest = descriptor["digest"].as_str().expect("a descriptor has a digest");
    let path = blob(layout, digest);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let actual = format!("sha256:{:x}", sha2::Sha256::digest(&bytes));
    assert_eq!(
        actual,
        digest,
        "{}: the blob's content is not its digest",
        path.display()
    );
    assert_eq!(
        Some(bytes.len() as u64),
        descriptor["size"].as_u64(),
        "{}: the descriptor's size",
        path.display()
    );
    bytes
}

/// The Containerfile's release stage: what its image config must be.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReleaseStage {
    pub user: String,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `8443/tcp`, … in the order of the EXPOSE lines.
    pub exposed_ports: Vec<String>,
}

impl ReleaseStage {
    /// Reads the `FROM … AS release` stage of the Containerfile at `path` (continuation lines
    /// joined, comments skipped; ENTRYPOINT and CMD in exec form).
    pub fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let mut lines = Vec::new();
        let mut current = String::new();
        for line in text.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with('#') || trimmed.is_empty() {
                continue;
            }
            if let Some(head) = trimmed.strip_suffix('\\') {
                current.push_str(head);
                current.push(' ');
                continue;
            }
            current.push_str(trimmed);
            lines.push(std::mem::take(&mut current));
        }
        let mut stage = ReleaseStage::default();
        let mut in_release = false;
        for line in lines {
            let (instruction, rest) = line.split_once(' ').unwrap_or((&line, ""));
            let rest = rest.trim();
            match instruction.to_ascii_uppercase().as_str() {
                "FROM" => in_release = rest.to_ascii_lowercase().ends_with(" as release"),
                _ if !in_release => {}
                "USER" => stage.user = rest.to_owned(),
                "EXPOSE" => stage.exposed_ports.extend(rest.split_whitespace().map(|p| {
                    if p.contains('/') {
                        p.to_owned()
                    } else {
                        format!("{p}/tcp")
                    }
                })),
                "ENTRYPOINT" => {
                    stage.entrypoint =
                        serde_json::from_str(rest).expect("ENTRYPOINT in exec form (no shell in the image)")
                }
                "CMD" => stage.cmd = serde_json::from_str(rest).expect("CMD in exec form"),
                _ => {}
            }
        }
        assert!(
            !stage.user.is_empty(),
            "{} has a release stage with a USER",
            path.display()
        );
        stage
    }
}

/// What the kubelet knows beyond the pod spec.
pub struct PodRuntime<'a> {
    /// The container of the pod spec to run.
    pub container: &'a str,
    pub namespace: &'a str,
    pub pod_name: &'a str,
    /// The pod's IP (host network: the node's; here loopback).
    pub pod_ip: &'a str,
    /// Host directory of each volume of the pod spec, prepared by the caller (the kubelet's volume
    /// plugins), plus `kube-api-access` for the service-account token.
    pub volumes: &'a BTreeMap<String, PathBuf>,
    /// The environment the kubelet adds for the `kubernetes` Service (KUBERNETES_SERVICE_HOST, …).
    pub service_env: &'a [(String, String)],
    /// Files the kubelet bind-mounts into every container: /etc/hosts, /etc/hostname,
    /// /etc/resolv.conf, /dev/termination-log.
    pub managed_files: &'a BTreeMap<String, PathBuf>,
}

/// Where the kubelet mounts the service-account token (`automountServiceAccountToken`).
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The container `name` of a pod spec.
pub fn container<'a>(pod_spec: &'a Value, name: &str) -> &'a Value {
    pod_spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("the pod spec has no container {name}"))
}

/// The container port named `name` (a probe's `port: probe`), or `port` itself when it is a number.
pub fn container_port(container: &Value, port: &Value) -> u16 {
    if let Some(number) = port.as_u64() {
        return u16::try_from(number).expect("a port");
    }
    let name = port.as_str().expect("a port name or number");
    container["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .and_then(|p| p["containerPort"].as_u64())
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or_else(|| panic!("the container has no port named {name}"))
}

/// `$(VAR)` references expanded as the kubelet does (`$$` escapes, unknown references kept).
pub fn expand(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match vars.get(name) {
                Some(value) => out.push_str(value),
                None => out.push_str(&rest[at..at + 2 + end + 1]),
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A numeric user or `uid:gid` of the image (distroless: numeric; a name would need /etc/passwd).
fn image_ids(user: &str) -> (Option<u32>, Option<u32>) {
    let (uid, gid) = user.split_once(':').unwrap_or((user, ""));
    (uid.parse().ok(), gid.parse().ok())
}

/// The OCI runtime spec (`config.json`, rootfs `rootfs`) of the container as the kubelet and a
/// CRI runtime would start it. Panics on what a kubelet would refuse (runAsNonRoot and uid 0)
/// and on what this harness does not play (other volume kinds, hostPath, …).
pub fn runtime_spec(pod_spec: &Value, image: &Image, runtime: &PodRuntime<'_>) -> Value {
    let container = container(pod_spec, runtime.container);
    let pod_security = &pod_spec["securityContext"];
    let security = &container["securityContext"];
    let setting = |field: &str| {
        let own = &security[field];
        if own.is_null() { &pod_security[field] } else { own }
    };

    // The user: the container's, else the pod's, else the image's USER.
    let (image_uid, image_gid) = image_ids(image.user());
    let uid = setting("runAsUser")
        .as_u64()
        .map(|u| u32::try_from(u).expect("a uid"))
        .or(image_uid)
        .unwrap_or(0);
    let gid = setting("runAsGroup")
        .as_u64()
        .map(|g| u32::try_from(g).expect("a gid"))
        .or(image_gid)
        .unwrap_or(0);
    if setting("runAsNonRoot").as_bool() == Some(true) {
        assert_ne!(
            uid, 0,
            "the kubelet refuses to start the container: runAsNonRoot and the image will run as root"
        );
    }
    let mut additional_gids: Vec<u32> = pod_security["supplementalGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_u64().and_then(|g| u32::try_from(g).ok()))
        .collect();
    if let Some(fs_group) = pod_security["fsGroup"].as_u64().and_then(|g| u32::try_from(g).ok()) {
        additional_gids.insert(0, fs_group);
    }

    // The environment: the image's, the Service variables, then the container's (in order, each
    // value expanded with the ones before it).
    let mut vars = BTreeMap::new();
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |name: String, value: String, vars: &mut BTreeMap<String, String>| {
        vars.insert(name.clone(), value.clone());
        env.retain(|(n, _)| n != &name);
        env.push((name, value));
    };
    for item in image.env() {
        let (name, value) = item.split_once('=').unwrap_or((&item, ""));
        set(name.to_owned(), value.to_owned(), &mut vars);
    }
    set("HOSTNAME".to_owned(), runtime.pod_name.to_owned(), &mut vars);
    for (name, value) in runtime.service_env {
        set(name.clone(), value.clone(), &mut vars);
    }
    for item in container["env"].as_array().into_iter().flatten() {
        let name = item["name"].as_str().expect("an env name").to_owned();
        let value = if let Some(value) = item["value"].as_str() {
            expand(value, &vars)
        } else if let Some(path) = item["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            match path {
                "metadata.namespace" => runtime.namespace.to_owned(),
                "metadata.name" => runtime.pod_name.to_owned(),
                "status.podIP" | "status.hostIP" => runtime.pod_ip.to_owned(),
                other => panic!("fieldRef {other} is not played by this harness"),
            }
        } else {
            panic!("env {name}: only value and fieldRef are played by this harness: {item}")
        };
        set(name, value, &mut vars);
    }

    // Args: command replaces ENTRYPOINT, args replace CMD; both expanded.
    let strings = |value: &Value| -> Option<Vec<String>> {
        value.as_array().map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str())
                .map(|s| expand(s, &vars))
                .collect()
        })
    };
    let mut args = strings(&container["command"]).unwrap_or_else(|| image.entrypoint());
    args.extend(strings(&container["args"]).unwrap_or_else(|| image.cmd()));

    // Capabilities: the runtime's default set minus `drop`, plus `add`.
    let drop: Vec<String> = strings(&security["capabilities"]["drop"]).unwrap_or_default();
    let add: Vec<String> = strings(&security["capabilities"]["add"]).unwrap_or_default();
    let mut capabilities: Vec<String> = if drop.iter().any(|c| c == "ALL") {
        Vec::new()
    } else {
        DEFAULT_CAPABILITIES
            .iter()
            .filter(|c| !drop.iter().any(|d| c.ends_with(d.as_str())))
            .map(|c| (*c).to_owned())
            .collect()
    };
    capabilities.extend(add.iter().map(|c| format!("CAP_{c}")));

    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc"}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]}),
        json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
        json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]}),
    ];
    for (destination, source) in runtime.managed_files {
        let writable = destination == "/dev/termination-log";
        mounts.push(bind(destination, source, !writable));
    }
    let volumes: BTreeMap<&str, &Value> = pod_spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v["name"].as_str()?, v)))
        .collect();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let name = mount["name"].as_str().expect("a volume mount name");
        let volume = volumes
            .get(name)
            .unwrap_or_else(|| panic!("volumeMount {name} names no volume"));
        assert!(
            mount["subPath"].is_null(),
            "volume {name} is mounted with subPath: kubelet never updates such a file"
        );
        let source = runtime
            .volumes
            .get(name)
            .unwrap_or_else(|| panic!("volume {name} ({volume}) has no host directory"));
        let destination = mount["mountPath"].as_str().expect("a mountPath");
        // ConfigMap, Secret, projected and downwardAPI volumes are read-only whatever the mount says.
        let read_only = mount["readOnly"].as_bool() == Some(true)
            || ["configMap", "secret", "projected", "downwardAPI"]
                .iter()
                .any(|kind| !volume[*kind].is_null());
        mounts.push(bind(destination, source, read_only));
    }
    if pod_spec["automountServiceAccountToken"].as_bool() != Some(false) {
        let source = runtime
            .volumes
            .get("kube-api-access")
            .expect("the service-account token directory");
        mounts.push(bind(SERVICE_ACCOUNT_DIR, source, true));
    }

    let mut linux = json!({
        // No network namespace: the pod runs on the host's network (here: loopback only).
        "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "mount"}],
        "maskedPaths": [
            "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
            "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
        ],
        "readonlyPaths": [
            "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
        ],
    });
    if let Some(limit) = container["resources"]["limits"]["memory"]
        .as_str()
        .and_then(quantity_bytes)
    {
        linux["resources"] = json!({"memory": {"limit": limit}});
    }

    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": uid, "gid": gid, "additionalGids": additional_gids},
            "args": args,
            "env": env.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>(),
            "cwd": container["workingDir"].as_str().map_or_else(|| image.working_dir(), str::to_owned),
            "capabilities": {
                "bounding": capabilities, "effective": capabilities, "permitted": capabilities,
                "inheritable": [], "ambient": [],
            },
            // No rlimits: raising one needs CAP_SYS_RESOURCE, which this sandbox lacks.
            "noNewPrivileges": security["allowPrivilegeEscalation"].as_bool() == Some(false),
        },
        "root": {"path": "rootfs", "readonly": security["readOnlyRootFilesystem"].as_bool() == Some(true)},
        "mounts": mounts,
        "linux": linux,
    })
}

/// The capabilities containerd and CRI-O grant a container unless told otherwise.
const DEFAULT_CAPABILITIES: [&str; 14] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

fn bind(destination: &str, source: &Path, read_only: bool) -> Value {
    let mode = if read_only { "ro" } else { "rw" };
    json!({
        "destination": destination,
        "type": "bind",
        "source": source,
        "options": ["rbind", "rprivate", "nosuid", "nodev", mode],
    })
}

/// Bytes of a Kubernetes memory quantity (`256Mi`, `1G`, `1048576`).
pub fn quantity_bytes(quantity: &str) -> Option<u64> {
    let units: [(&str, u64); 8] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    for (suffix, factor) in units {
        if let Some(number) = quantity.strip_suffix(suffix) {
            return number.parse::<u64>().ok()?.checked_mul(factor);
        }
    }
    quantity.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(user: &str) -> Image {
        Image {
            layout: PathBuf::new(),
            tag: "release".to_owned(),
            manifest: Value::Null,
            config: json!({
                "User": user,
                "Entrypoint": ["/usr/local/bin/pod-director"],
                "Cmd": ["serve"],
                "Env": ["PATH=/usr/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],
                "WorkingDir": "/home/nonroot",
            }),
            compressed_size: 0,
        }
    }

    /// A layout with an image tagged `release` and `artifacts` (artifactType, subject digest or
    /// None for the image's, content) written the way scripts/image.sh attaches its SBOM.
    fn layout(dir: &Path, artifacts: &[(&str, Option<&str>, &[u8])]) -> Image {
        use sha2::Digest as _;
        let blobs = dir.join("blobs/sha256");
        std::fs::create_dir_all(&blobs).expect("blobs");
        let put = |bytes: &[u8]| {
            let hex = format!("{:x}", sha2::Sha256::digest(bytes));
            std::fs::write(blobs.join(&hex), bytes).expect("a blob");
            json!({"digest": format!("sha256:{hex}"), "size": bytes.len()})
        };
        let config = put(br#"{"config":{"User":"65532:65532"}}"#);
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config["digest"], "size": config["size"]},
            "layers": [],
        }))
        .expect("JSON");
        let image = put(&manifest);
        let mut manifests = vec![json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": image["digest"], "size": image["size"],
            "annotations": {"org.opencontainers.image.ref.name": "release"},
        })];
        for (artifact_type, subject, content) in artifacts {
            let layer = put(content);
            let subject = subject.map_or(image["digest"].clone(), |d| json!(d));
            let artifact = serde_json::to_vec(&json!({
                "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "artifactType": artifact_type,
                "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": put(b"{}")["digest"], "size": 2},
                "layers": [{"mediaType": artifact_type, "digest": layer["digest"], "size": layer["size"]}],
                "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": subject, "size": image["size"]},
            }))
            .expect("JSON");
            let descriptor = put(&artifact);
            manifests.push(json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json", "artifactType": artifact_type,
                "digest": descriptor["digest"], "size": descriptor["size"],
            }));
        }
        let index = json!({"schemaVersion": 2, "manifests": manifests});
        std::fs::write(dir.join("index.json"), index.to_string()).expect("index.json");
        Image::open(dir, "release")
    }

    #[test]
    fn the_referrers_of_an_image_are_the_artifacts_of_that_type_whose_subject_it_is() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let other = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
        let image = layout(
            dir.path(),
            &[
                ("application/vnd.cyclonedx+json", None, b"{\"bomFormat\":\"CycloneDX\"}"),
                (
                    "application/vnd.cyclonedx+json",
                    Some(other),
                    b"{\"of\":\"another image\"}",
                ),
                ("application/spdx+json", None, b"{\"spdxVersion\":\"SPDX-2.3\"}"),
            ],
        );
        assert_eq!(
            image.manifest["mediaType"],
            "application/vnd.oci.image.manifest.v1+json"
        );
        assert!(image.manifest.get("annotations").is_none(), "{}", image.manifest);
        let referrers = image.referrers("application/vnd.cyclonedx+json");
        assert_eq!(referrers.len(), 1, "another image's SBOM is not this one's");
        assert_eq!(referrers[0].manifest["subject"], image.manifest);
        assert_eq!(referrers[0].layers[0].1, b"{\"bomFormat\":\"CycloneDX\"}");
        assert_eq!(image.referrers("application/spdx+json").len(), 1);
        assert!(image.referrers("application/vnd.in-toto+json").is_empty());
    }

    #[test]
    #[should_panic(expected = "the blob's content is not its digest")]
    fn a_referrer_whose_blob_does_not_match_its_digest_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let image = layout(dir.path(), &[("application/vnd.cyclonedx+json", None, b"{}{}")]);
        let referrer = &image.referrers("application/vnd.cyclonedx+json")[0];
        let digest = referrer.layers[0].0["digest"].as_str().expect("a digest").to_owned();
        std::fs::write(
            dir.path().join("blobs/sha256").join(&digest["sha256:".len()..]),
            b"tampered",
        )
        .expect("written");
        image.referrers("application/vnd.cyclonedx+json");
    }

    /// A pod spec shaped like the chart's Deployment.
    fn pod_spec() -> Value {
        json!({
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 2000},
            "containers": [{
                "name": "app",
                "args": ["serve", "--namespace=$(POD_NAMESPACE)", "--addr=127.0.0.1:8443"],
                "env": [
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "ATTRS", "value": "ns=$(POD_NAMESPACE),pod=$(HOSTNAME)"},
                ],
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "capabilities": {"drop": ["ALL"]},
                },
                "resources": {"limits": {"memory": "256Mi"}},
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/app/config"},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }],
            "volumes": [
                {"name": "config", "configMap": {"name": "app-config"}},
                {"name": "tmp", "emptyDir": {}},
            ],
        })
    }

    fn spec_of(pod_spec: &Value, image: &Image) -> Value {
        let volumes = BTreeMap::from([
            ("config".to_owned(), PathBuf::from("/host/config")),
            ("tmp".to_owned(), PathBuf::from("/host/tmp")),
            ("kube-api-access".to_owned(), PathBuf::from("/host/sa")),
        ]);
        let service_env = [("KUBERNETES_SERVICE_HOST".to_owned(), "127.0.0.1".to_owned())];
        runtime_spec(
            pod_spec,
            image,
            &PodRuntime {
                container: "app",
                namespace: "ns1",
                pod_name: "app-xyz",
                pod_ip: "127.0.0.1",
                volumes: &volumes,
                service_env: &service_env,
                managed_files: &BTreeMap::new(),
            },
        )
    }

    #[test]
    fn the_pod_spec_becomes_the_runtime_spec_a_kubelet_would_start() {
        let spec = spec_of(&pod_spec(), &image("65532:65532"));
        let process = &spec["process"];
        assert_eq!(
            process["user"],
            json!({"uid": 65532, "gid": 65532, "additionalGids": [2000]})
        );
        assert_eq!(
            process["args"],
            json!([
                "/usr/local/bin/pod-director",
                "serve",
                "--namespace=ns1",
                "--addr=127.0.0.1:8443"
            ]),
            "ENTRYPOINT kept, CMD replaced by args, $(VAR) expanded"
        );
        let env: Vec<&str> = process["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        assert!(env.contains(&"ATTRS=ns=ns1,pod=app-xyz"), "{env:?}");
        assert!(
            env.contains(&"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"),
            "the image's Env: {env:?}"
        );
        assert!(env.contains(&"KUBERNETES_SERVICE_HOST=127.0.0.1"), "{env:?}");
        assert_eq!(process["cwd"], "/home/nonroot");
        assert_eq!(process["capabilities"]["bounding"], json!([]), "drop: [ALL]");
        assert_eq!(process["noNewPrivileges"], true);
        assert!(
            process.get("rlimits").is_none(),
            "no rlimits: this sandbox may not raise them"
        );
        assert_eq!(spec["root"], json!({"path": "rootfs", "readonly": true}));
        assert_eq!(spec["linux"]["resources"]["memory"]["limit"], 256 << 20);
        let namespaces: Vec<&Value> = spec["linux"]["namespaces"].as_array().into_iter().flatten().collect();
        assert!(!namespaces.iter().any(|n| n["type"] == "network"), "the host's network");
        let mount = |destination: &str| {
            spec["mounts"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["destination"] == destination)
                .cloned()
                .unwrap_or_else(|| panic!("no mount at {destination}"))
        };
        let options = |destination: &str| mount(destination)["options"].clone();
        assert!(
            options("/etc/app/config")
                .as_array()
                .is_some_and(|o| o.contains(&json!("ro"))),
            "a ConfigMap is read-only even without readOnly: true"
        );
        assert!(
            options("/tmp").as_array().is_some_and(|o| o.contains(&json!("rw"))),
            "an emptyDir is writable"
        );
        assert_eq!(mount(SERVICE_ACCOUNT_DIR)["source"], "/host/sa");
    }

    #[test]
    #[should_panic(expected = "runAsNonRoot and the image will run as root")]
    fn run_as_non_root_refuses_an_image_running_as_root() {
        let mut spec = pod_spec();
        spec["securityContext"] = json!({"runAsNonRoot": true});
        spec_of(&spec, &image("0"));
    }

    #[test]
    fn without_run_as_user_the_image_user_runs() {
        let mut spec = pod_spec();
        spec["securityContext"] = json!({"runAsNonRoot": true});
        let spec = spec_of(&spec, &image("65532:65532"));
        assert_eq!(
            spec["process"]["user"],
            json!({"uid": 65532, "gid": 65532, "additionalGids": []})
        );
    }

    #[test]
    fn references_expand_as_the_kubelet_does() {
        let vars = BTreeMap::from([("A".to_owned(), "x".to_owned())]);
        assert_eq!(expand("k=$(A),n=$(B)", &vars), "k=x,n=$(B)");
        assert_eq!(expand("$$(A) $ $(A", &vars), "$(A) $ $(A");
    }

    #[test]
    fn memory_quantities() {
        assert_eq!(quantity_bytes("256Mi"), Some(256 << 20));
        assert_eq!(quantity_bytes("1G"), Some(1_000_000_000));
        assert_eq!(quantity_bytes("12"), Some(12));
        assert_eq!(quantity_bytes("x"), None);
    }

    #[test]
    fn the_release_stage_is_read_from_the_containerfile() {
        let stage = ReleaseStage::read(&super::super::repo().join("Containerfile"));
        assert!(
            stage.entrypoint.first().is_some_and(|e| e.ends_with("pod-director")),
            "{stage:?}"
        );
        assert!(!stage.exposed_ports.is_empty(), "{stage:?}");
    }
}
