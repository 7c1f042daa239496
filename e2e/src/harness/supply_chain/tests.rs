use super::*;
use serde_json::json;

/// cargo metadata of a small workspace: `app` (local) depends on serde (which uses the
/// proc-macro serde_derive, itself on syn), log, cc (a build-dependency) and proptest (a
/// dev-dependency); a dev-dependency's features switch on serde's optional `webpki` edge, which
/// `cargo metadata` shows and `cargo tree` of the release build does not.
fn metadata() -> String {
    let package = |name: &str, version: &str, source: Option<&str>, kind: &str, license: &str| {
        json!({
            "name": name, "version": version, "id": format!("{name} {version}"), "source": source,
            "license": license, "targets": [{"kind": [kind]}],
        })
    };
    let dep = |pkg: &str, kinds: &[Option<&str>]| json!({"pkg": pkg, "dep_kinds": kinds.iter().map(|k| json!({"kind": k})).collect::<Vec<_>>()});
    json!({
        "packages": [
            package("app", "0.1.0", None, "bin", "Apache-2.0"),
            package("serde", "1.0.0", Some(CRATES_IO), "lib", "MIT/Apache-2.0"),
            package("serde_derive", "1.0.0", Some(CRATES_IO), "proc-macro", "MIT OR Apache-2.0"),
            package("syn", "2.0.0", Some(CRATES_IO), "lib", "MIT OR Apache-2.0"),
            package("log", "0.4.0", Some(CRATES_IO), "lib", "MIT"),
            package("cc", "1.0.0", Some(CRATES_IO), "lib", "MIT"),
            package("proptest", "1.0.0", Some(CRATES_IO), "lib", "MIT"),
            package("webpki", "1.0.0", Some(CRATES_IO), "lib", "CDLA-Permissive-2.0"),
        ],
        "resolve": {"root": "app 0.1.0", "nodes": [
            {"id": "app 0.1.0", "deps": [
                dep("serde 1.0.0", &[None]), dep("log 0.4.0", &[None]),
                dep("cc 1.0.0", &[Some("build")]), dep("proptest 1.0.0", &[Some("dev")]),
            ]},
            {"id": "serde 1.0.0", "deps": [dep("serde_derive 1.0.0", &[None]), dep("webpki 1.0.0", &[None])]},
            {"id": "serde_derive 1.0.0", "deps": [dep("syn 2.0.0", &[None])]},
            {"id": "syn 2.0.0", "deps": []},
            {"id": "log 0.4.0", "deps": [dep("serde 1.0.0", &[None])]},
            {"id": "cc 1.0.0", "deps": []},
            {"id": "proptest 1.0.0", "deps": [dep("log 0.4.0", &[None])]},
            {"id": "webpki 1.0.0", "deps": []},
        ]},
    })
    .to_string()
}

const TREE: &str = "0app v0.1.0 (/src)\n1serde v1.0.0\n2serde_derive v1.0.0 (proc-macro)\n3syn v2.0.0\n\
                    1log v0.4.0\n2serde v1.0.0 (*)\n1cc v1.0.0\n";
const TREE_NORMAL: &str = "0app v0.1.0 (/src)\n1serde v1.0.0\n2serde_derive v1.0.0 (proc-macro)\n3syn v2.0.0\n1log v0.4.0\n2serde v1.0.0 (*)\n";
const LOCK: &str = "version = 4\n\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n\n\
                    [[package]]\nname = \"serde\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"aa\"\n\n\
                    [[package]]\nname = \"log\"\nversion = \"0.4.0\"\nchecksum = \"bb\"\n\n\
                    [[package]]\nname = \"cc\"\nversion = \"1.0.0\"\nchecksum = \"cc\"\n\n\
                    [[package]]\nname = \"serde_derive\"\nversion = \"1.0.0\"\nchecksum = \"dd\"\n\n\
                    [[package]]\nname = \"syn\"\nversion = \"2.0.0\"\nchecksum = \"ee\"\n";

fn id(name: &str, version: &str) -> CrateId {
    (name.to_owned(), version.to_owned())
}

fn graph() -> ReleaseGraph {
    ReleaseGraph::read(&metadata(), TREE, TREE_NORMAL, LOCK).expect("the fixture reads")
}

fn kinds(crates: &BTreeMap<CrateId, Crate>) -> Vec<(&str, Kind)> {
    crates.iter().map(|(id, c)| (id.0.as_str(), c.kind)).collect()
}

