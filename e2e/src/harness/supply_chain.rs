//! What the release image records of what it is made of, and what it must say.
//!
//! Recorded: the dependency tree `cargo auditable` embeds in the binary (its `.dep-v0` section,
//! read with the `auditable-info` crate) and the image's CycloneDX SBOM (`scripts/sbom.py`,
//! stored beside the image by `scripts/image.sh build`). Expected: Cargo.lock's release graph of
//! pod-director as cargo resolves it now — `cargo tree -p pod-director -e normal,build` (what
//! the release build compiles) and `cargo metadata` (what cargo-auditable reads: the same graph
//! with features unified over the whole workspace, dev-dependencies included, so it can hold a
//! few crates more) — and the Debian packages the image's root filesystem records.
//!
//! Each check returns the differences, one line each, saying what to do; empty when they agree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

/// How a crate takes part in the binary: linked into it, or only run to build it (build
/// scripts, proc-macros and what only they use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Build,
    Runtime,
}

/// A crate by name and version.
pub type CrateId = (String, String);

/// A crate as one of the records or graphs lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crate {
    /// `crates.io`, `local` (a path in the workspace), or cargo's word for another source.
    pub source: String,
    pub kind: Kind,
}

const CRATES_IO: &str = "registry+https://github.com/rust-lang/crates.io-index";
const REBUILD: &str = "the image was not built from this Cargo.lock: rebuild it (scripts/image.sh build)";
/// cargo relinks the binary when one of its own inputs changes, not when only another workspace
/// crate's features change what `cargo metadata` (so cargo-auditable) lists.
const RELINK: &str = "the binary was not built from this Cargo.lock: rebuild it (scripts/image.sh binary; \
                      when only another workspace crate's features changed, touch src/main.rs first: \
                      cargo does not relink for that)";

/// Cargo.lock's release graph of pod-director, as cargo resolves it.
#[derive(Debug, Default)]
pub struct ReleaseGraph {
    /// What the release build compiles (`cargo tree -e normal,build`; runtime: reached through
    /// normal dependencies without passing a proc-macro, as `cargo tree -e normal` shows).
    pub compiled: BTreeMap<CrateId, Crate>,
    /// What cargo-auditable records: `cargo metadata`'s resolve walked from pod-director through
    /// normal and build edges, kinds propagated as cargo-auditable does.
    pub recorded: BTreeMap<CrateId, Crate>,
    /// Each crate's `license` (Cargo.toml) from `cargo metadata`.
    pub licences: BTreeMap<CrateId, String>,
    /// Cargo.lock's checksum of each registry crate.
    pub checksums: BTreeMap<CrateId, String>,
}

/// What `cargo tree --prefix depth --format '{p}'` prints: the root, every crate's dependencies
/// (a crate printed again, `(*)`, has its dependencies under its first line), the proc-macros.
struct Tree {
    root: CrateId,
    edges: BTreeMap<CrateId, BTreeSet<CrateId>>,
    proc_macros: BTreeSet<CrateId>,
}

fn parse_tree(text: &str) -> Result<Tree, String> {
    let mut edges: BTreeMap<CrateId, BTreeSet<CrateId>> = BTreeMap::new();
    let mut proc_macros = BTreeSet::new();
    let mut stack: Vec<CrateId> = Vec::new();
    let mut root = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        let depth: usize = line[..digits]
            .parse()
            .map_err(|_| format!("a cargo tree line without its depth: {line:?}"))?;
        let mut words = line[digits..].split(' ');
        let (Some(name), Some(version)) = (words.next(), words.next().and_then(|v| v.strip_prefix('v'))) else {
            return Err(format!("a cargo tree line without name and version: {line:?}"));
        };
        let id = (name.to_owned(), version.to_owned());
        if line.contains(" (proc-macro)") {
            proc_macros.insert(id.clone());
        }
        edges.entry(id.clone()).or_default();
        if depth == 0 {
            root = Some(id.clone());
            stack = vec![id];
            continue;
        }
        if depth > stack.len() {
            return Err(format!("cargo tree skipped a level at {line:?}"));
        }
        stack.truncate(depth);
        if let Some(parent) = stack.last() {
            edges.entry(parent.clone()).or_default().insert(id.clone());
        }
        stack.push(id);
    }
    let root = root.ok_or("cargo tree printed no root")?;
    Ok(Tree {
        root,
        edges,
        proc_macros,
    })
}

