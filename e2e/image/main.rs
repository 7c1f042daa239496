//! The release image, run as the chart's Deployment runs it (`e2e/image/run`, issue 46).
//!
//! `scripts/image.sh build` makes the image (an OCI layout: Debian's packages of distroless
//! cc-debian12, the release binary, the Containerfile's config); this suite plays the kubelet for
//! the chart's pod spec (`helm template` with the suite's values): the ConfigMap, the Secret and
//! the service-account token as read-only bind mounts (`..data` directories, the volumes' modes,
//! the pod's fsGroup), the emptyDir, the user, capabilities, no-new-privileges and read-only root
//! of the securityContexts, args and env as the kubelet expands them; runc runs it on the host's
//! network (loopback). The probes are called as the kubelet calls them, and the chart's webhook
//! configurations point at the container.
//!
//! A second test holds what the image records of what it is made of — the dependency tree `cargo
//! auditable` embeds in the binary and the SBOM stored beside the image — to Cargo.lock's release
//! graph as cargo resolves it now (written by `e2e/image/run`) and to the image's Debian packages.
//!
//! ```sh
//! e2e/image/run        # image build, a loopback cluster, this suite, teardown
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, PostParams};
use pod_director_e2e::fixtures::{Placement, workload};
use pod_director_e2e::harness::container::{AtomicVolume, Container, Probe, Prober, empty_dir, tree_digest};
use pod_director_e2e::harness::oci::{self, Image, PodRuntime, ReleaseStage};
use pod_director_e2e::harness::process::free_local_addr;
use pod_director_e2e::harness::supply_chain::{self, Kind, ReleaseGraph, Sbom};
use pod_director_e2e::harness::{Env, Settings, chart, ensure_namespace, env_var, repo, suffix, tool};
use serde_json::{Value, json};

/// The container of the chart's Deployment.
const CONTAINER: &str = "pod-director";

/// The Deployment of the chart rendered with the suite's values and `sets`.
fn deployment(settings: &Settings, sets: &[String]) -> Value {
    chart::render_template_with(settings, "templates/deployment.yaml", sets)
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the chart renders a Deployment")
}

fn sorted(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items
}

/// The Containerfile's release stage, the built image and the chart's defaults agree on the user,
/// the entrypoint and the ports.
fn assert_image_follows_the_containerfile_and_the_chart(image: &Image, settings: &Settings) {
    let stage = ReleaseStage::read(&repo().join("Containerfile"));
    let rebuild = "the image is not the Containerfile's release stage: rebuild it (scripts/image.sh build)";
    assert_eq!(image.user(), stage.user, "USER: {rebuild}");
    assert_eq!(image.entrypoint(), stage.entrypoint, "ENTRYPOINT: {rebuild}");
    assert_eq!(image.cmd(), stage.cmd, "CMD: {rebuild}");
    assert_eq!(
        sorted(image.exposed_ports()),
        sorted(stage.exposed_ports.clone()),
        "EXPOSE: {rebuild}"
    );

    let defaults = deployment(settings, &[]);
    let spec = &defaults["spec"]["template"]["spec"];
    let container = oci::container(spec, CONTAINER);
    let ports: Vec<String> = container["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "{}/{}",
                p["containerPort"],
                p["protocol"].as_str().unwrap_or("TCP").to_lowercase()
            )
        })
        .collect();
    assert_eq!(
        sorted(ports),
        sorted(stage.exposed_ports.clone()),
        "the chart's containerPorts are the ports the Containerfile exposes"
    );
    let id = |field: &str| {
        let own = &container["securityContext"][field];
        if own.is_null() {
            spec["securityContext"][field].clone()
        } else {
            own.clone()
        }
    };
    assert_eq!(
        format!("{}:{}", id("runAsUser"), id("runAsGroup")),
        stage.user,
        "the chart runs the container as the Containerfile's USER"
    );
    assert!(
        stage.entrypoint.first().is_some_and(|e| e.starts_with('/')),
        "an absolute ENTRYPOINT (no shell, no PATH lookup): {stage:?}"
    );
    let args = container["args"].as_array().expect("the chart passes args");
    assert_eq!(
        args.first().and_then(Value::as_str),
        stage.cmd.first().map(String::as_str),
        "the chart's args start with the Containerfile's CMD subcommand"
    );
}