/// The SBOM scripts/sbom.py writes for the fixture's release graph.
fn sbom_crates(graph: &ReleaseGraph) -> BTreeMap<CrateId, SbomCrate> {
    graph
        .compiled
        .iter()
        .map(|(id, c)| {
            let registry = c.source == "crates.io";
            let sbom_crate = SbomCrate {
                kind: c.kind,
                licence: graph.licences.get(id).map(|l| normalised(l)),
                purl: registry.then(|| format!("pkg:cargo/{}@{}", id.0, id.1)),
                sha256: if registry {
                    graph.checksums.get(id).cloned()
                } else {
                    None
                },
            };
            (id.clone(), sbom_crate)
        })
        .collect()
}

#[test]
fn the_release_graph_is_what_cargo_tree_compiles_and_cargo_metadata_a_little_more() {
    let graph = graph();
    assert_eq!(
        kinds(&graph.compiled),
        vec![
            ("app", Kind::Runtime),
            ("cc", Kind::Build),
            ("log", Kind::Runtime),
            ("serde", Kind::Runtime),
            ("serde_derive", Kind::Build),
            ("syn", Kind::Build),
        ],
        "a build-dependency, a proc-macro and what only the proc-macro uses are build-only; no dev-dependency"
    );
    assert_eq!(
        kinds(&graph.recorded),
        vec![
            ("app", Kind::Runtime),
            ("cc", Kind::Build),
            ("log", Kind::Runtime),
            ("serde", Kind::Runtime),
            ("serde_derive", Kind::Build),
            ("syn", Kind::Build),
            ("webpki", Kind::Runtime),
        ],
        "cargo metadata's graph adds what features unified over the workspace switch on; still no dev-dependency"
    );
    assert_eq!(graph.compiled[&id("app", "0.1.0")].source, "local");
    assert_eq!(
        graph.checksums.get(&id("serde", "1.0.0")).map(String::as_str),
        Some("aa")
    );
}

#[test]
fn audit_data_equal_to_cargo_metadata_s_graph_passes_and_any_difference_is_named() {
    let graph = graph();
    assert_eq!(check_audit_data(&graph.recorded, &graph), Vec::<String>::new());

    let mut stale = graph.recorded.clone();
    stale.remove(&id("log", "0.4.0"));
    let problems = check_audit_data(&stale, &graph);
    assert!(
        problems.iter().any(
            |p| p.starts_with("log 0.4.0 (crates.io, Runtime) is in Cargo.lock's release graph")
                && p.contains("rebuild it")
        ),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("log 0.4.0") && p.contains("compiled into the release build")),
        "{problems:?}"
    );

    let mut wrong_kind = graph.recorded.clone();
    wrong_kind.get_mut(&id("syn", "2.0.0")).expect("syn").kind = Kind::Runtime;
    let problems = check_audit_data(&wrong_kind, &graph);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("syn: the binary records crates.io (Runtime)"),
        "{problems:?}"
    );
}

#[test]
fn a_dependency_added_to_cargo_lock_without_a_rebuild_fails_the_sbom_and_the_audit_data() {
    let before = graph();
    let sbom = sbom_crates(&before);
    let audit = before.recorded.clone();
    assert_eq!(check_sbom_crates(&sbom, &before), Vec::<String>::new());

    // itoa joins the release graph (Cargo.lock and the tree); the image is not rebuilt.
    let mut metadata: Value = serde_json::from_str(&metadata()).expect("JSON");
    metadata["packages"].as_array_mut().expect("packages").push(json!({
        "name": "itoa", "version": "1.0.0", "id": "itoa 1.0.0", "source": CRATES_IO,
        "license": "MIT OR Apache-2.0", "targets": [{"kind": ["lib"]}],
    }));
    metadata["resolve"]["nodes"]
        .as_array_mut()
        .expect("nodes")
        .push(json!({"id": "itoa 1.0.0", "deps": []}));
    metadata["resolve"]["nodes"][0]["deps"]
        .as_array_mut()
        .expect("app's deps")
        .push(json!({"pkg": "itoa 1.0.0", "dep_kinds": [{"kind": null}]}));
    let lock = format!("{LOCK}\n[[package]]\nname = \"itoa\"\nversion = \"1.0.0\"\nchecksum = \"ff\"\n");
    let after = ReleaseGraph::read(
        &metadata.to_string(),
        &format!("{TREE}1itoa v1.0.0\n"),
        &format!("{TREE_NORMAL}1itoa v1.0.0\n"),
        &lock,
    )
    .expect("reads");

    let problems = check_sbom_crates(&sbom, &after);
    assert_eq!(
        problems,
        vec![
            "itoa 1.0.0 (crates.io, Runtime) is in Cargo.lock's release graph (cargo tree), not in the SBOM: \
             the image was not built from this Cargo.lock: rebuild it (scripts/image.sh build)"
        ]
    );
    let problems = check_audit_data(&audit, &after);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems.iter().all(|p| p.starts_with("itoa 1.0.0")), "{problems:?}");
}