/// The crates cargo metadata lists, by package id: (id, source word, proc-macro).
fn metadata_packages(metadata: &Value) -> BTreeMap<&str, (CrateId, String, bool)> {
    let mut packages = BTreeMap::new();
    for p in metadata["packages"].as_array().into_iter().flatten() {
        let id = (
            p["name"].as_str().unwrap_or_default().to_owned(),
            p["version"].as_str().unwrap_or_default().to_owned(),
        );
        let source = match p["source"].as_str() {
            None => "local".to_owned(),
            Some(CRATES_IO) => "crates.io".to_owned(),
            Some(other) => other.split('+').next().unwrap_or(other).to_owned(),
        };
        let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or_default();
        let proc_macro = targets.len() == 1 && targets[0]["kind"] == serde_json::json!(["proc-macro"]);
        if let Some(key) = p["id"].as_str() {
            packages.insert(key, (id, source, proc_macro));
        }
    }
    packages
}

/// `[[package]]` entries of Cargo.lock: (name, version) → checksum, for those that have one.
fn lock_checksums(lock: &str) -> BTreeMap<CrateId, String> {
    let mut checksums = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(key)
                    .and_then(|r| r.trim_start().strip_prefix('='))
                    .map(|v| v.trim().trim_matches('"').to_owned())
            })
        };
        if let (Some(name), Some(version), Some(checksum)) = (field("name"), field("version"), field("checksum")) {
            checksums.insert((name, version), checksum);
        }
    }
    checksums
}

impl ReleaseGraph {
    /// From `cargo metadata --filter-platform T` (JSON), `cargo tree -p pod-director -e
    /// normal,build --target T --prefix depth --format '{p}'` and the same with `-e normal`, and
    /// Cargo.lock.
    pub fn read(metadata: &str, tree: &str, tree_normal: &str, lock: &str) -> Result<Self, String> {
        let metadata: Value = serde_json::from_str(metadata).map_err(|e| format!("cargo metadata is not JSON: {e}"))?;
        let packages = metadata_packages(&metadata);
        let by_id: BTreeMap<&CrateId, (&String, bool)> =
            packages.values().map(|(id, source, pm)| (id, (source, *pm))).collect();

        let Tree {
            root,
            edges,
            proc_macros,
        } = parse_tree(tree)?;
        let normal_edges = parse_tree(tree_normal)?.edges;
        let mut runtime = BTreeSet::from([root.clone()]);
        let mut todo = vec![root.clone()];
        while let Some(node) = todo.pop() {
            for child in normal_edges.get(&node).into_iter().flatten() {
                if !proc_macros.contains(child) && runtime.insert(child.clone()) {
                    todo.push(child.clone());
                }
            }
        }
        let mut compiled = BTreeMap::new();
        for id in edges.keys() {
            let (source, _) = by_id
                .get(id)
                .ok_or_else(|| format!("cargo tree lists {} {}, cargo metadata does not", id.0, id.1))?;
            let kind = if runtime.contains(id) {
                Kind::Runtime
            } else {
                Kind::Build
            };
            compiled.insert(
                id.clone(),
                Crate {
                    source: (*source).clone(),
                    kind,
                },
            );
        }

        // cargo-auditable's walk: a child's kind is the weaker of its edge's strongest kind and
        // its parent's; a proc-macro is at most Build; development edges are not followed.
        let nodes: BTreeMap<&str, &Value> = metadata["resolve"]["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| Some((n["id"].as_str()?, n)))
            .collect();
        let root_key = packages
            .iter()
            .find(|(_, (id, source, _))| *id == root && source == "local")
            .map(|(key, _)| *key)
            .ok_or("cargo metadata has no pod-director package")?;
        let mut kinds: BTreeMap<&str, Kind> = BTreeMap::from([(root_key, Kind::Runtime)]);
        let mut todo = vec![root_key];
        while let Some(parent) = todo.pop() {
            let parent_kind = kinds[parent];
            for dep in nodes
                .get(parent)
                .and_then(|n| n["deps"].as_array())
                .into_iter()
                .flatten()
            {
                let Some(child) = dep["pkg"].as_str() else { continue };
                let edge = dep["dep_kinds"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|k| match k["kind"].as_str() {
                        None => Some(Kind::Runtime),
                        Some("build") => Some(Kind::Build),
                        _ => None,
                    })
                    .max();
                let Some(edge) = edge else { continue };
                let mut kind = edge.min(parent_kind);
                if packages.get(child).is_some_and(|(_, _, pm)| *pm) {
                    kind = kind.min(Kind::Build);
                }
                if kinds.get(child).is_none_or(|k| kind > *k) {
                    kinds.insert(child, kind);
                    todo.push(child);
                }
            }
        }
        let recorded = kinds
            .iter()
            .filter_map(|(key, kind)| {
                let (id, source, _) = packages.get(key)?;
                Some((
                    id.clone(),
                    Crate {
                        source: source.clone(),
                        kind: *kind,
                    },
                ))
            })
            .collect();
        let licences = metadata["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| {
                Some((
                    (p["name"].as_str()?.to_owned(), p["version"].as_str()?.to_owned()),
                    p["license"].as_str()?.to_owned(),
                ))
            })
            .collect();
        Ok(Self {
            compiled,
            recorded,
            licences,
            checksums: lock_checksums(lock),
        })
    }
}