/// The pod spec with its listen addresses on the host's loopback (the pod IP of a host-network
/// pod here): `--addr=0.0.0.0:P` → `--addr=127.0.0.1:P`. Nothing else of the chart's spec changes.
fn on_loopback(mut spec: Value) -> Value {
    for container in spec["containers"].as_array_mut().into_iter().flatten() {
        for arg in container["args"].as_array_mut().into_iter().flatten() {
            if let Some(text) = arg.as_str()
                && text.contains("=0.0.0.0:")
            {
                *arg = Value::String(text.replace("=0.0.0.0:", "=127.0.0.1:"));
            }
        }
    }
    spec
}

/// The files of a ConfigMap or Secret volume: `items` (key → path) when given, else every key.
fn volume_files(source: &Value, data: &BTreeMap<String, Vec<u8>>) -> Vec<(String, Vec<u8>)> {
    match source["items"].as_array() {
        Some(items) => items
            .iter()
            .map(|item| {
                let key = item["key"].as_str().expect("an item key");
                let content = data.get(key).unwrap_or_else(|| panic!("no key {key}"));
                (item["path"].as_str().expect("an item path").to_owned(), content.clone())
            })
            .collect(),
        None => data.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    }
}

fn as_refs(files: &[(String, Vec<u8>)]) -> Vec<(&str, &[u8])> {
    files.iter().map(|(n, c)| (n.as_str(), c.as_slice())).collect()
}