#[test]
fn each_sbom_crate_carries_cargo_toml_s_licence_its_purl_and_cargo_lock_s_checksum() {
    let graph = graph();
    let good = sbom_crates(&graph);
    assert_eq!(
        good[&id("serde", "1.0.0")].licence.as_deref(),
        Some("MIT OR Apache-2.0")
    );

    let mut sbom = good.clone();
    let serde = sbom.get_mut(&id("serde", "1.0.0")).expect("serde");
    serde.licence = Some("MIT".to_owned());
    serde.sha256 = Some("00".to_owned());
    serde.purl = None;
    sbom.get_mut(&id("cc", "1.0.0")).expect("cc").kind = Kind::Runtime;
    sbom.insert(
        id("extra", "0.1.0"),
        SbomCrate {
            kind: Kind::Runtime,
            licence: None,
            purl: None,
            sha256: None,
        },
    );
    let problems = check_sbom_crates(&sbom, &graph);
    for expected in [
        "serde 1.0.0: the SBOM's licence Some(\"MIT\") is not Cargo.toml's Some(\"MIT/Apache-2.0\")",
        "serde 1.0.0: purl None, want pkg:cargo/serde@1.0.0",
        "serde 1.0.0: the SBOM's SHA-256 Some(\"00\") is not Cargo.lock's checksum Some(\"aa\")",
        "cc 1.0.0: the SBOM says Runtime, cargo tree Build",
        "extra 0.1.0 is in the SBOM, not in Cargo.lock's release graph (cargo tree)",
    ] {
        assert!(
            problems.iter().any(|p| p.starts_with(expected)),
            "{expected} in {problems:?}"
        );
    }
    assert_eq!(problems.len(), 5, "{problems:?}");
}

#[test]
fn debian_packages_are_held_to_the_image_s_records_and_copyright_files() {
    let installed = |version: &str, copyright: Option<&str>| InstalledPackage {
        version: version.to_owned(),
        architecture: "amd64".to_owned(),
        copyright: copyright.map(str::to_owned),
    };
    let image = BTreeMap::from([
        (
            "netbase".to_owned(),
            installed(
                "6.4",
                Some("Format: https://x/copyright-format/1.0/\n\nFiles: *\nLicense: GPL-2\n"),
            ),
        ),
        (
            "libc6".to_owned(),
            installed("2.36-9", Some("see /usr/share/common-licenses/LGPL-2.1 and GPL-2\n")),
        ),
    ]);
    let listed = |version: &str, licences: &[(&str, &str)]| SbomPackage {
        version: version.to_owned(),
        architecture: "amd64".to_owned(),
        licences: licences
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect(),
    };
    let good = BTreeMap::from([
        ("netbase".to_owned(), listed("6.4", &[("GPL-2.0-only", "GPL-2")])),
        ("libc6".to_owned(), listed("2.36-9", &[("LGPL-2.1-only", "LGPL-2.1")])),
    ]);
    assert_eq!(check_debian_packages(&good, &image), Vec::<String>::new());

    let bad = BTreeMap::from([
        ("netbase".to_owned(), listed("6.3", &[("MIT", "Expat")])),
        (
            "tzdata".to_owned(),
            listed("2026b", &[("public-domain", "public-domain")]),
        ),
    ]);
    let problems = check_debian_packages(&bad, &image);
    assert_eq!(
        problems,
        vec![
            "Debian package libc6 2.36-9 is in the image, not in the SBOM",
            "netbase: the SBOM says 6.3 amd64, the image has 6.4 amd64",
            "netbase: the SBOM's licence MIT (Expat) is not named in its copyright file",
            "Debian package tzdata 2026b is in the SBOM, not in the image",
        ]
    );

    let unlicensed = BTreeMap::from([("netbase".to_owned(), listed("6.4", &[]))]);
    let mut no_copyright = image.clone();
    no_copyright.remove("libc6");
    no_copyright.insert("netbase".to_owned(), installed("6.4", None));
    assert_eq!(
        check_debian_packages(&unlicensed, &no_copyright),
        vec![
            "netbase: the SBOM lists no licence",
            "netbase: the image has no /usr/share/doc/netbase/copyright"
        ]
    );
}

#[test]
fn a_cargo_tree_it_cannot_read_is_an_error_not_an_empty_graph() {
    for (tree, expected) in [
        ("", "cargo tree printed no root"),
        ("app v0.1.0\n", "without its depth"),
        ("0app v0.1.0\n2deep v1.0.0\n", "skipped a level"),
        ("0app\n", "without name and version"),
    ] {
        let error = ReleaseGraph::read(&metadata(), tree, TREE_NORMAL, LOCK).expect_err(tree);
        assert!(error.contains(expected), "{tree:?}: {error}");
    }
}