/// The dependency tree cargo-auditable embedded in `binary`.
pub fn audit_data(binary: &Path) -> Result<BTreeMap<CrateId, Crate>, String> {
    let info = auditable_info::audit_info_from_file(binary, auditable_info::Limits::default())
        .map_err(|e| format!("{}: no dependency data cargo auditable embeds ({e})", binary.display()))?;
    Ok(info
        .packages
        .into_iter()
        .map(|p| {
            let kind = match p.kind {
                auditable_serde::DependencyKind::Runtime => Kind::Runtime,
                auditable_serde::DependencyKind::Build => Kind::Build,
            };
            (
                (p.name, p.version.to_string()),
                Crate {
                    source: String::from(p.source),
                    kind,
                },
            )
        })
        .collect())
}

fn describe(id: &CrateId, c: &Crate) -> String {
    format!("{} {} ({}, {:?})", id.0, id.1, c.source, c.kind)
}

/// The binary's embedded dependency tree against Cargo.lock's release graph: exactly what
/// cargo-auditable reads from `cargo metadata`, and every crate the release build compiles.
pub fn check_audit_data(audit: &BTreeMap<CrateId, Crate>, graph: &ReleaseGraph) -> Vec<String> {
    let mut problems = Vec::new();
    for (id, want) in &graph.recorded {
        match audit.get(id) {
            None => problems.push(format!(
                "{} is in Cargo.lock's release graph (cargo metadata), not in the binary's audit data: {RELINK}",
                describe(id, want)
            )),
            Some(got) if got != want => problems.push(format!(
                "{}: the binary records {} ({:?}), cargo metadata's graph says {} ({:?}): {RELINK}",
                id.0, got.source, got.kind, want.source, want.kind
            )),
            Some(_) => {}
        }
    }
    for (id, got) in audit {
        if !graph.recorded.contains_key(id) {
            problems.push(format!(
                "{} is in the binary's audit data, not in Cargo.lock's release graph: {RELINK}",
                describe(id, got)
            ));
        }
    }
    for (id, c) in &graph.compiled {
        if !audit.contains_key(id) {
            problems.push(format!(
                "{} is compiled into the release build (cargo tree), not in the binary's audit data: {RELINK}",
                describe(id, c)
            ));
        }
    }
    problems
}

/// A crate as the SBOM lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SbomCrate {
    pub kind: Kind,
    pub licence: Option<String>,
    pub purl: Option<String>,
    pub sha256: Option<String>,
}