/// The chart's ServiceAccount, RBAC and audit RBAC, applied with kubectl as a Helm install would.
fn apply_chart_objects(settings: &Settings) {
    let mut objects = Vec::new();
    for template in [
        "templates/serviceaccount.yaml",
        "templates/rbac.yaml",
        "templates/audit-rbac.yaml",
    ] {
        objects.extend(chart::render_template(settings, template));
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let mut child = std::process::Command::new(tool("KUBECTL", "kubectl"))
        .args(["apply", "--server-side", "--field-manager=pod-director-e2e", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("kubectl runs");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("kubectl's stdin");
        stdin.write_all(list.to_string().as_bytes()).expect("objects written");
    }
    assert!(
        child.wait().expect("kubectl ends").success(),
        "kubectl apply of the chart's RBAC"
    );
}

/// A token of the chart's ServiceAccount (TokenRequest, as the kubelet's projected volume gets it).
async fn service_account_token(client: &Client, settings: &Settings) -> String {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let created = Api::<ServiceAccount>::namespaced(client.clone(), &settings.namespace)
        .create_token_request(&settings.fullname, &PostParams::default(), &request)
        .await
        .expect("a token of the chart's ServiceAccount");
    created.status.expect("a TokenRequest status").token
}

/// The kubelet's /etc/hosts, /etc/hostname, /etc/resolv.conf and /dev/termination-log.
fn managed_files(dir: &Path, pod_name: &str) -> BTreeMap<String, PathBuf> {
    let write = |name: &str, text: &str, mode: u32| {
        use std::os::unix::fs::PermissionsExt as _;
        let path = dir.join(name);
        std::fs::write(&path, text).expect("a managed file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("its mode");
        path
    };
    let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    BTreeMap::from([
        (
            "/etc/hosts".to_owned(),
            write(
                "hosts",
                &format!("127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.0.1\t{pod_name}\n"),
                0o644,
            ),
        ),
        (
            "/etc/hostname".to_owned(),
            write("hostname", &format!("{pod_name}\n"), 0o644),
        ),
        ("/etc/resolv.conf".to_owned(), write("resolv.conf", &resolv, 0o644)),
        ("/dev/termination-log".to_owned(), write("termination-log", "", 0o666)),
    ])
}

/// An admission request on an open TLS connection, its body half written: [`HalfWritten::finish`]
/// writes the rest and reads the answer (an in-flight request across SIGTERM).
struct HalfWritten {
    tls: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    rest: Vec<u8>,
}

impl HalfWritten {
    /// Connects to the webhook `url` (trusting `ca_pem`) and writes the head and half the body of
    /// an AdmissionReview for a pod CREATE in `namespace`.
    async fn start(url: &str, ca_pem: &[u8], namespace: &str, uid: &str) -> Self {
        use std::sync::Arc;
        use tokio::io::AsyncWriteExt as _;
        use tokio_rustls::rustls;
        use tokio_rustls::rustls::pki_types::pem::PemObject as _;
        let rest = url.strip_prefix("https://").expect("an https webhook URL");
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from_pem_slice(ca_pem).expect("the webhook CA"))
            .expect("a root certificate");
        let mut config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tcp = tokio::net::TcpStream::connect(authority)
            .await
            .expect("the webhook port accepts");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("a server name");
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .expect("a TLS handshake with the containerised server");
        let pod = serde_json::to_value(workload("in-flight")).expect("a pod");
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": "CREATE",
                "namespace": namespace,
                "name": "in-flight",
                "userInfo": {"username": "e2e"},
                "object": pod,
                "dryRun": true,
            },
        })
        .to_string()
        .into_bytes();
        let path = if path.is_empty() { "/" } else { path };
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            review.len()
        );
        let (first, second) = review.split_at(review.len() / 2);
        tls.write_all(head.as_bytes()).await.expect("the request head written");
        tls.write_all(first).await.expect("half the body written");
        tls.flush().await.expect("flushed");
        Self {
            tls,
            rest: second.to_vec(),
        }
    }

    /// Writes the rest of the body and reads the whole answer.
    async fn finish(mut self) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        self.tls
            .write_all(&self.rest)
            .await
            .expect("the rest of the body written");
        self.tls.flush().await.expect("flushed");
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), self.tls.read_to_end(&mut answer)).await;
        // A peer closing without close_notify is an error after the bytes arrived; keep them.
        let _ = read;
        String::from_utf8_lossy(&answer).into_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_image_runs_as_the_chart_runs_it() {
    let settings = Settings::from_env();
    let state_dir = settings.state_dir.clone().expect("a loopback cluster (e2e/image/run)");
    let layout = env_var("E2E_IMAGE_LAYOUT").expect("E2E_IMAGE_LAYOUT: the OCI layout of scripts/image.sh build");
    let image = Image::open(Path::new(&layout), "release");
    println!("image {layout}:release, {} bytes compressed", image.compressed_size);

    // The Containerfile, the image and the chart's defaults say the same.
    assert_image_follows_the_containerfile_and_the_chart(&image, &settings);

    // The chart's Deployment, on free loopback ports.
    let (webhook_addr, probe_addr) = (free_local_addr(), free_local_addr());
    let sets = [
        format!("containerPorts.webhook={}", webhook_addr.port()),
        format!("containerPorts.probe={}", probe_addr.port()),
    ];
    let deployment = deployment(&settings, &sets);
    let pod_spec = on_loopback(deployment["spec"]["template"]["spec"].clone());
    let container_spec = oci::container(&pod_spec, CONTAINER).clone();
    let grace = Duration::from_secs(pod_spec["terminationGracePeriodSeconds"].as_u64().unwrap_or(30));
    let fs_group = pod_spec["securityContext"]["fsGroup"]
        .as_u64()
        .and_then(|g| u32::try_from(g).ok());

    // The cluster side of a Helm install: the release namespace, ServiceAccount and RBAC.
    let client = Client::try_default().await.expect("a client from KUBECONFIG");
    ensure_namespace(&client, &settings.namespace).await;
    apply_chart_objects(&settings);
    let token = service_account_token(&client, &settings).await;

    // The kubelet's volumes.
    let id = format!("e2e-image-{}", suffix());
    let pod_name = format!("{}-{}", settings.fullname, suffix());
    let run_dir = state_dir.join("image").join(&id);
    std::fs::create_dir_all(&run_dir).expect("the run dir");
    let webhook_dir = state_dir.join("webhook");
    let read = |name: &str| std::fs::read(webhook_dir.join(name)).unwrap_or_else(|e| panic!("webhook/{name}: {e}"));
    let ca = read("ca.crt");
    let rendered = chart::render(&settings, &format!("https://{webhook_addr}"), &ca);
    let config_maps = BTreeMap::from([(
        format!("{}-config", settings.fullname),
        BTreeMap::from([("config.yaml".to_owned(), rendered.config_yaml.clone().into_bytes())]),
    )]);
    let secrets = BTreeMap::from([(
        "pod-director-e2e-tls".to_owned(),
        BTreeMap::from([
            ("tls.crt".to_owned(), read("tls.crt")),
            ("tls.key".to_owned(), read("tls.key")),
        ]),
    )]);
    let config_map_name = format!("{}-config", settings.fullname);
    let mut host_dirs = BTreeMap::new();
    let mut empty_dirs = Vec::new();
    // The volume of the chart's ConfigMap: the one the hot reload updates.
    let mut config_volume = None;
    let mut other_volumes = Vec::new();
    for volume in pod_spec["volumes"].as_array().into_iter().flatten() {
        let name = volume["name"].as_str().expect("a volume name").to_owned();
        let dir = run_dir.join("volumes").join(&name);
        let (source, data) = if let Some(name) = volume["configMap"]["name"].as_str() {
            (&volume["configMap"], config_maps.get(name))
        } else if let Some(name) = volume["secret"]["secretName"].as_str() {
            (&volume["secret"], secrets.get(name))
        } else if volume["emptyDir"].is_object() {
            empty_dirs.push(empty_dir(&dir, fs_group));
            host_dirs.insert(name, dir);
            continue;
        } else {
            panic!("volume {volume} is not played by this harness")
        };
        let data = data.unwrap_or_else(|| panic!("volume {name}: no such ConfigMap or Secret in the suite"));
        let files = volume_files(source, data);
        let mode = source["defaultMode"]
            .as_u64()
            .and_then(|m| u32::try_from(m).ok())
            .unwrap_or(0o644);
        let written = AtomicVolume::new(&dir, &as_refs(&files), mode, fs_group);
        if volume["configMap"]["name"] == config_map_name.as_str() {
            config_volume = Some(written);
        } else {
            other_volumes.push(written);
        }
        host_dirs.insert(name, dir);
    }
    let sa_dir = run_dir.join("volumes/kube-api-access");
    let sa_files = vec![
        ("token".to_owned(), token.into_bytes()),
        (
            "ca.crt".to_owned(),
            std::fs::read(state_dir.join("pki/ca.crt")).expect("the cluster CA"),
        ),
        ("namespace".to_owned(), settings.namespace.clone().into_bytes()),
    ];
    let _sa_volume = AtomicVolume::new(&sa_dir, &as_refs(&sa_files), 0o644, fs_group);
    host_dirs.insert("kube-api-access".to_owned(), sa_dir);
    let managed_dir = run_dir.join("managed");
    std::fs::create_dir_all(&managed_dir).expect("managed files dir");
    let managed = managed_files(&managed_dir, &pod_name);

    // The kubernetes Service, as the kubelet tells every container.
    let api = kube::Config::infer().await.expect("the kubeconfig").cluster_url;
    let (api_host, api_port) = (
        api.host().expect("an API server host").to_owned(),
        api.port_u16().unwrap_or(443).to_string(),
    );
    let service_env = vec![
        ("KUBERNETES_SERVICE_HOST".to_owned(), api_host.clone()),
        ("KUBERNETES_SERVICE_PORT".to_owned(), api_port.clone()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".to_owned(), api_port.clone()),
        ("KUBERNETES_PORT".to_owned(), format!("tcp://{api_host}:{api_port}")),
    ];

    // The bundle: the image's root filesystem and the runtime spec of the chart's pod spec.
    let bundle = run_dir.join("bundle");
    image.unpack(&bundle);
    let spec = oci::runtime_spec(
        &pod_spec,
        &image,
        &PodRuntime {
            container: CONTAINER,
            namespace: &settings.namespace,
            pod_name: &pod_name,
            pod_ip: "127.0.0.1",
            volumes: &host_dirs,
            service_env: &service_env,
            managed_files: &managed,
        },
    );
    std::fs::write(
        bundle.join("config.json"),
        serde_json::to_vec_pretty(&spec).expect("JSON"),
    )
    .expect("config.json written");
    println!("runtime spec: {}", bundle.join("config.json").display());

    // Start; the kubelet's probes from the first moment.
    let logs = state_dir.join("logs");
    std::fs::create_dir_all(&logs).expect("logs dir");
    let mut container = Container::run(&id, &state_dir.join("runc"), &bundle, &logs.join(format!("{id}.log")));
    let liveness = Probe::of(&container_spec, "livenessProbe", "127.0.0.1");
    let readiness = Probe::of(&container_spec, "readinessProbe", "127.0.0.1");
    for probe in [&liveness, &readiness] {
        assert!(
            probe.url.starts_with(&format!("http://{probe_addr}/")),
            "the {} calls the server's probe address {probe_addr} over HTTP: {}",
            probe.kind,
            probe.url
        );
    }
    let mut prober = Prober::start(vec![liveness.clone(), readiness.clone()], container.started);

    // Start-to-ready as a client polling /readyz sees it (the figure in the docs).
    let http = reqwest::Client::new();
    let budget = readiness.budget();
    let mut last = Err("not called yet".to_owned());
    let start_to_ready = loop {
        assert!(
            container.is_running(),
            "the container exited during start-up:\n{}",
            container.tail(40)
        );
        let elapsed = container.started.elapsed();
        assert!(
            elapsed < budget,
            "not ready within the readiness budget {budget:?} (failureThreshold × periodSeconds): \
             GET {} answers {last:?}; the container's log:\n{}",
            readiness.url,
            container.tail(20)
        );
        last = readiness.call(&http).await;
        if last.is_ok() {
            break elapsed;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    println!(
        "start-to-ready: {} ms (runc run until /readyz answers 200)",
        start_to_ready.as_millis()
    );
    // The root filesystem once the runtime has made its mount points (/etc/hosts, the volumes'):
    // from here on, only the process could change it.
    let rootfs_before = tree_digest(&bundle.join("rootfs"));
    // The kubelet's own verdict, on its schedule.
    let ready_at = loop {
        let record = prober.snapshot();
        if let Some(at) = record.ready_at {
            break at;
        }
        assert!(
            container.started.elapsed() < budget + Duration::from_secs(3),
            "the kubelet's readiness probe never succeeded within {budget:?} ({} failures allowed every {:?}): {:?}\n{}",
            readiness.failure_threshold,
            readiness.period,
            record.results,
            container.tail(40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        ready_at < budget,
        "ready at {ready_at:?}, beyond the chart's readiness budget {budget:?}"
    );
    println!(
        "kubelet: ready at {ready_at:?} (budget {budget:?}); liveness budget {:?}",
        liveness.budget()
    );

    // The API server calls the container.
    let env = Env::start_external("image", &rendered, container.lines.clone(), &container.log_file).await;
    env.clean_up_admission_policies();

    // An enforce pod is patched; a dryRun pod is logged and left as it was.
    let enforce = env.namespace(Some("e2e-enforce")).await;
    env.create_admitted_pod(&enforce, &workload("web")).await;
    assert_eq!(
        Placement::of(&env.get_pod(&enforce, "web").await),
        Placement::enforced(),
        "the containerised server patched the enforce pod"
    );
    assert_eq!(env.decision(&enforce, "web", "mutate").await.decision(), "patched");
    let dry_run = env.namespace(Some("e2e-dryrun")).await;
    env.create_admitted_pod(&dry_run, &workload("web")).await;
    assert_eq!(
        Placement::of(&env.get_pod(&dry_run, "web").await),
        Placement::submitted(),
        "dryRun leaves the pod untouched"
    );
    assert_eq!(env.decision(&dry_run, "web", "mutate").await.decision(), "would_patch");

    // A ConfigMap update, as the kubelet makes it: a new ..data generation, one rename. The dryRun
    // group turns enforce; the server reloads the mounted file and patches the next pod.
    let revision = env.loaded_revision().await;
    let mut config: Value = serde_saphyr::from_str(&rendered.config_yaml).expect("the ConfigMap's YAML");
    config["groups"]["e2e-dryrun"]["mode"] = json!("enforce");
    let config_volume = config_volume
        .as_mut()
        .unwrap_or_else(|| panic!("the pod spec mounts no volume of ConfigMap {config_map_name}"));
    config_volume.update(&[("config.yaml", config.to_string().as_bytes())]);
    let reloaded = env.reloaded_from(&revision).await;
    println!("hot reload: revision {revision} → {reloaded}");
    let mut attempt = 0;
    pod_director_e2e::harness::k8s::eventually("a pod of the former dryRun group patched", || {
        attempt += 1;
        let (env, ns, name) = (&env, dry_run.clone(), format!("web-{attempt}"));
        async move {
            env.create_admitted_pod(&ns, &workload(&name)).await;
            (Placement::of(&env.get_pod(&ns, &name).await) == Placement::enforced()).then_some(())
        }
    })
    .await;

    // The probes never failed once ready; no liveness failure at all.
    let record = prober.snapshot();
    assert_eq!(record.restart, None, "the kubelet would have restarted the container");
    assert!(
        record.unready_after_ready.is_empty(),
        "readiness failed after the pod was ready: {:?}",
        record.unready_after_ready
    );
    let liveness_calls = record.results.iter().filter(|(k, _, _)| k == "livenessProbe").count();
    assert!(liveness_calls >= 1, "the liveness probe ran: {:?}", record.results);

    // Termination as the kubelet does it: the preStop sleep (still serving), SIGTERM, and
    // SIGKILL only when terminationGracePeriodSeconds (counted from the preStop) runs out.
    prober.stop();
    let terminating = Instant::now();
    let pre_stop = Duration::from_secs(
        container_spec["lifecycle"]["preStop"]["sleep"]["seconds"]
            .as_u64()
            .unwrap_or(0),
    );
    let during = env.namespace(Some("e2e-enforce")).await;
    env.create_admitted_pod(&during, &workload("during-prestop")).await;
    assert_eq!(
        Placement::of(&env.get_pod(&during, "during-prestop").await),
        Placement::enforced(),
        "still serving during the preStop sleep"
    );
    tokio::time::sleep(pre_stop.saturating_sub(terminating.elapsed())).await;
    // A request in flight across SIGTERM: connected and half written before, finished during the
    // drain; it is answered.
    let mutate_url = rendered
        .mutating
        .webhooks
        .as_ref()
        .and_then(|w| w.first())
        .and_then(|w| w.client_config.url.clone())
        .expect("the chart's mutate webhook URL");
    let in_flight = HalfWritten::start(&mutate_url, &ca, &during, "in-flight-across-sigterm").await;
    container.signal("TERM");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let answer = in_flight.finish().await;
    assert!(
        answer.starts_with("HTTP/1.1 200")
            && answer.contains("in-flight-across-sigterm")
            && answer.contains("\"allowed\":true"),
        "a request in flight at SIGTERM is answered during the drain: {answer}"
    );
    let left = grace.saturating_sub(terminating.elapsed());
    let status = container.wait_exit(left);
    let Some(status) = status else {
        container.signal("KILL");
        panic!(
            "the container did not exit within terminationGracePeriodSeconds ({grace:?}) after SIGTERM:\n{}",
            container.tail(30)
        );
    };
    let drained_in = terminating.elapsed().saturating_sub(pre_stop);
    println!("SIGTERM to exit: {} ms ({status})", drained_in.as_millis());
    assert!(
        status.success(),
        "the server exits 0 after SIGTERM: {status}\n{}",
        container.tail(30)
    );
    let lines = container.lines.snapshot();
    let messages: Vec<&str> = lines.iter().filter_map(|l| l["message"].as_str()).collect();
    assert!(
        messages.contains(&"shutdown signal received; draining in-flight requests")
            && messages.contains(&"pod-director stopped"),
        "the server drained and stopped: {:?}",
        &messages[messages.len().saturating_sub(10)..]
    );
    let signalled = lines
        .iter()
        .position(|l| l["message"] == "shutdown signal received; draining in-flight requests");
    let decided = lines
        .iter()
        .position(|l| l["admission.request.uid"] == "in-flight-across-sigterm");
    assert!(
        matches!((signalled, decided), (Some(s), Some(d)) if d > s),
        "the in-flight request was decided after the signal (line {decided:?}, signal at line {signalled:?})"
    );

    // Nothing was written outside the mounts: the root filesystem is as unpacked, no write
    // failed (EROFS), nothing logged an error.
    let rootfs_after = tree_digest(&bundle.join("rootfs"));
    let changed: Vec<_> = rootfs_before
        .iter()
        .filter(|(path, meta)| rootfs_after.get(*path) != Some(meta))
        .map(|(path, _)| path)
        .chain(rootfs_after.keys().filter(|path| !rootfs_before.contains_key(*path)))
        .collect();
    assert!(
        changed.is_empty(),
        "the container changed its root filesystem: {changed:?}"
    );
    let text = std::fs::read_to_string(&container.log_file).unwrap_or_default();
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Read-only file system") || l.contains("os error 30"))
        .collect();
    assert!(
        refused.is_empty(),
        "the server tried to write outside its mounts (read-only root filesystem):\n{}",
        refused.join("\n")
    );
    let errors: Vec<&Value> = lines.iter().filter(|l| l["level"] == "ERROR").collect();
    assert!(errors.is_empty(), "the server logged errors: {errors:?}");
    for dir in &empty_dirs {
        let written: Vec<PathBuf> = tree_digest(dir).into_keys().collect();
        println!("written to the emptyDir {}: {written:?}", dir.display());
    }
    drop(env);
}

/// A file `e2e/image/run` wrote, named by an environment variable.
fn written_by_run(variable: &str) -> String {
    let path = env_var(variable).unwrap_or_else(|| panic!("{variable}: written by e2e/image/run"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{variable}={path}: {e}"))
}

/// Every disagreement found, grouped: all of them in one failure.
#[derive(Default)]
struct Disagreements(Vec<String>);

impl Disagreements {
    fn add(&mut self, what: &str, problems: Vec<String>) {
        if !problems.is_empty() {
            self.0.push(format!("{what}:\n  {}", problems.join("\n  ")));
        }
    }
}

#[test]
fn the_image_and_its_binary_record_what_they_are_made_of() {
    let layout = env_var("E2E_IMAGE_LAYOUT").expect("E2E_IMAGE_LAYOUT: the OCI layout of scripts/image.sh build");
    let image = Image::open(Path::new(&layout), "release");
    let lock = std::fs::read_to_string(repo().join("Cargo.lock")).expect("Cargo.lock");
    let graph = ReleaseGraph::read(
        &written_by_run("E2E_CARGO_METADATA"),
        &written_by_run("E2E_CARGO_TREE"),
        &written_by_run("E2E_CARGO_TREE_NORMAL"),
        &lock,
    )
    .unwrap_or_else(|e| panic!("Cargo.lock's release graph: {e}"));
    let unpacked = tempfile::tempdir().expect("a temporary directory");
    image.unpack(&unpacked.path().join("bundle"));
    let rootfs = unpacked.path().join("bundle/rootfs");

    // The binary's embedded dependency tree is Cargo.lock's release graph as cargo-auditable
    // reads it (cargo metadata), which holds every crate the release build compiles.
    let entrypoint = image.entrypoint();
    let binary = rootfs.join(entrypoint[0].trim_start_matches('/'));
    let audit = supply_chain::audit_data(&binary).unwrap_or_else(|e| panic!("{e}"));
    let mut disagreements = Disagreements::default();
    disagreements.add(
        "the binary's audit data and Cargo.lock's release graph differ",
        supply_chain::check_audit_data(&audit, &graph),
    );
    let beyond: Vec<String> = audit
        .keys()
        .filter(|id| !graph.compiled.contains_key(*id))
        .map(|(name, version)| format!("{name} {version}"))
        .collect();
    println!(
        "audit data: {} crates ({} runtime); the release build compiles {} of them; cargo metadata's \
         workspace-wide features add {beyond:?}",
        audit.len(),
        audit.values().filter(|c| c.kind == Kind::Runtime).count(),
        graph.compiled.len(),
    );

    // The SBOM is stored beside the image, an artifact whose subject is the image's manifest.
    let referrers = image.referrers("application/vnd.cyclonedx+json");
    assert_eq!(
        referrers.len(),
        1,
        "one CycloneDX SBOM refers to {layout}:{} ({})",
        image.tag,
        image.digest()
    );
    let referrer = &referrers[0];
    assert_eq!(
        referrer.manifest["subject"], image.manifest,
        "the artifact's subject is the image's manifest descriptor"
    );
    assert_eq!(
        referrer.manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(referrer.manifest["artifactType"], "application/vnd.cyclonedx+json");
    assert_eq!(
        referrer.manifest["config"]["mediaType"], "application/vnd.oci.empty.v1+json",
        "an artifact's config is the empty descriptor (OCI 1.1)"
    );
    let [(layer, content)] = referrer.layers.as_slice() else {
        panic!("the SBOM artifact has one layer: {:?}", referrer.manifest["layers"]);
    };
    assert_eq!(layer["mediaType"], "application/vnd.cyclonedx+json");
    let sbom = Sbom(serde_json::from_slice(content).expect("the SBOM is JSON"));
    assert_eq!(sbom.0["bomFormat"], "CycloneDX");
    assert_eq!(sbom.0["specVersion"], "1.6");
    assert_eq!(
        sbom.image_digest().as_deref(),
        Some(image.digest()),
        "the SBOM describes this image"
    );

    // Every crate of the release graph, with its version, kind, licence and checksum.
    let crates = sbom.crates();
    disagreements.add(
        "the SBOM's crates and Cargo.lock's release graph differ",
        supply_chain::check_sbom_crates(&crates, &graph),
    );
    // Every Debian package of the image, with its version and licences from its copyright file.
    let installed = supply_chain::installed_packages(&rootfs).unwrap_or_else(|e| panic!("{e}"));
    let packages = sbom.debian_packages();
    disagreements.add(
        "the SBOM's Debian packages and the image's differ",
        supply_chain::check_debian_packages(&packages, &installed),
    );
    assert!(disagreements.0.is_empty(), "{}", disagreements.0.join("\n"));
    for (name, package) in &packages {
        let licences: Vec<&str> = package.licences.iter().map(|(shown, _)| shown.as_str()).collect();
        println!("  {name} {}: {}", package.version, licences.join(", "));
    }
    println!(
        "SBOM {}: {} crates ({} linked in, {} build-only), {} Debian packages; refers to {}",
        referrer.descriptor["digest"].as_str().unwrap_or_default(),
        crates.len(),
        crates.values().filter(|c| c.kind == Kind::Runtime).count(),
        crates.values().filter(|c| c.kind == Kind::Build).count(),
        packages.len(),
        image.digest()
    );
}