/// A Debian package as the SBOM lists it: its version and architecture, and its licences, each
/// as (SPDX id or name, Debian's short name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SbomPackage {
    pub version: String,
    pub architecture: String,
    pub licences: Vec<(String, String)>,
}

/// A CycloneDX SBOM of the image.
pub struct Sbom(pub Value);

fn property<'a>(component: &'a Value, name: &str) -> Option<&'a str> {
    component["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .and_then(|p| p["value"].as_str())
}

impl Sbom {
    fn components(&self) -> impl Iterator<Item = &Value> {
        self.0["components"].as_array().into_iter().flatten()
    }

    /// The digest the SBOM says it describes (its `metadata.component`, the image).
    pub fn image_digest(&self) -> Option<String> {
        let component = &self.0["metadata"]["component"];
        (component["type"] == "container")
            .then(|| {
                component["hashes"][0]["content"]
                    .as_str()
                    .map(|h| format!("sha256:{h}"))
            })
            .flatten()
    }

    /// The crates: components with a `pod-director:cargo:dependency-kind` property.
    pub fn crates(&self) -> BTreeMap<CrateId, SbomCrate> {
        self.components()
            .filter_map(|c| {
                let kind = match property(c, "pod-director:cargo:dependency-kind")? {
                    "runtime" => Kind::Runtime,
                    _ => Kind::Build,
                };
                let id = (c["name"].as_str()?.to_owned(), c["version"].as_str()?.to_owned());
                let sbom_crate = SbomCrate {
                    kind,
                    licence: c["licenses"][0]["expression"].as_str().map(str::to_owned),
                    purl: c["purl"].as_str().map(str::to_owned),
                    sha256: c["hashes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|h| h["alg"] == "SHA-256")
                        .and_then(|h| h["content"].as_str())
                        .map(str::to_owned),
                };
                Some((id, sbom_crate))
            })
            .collect()
    }

    /// The Debian packages: components whose purl is `pkg:deb/…`.
    pub fn debian_packages(&self) -> BTreeMap<String, SbomPackage> {
        self.components()
            .filter(|c| c["purl"].as_str().is_some_and(|p| p.starts_with("pkg:deb/")))
            .filter_map(|c| {
                let licences = c["licenses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|l| {
                        let l = &l["license"];
                        let shown = l["id"].as_str().or(l["name"].as_str())?.to_owned();
                        Some((shown, property(l, "pod-director:debian:copyright-license")?.to_owned()))
                    })
                    .collect();
                Some((
                    c["name"].as_str()?.to_owned(),
                    SbomPackage {
                        version: c["version"].as_str()?.to_owned(),
                        architecture: property(c, "pod-director:debian:architecture")?.to_owned(),
                        licences,
                    },
                ))
            })
            .collect()
    }
}

/// Cargo's `license = "MIT/Apache-2.0"` is `MIT OR Apache-2.0`.
fn normalised(licence: &str) -> String {
    licence.split('/').map(str::trim).collect::<Vec<_>>().join(" OR ")
}

/// The SBOM's crates against what the release build compiles: every crate, no other, each with
/// its version, its kind, its licence (Cargo.toml's), and for crates.io ones the purl and
/// Cargo.lock's checksum.
pub fn check_sbom_crates(sbom: &BTreeMap<CrateId, SbomCrate>, graph: &ReleaseGraph) -> Vec<String> {
    let mut problems = Vec::new();
    for (id, want) in &graph.compiled {
        let Some(got) = sbom.get(id) else {
            problems.push(format!(
                "{} is in Cargo.lock's release graph (cargo tree), not in the SBOM: {REBUILD}",
                describe(id, want)
            ));
            continue;
        };
        if got.kind != want.kind {
            problems.push(format!(
                "{} {}: the SBOM says {:?}, cargo tree {:?}",
                id.0, id.1, got.kind, want.kind
            ));
        }
        match (graph.licences.get(id), &got.licence) {
            (Some(want), Some(got)) if normalised(want) == *got => {}
            (want, got) => problems.push(format!(
                "{} {}: the SBOM's licence {got:?} is not Cargo.toml's {want:?}",
                id.0, id.1
            )),
        }
        if want.source == "crates.io" {
            let purl = format!("pkg:cargo/{}@{}", id.0, id.1);
            if got.purl.as_deref() != Some(purl.as_str()) {
                problems.push(format!("{} {}: purl {:?}, want {purl}", id.0, id.1, got.purl));
            }
            if got.sha256.as_ref() != graph.checksums.get(id) {
                problems.push(format!(
                    "{} {}: the SBOM's SHA-256 {:?} is not Cargo.lock's checksum {:?}",
                    id.0,
                    id.1,
                    got.sha256,
                    graph.checksums.get(id)
                ));
            }
        }
    }
    for id in sbom.keys() {
        if !graph.compiled.contains_key(id) {
            problems.push(format!(
                "{} {} is in the SBOM, not in Cargo.lock's release graph (cargo tree): {REBUILD}",
                id.0, id.1
            ));
        }
    }
    problems
}

/// A Debian package a root filesystem records (`var/lib/dpkg/status.d/NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledPackage {
    pub version: String,
    pub architecture: String,
    /// Its `usr/share/doc/NAME/copyright`, when the image has it.
    pub copyright: Option<String>,
}

/// The packages of an unpacked root filesystem, read from its dpkg records (status.d, as
/// distroless and scripts/image.sh write them).
pub fn installed_packages(rootfs: &Path) -> Result<BTreeMap<String, InstalledPackage>, String> {
    let dir = rootfs.join("var/lib/dpkg/status.d");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut packages = BTreeMap::new();
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some() {
            continue; // NAME.md5sums
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let field = |key: &str| {
            text.lines().find_map(|l| {
                l.strip_prefix(key)
                    .and_then(|r| r.strip_prefix(':'))
                    .map(|v| v.trim().to_owned())
            })
        };
        let name = field("Package").ok_or_else(|| format!("{}: no Package field", path.display()))?;
        let copyright = std::fs::read_to_string(rootfs.join("usr/share/doc").join(&name).join("copyright")).ok();
        packages.insert(
            name,
            InstalledPackage {
                version: field("Version").unwrap_or_default(),
                architecture: field("Architecture").unwrap_or_default(),
                copyright,
            },
        );
    }
    Ok(packages)
}

/// The SBOM's Debian packages against the image's: every package, no other, each with its
/// version and architecture and at least one licence, each licence one its copyright file names
/// (a `License:` field, or a /usr/share/common-licenses/ file it points at).
pub fn check_debian_packages(
    sbom: &BTreeMap<String, SbomPackage>,
    image: &BTreeMap<String, InstalledPackage>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, installed) in image {
        let Some(listed) = sbom.get(name) else {
            problems.push(format!(
                "Debian package {name} {} is in the image, not in the SBOM",
                installed.version
            ));
            continue;
        };
        if (&listed.version, &listed.architecture) != (&installed.version, &installed.architecture) {
            problems.push(format!(
                "{name}: the SBOM says {} {}, the image has {} {}",
                listed.version, listed.architecture, installed.version, installed.architecture
            ));
        }
        if listed.licences.is_empty() {
            problems.push(format!("{name}: the SBOM lists no licence"));
        }
        let Some(copyright) = &installed.copyright else {
            problems.push(format!("{name}: the image has no /usr/share/doc/{name}/copyright"));
            continue;
        };
        for (shown, debian) in &listed.licences {
            let named = copyright.lines().any(|l| {
                l.strip_prefix("License:")
                    .is_some_and(|v| v.split_whitespace().any(|w| w == debian))
            }) || copyright.contains(&format!("/usr/share/common-licenses/{debian}"));
            if !named {
                problems.push(format!(
                    "{name}: the SBOM's licence {shown} ({debian}) is not named in its copyright file"
                ));
            }
        }
    }
    for (name, listed) in sbom {
        if !image.contains_key(name) {
            problems.push(format!(
                "Debian package {name} {} is in the SBOM, not in the image",
                listed.version
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests;
