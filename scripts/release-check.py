#!/usr/bin/env python3
"""The release workflow carries every step that makes a release verifiable (issue 55), checked
statically: signing, attestations and provenance need GitHub's OIDC token and a registry, so
none of it can run here.

    scripts/release-check.py              check .github/workflows/release.yml and the Containerfile
    scripts/release-check.py --self-test  remove each required step (and break each rule) in a
                                          copy, and see the check fail with the rule it broke

What it requires:
- every action pinned by a full commit digest, its release in a `# vX.Y.Z` comment;
- `permissions: {}` (or read-only) at the top and an explicit `permissions:` in every job, with
  each write scope only in the jobs that use it: `id-token: write` where cosign or an attestation
  signs, `attestations: write` where actions/attest-* runs, `packages: write` where the job logs
  in to ghcr.io to push, `contents: write` where the GitHub release is created;
- the image job: the build (by digest), the SBOM of the pushed image (`scripts/image.sh sbom`),
  the image signed (`cosign sign`), the SBOM attested (`cosign attest --type cyclonedx`), the
  build provenance (actions/attest-build-provenance on the build's digest), the SBOM uploaded;
- the manifest job: the multi-arch index signed, the SBOMs attested on it, its provenance;
- the chart job: the chart pushed, signed and its provenance attested (OCI and archive);
- the release job: the SBOMs published with the release;
- cosign installed (sigstore/cosign-installer) in every job before it runs;
- the Containerfile's release and debug binaries built by `scripts/image.sh binary` (cargo
  auditable), and that command running `cargo auditable build`.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github/workflows/release.yml"
CONTAINERFILE = ROOT / "Containerfile"
IMAGE_SH = ROOT / "scripts/image.sh"

PIN = re.compile(r"^\s*(?:-\s+)?uses:\s*([^\s@#]+)@(\S+)\s*(?:#\s*(\S+))?\s*$")
ATTEST_ACTIONS = ("actions/attest-build-provenance", "actions/attest-sbom", "actions/attest")


def uses(step: dict) -> str:
    return str(step.get("uses", "")).split("@")[0]


def run(step: dict) -> str:
    return str(step.get("run", ""))


def check_pins(text: str) -> list[str]:
    problems = []
    for n, line in enumerate(text.splitlines(), 1):
        if not re.match(r"^\s*(?:-\s+)?uses:", line):
            continue
        m = PIN.match(line)
        if not m:
            problems.append(f"pinned: line {n}: `{line.strip()}` is not `uses: OWNER/REPO@<40-hex digest> # vX.Y.Z`")
            continue
        action, ref, comment = m.groups()
        if action.startswith("./"):
            continue
        if not re.fullmatch(r"[0-9a-f]{40}", ref):
            problems.append(f"pinned: line {n}: {action}@{ref} is not pinned by a full commit digest")
        elif not comment or not re.fullmatch(r"v\d+(\.\d+){0,2}", comment):
            problems.append(f"pinned: line {n}: {action}@{ref} has no `# vX.Y.Z` comment naming its release")
    return problems


def job_needs(job: dict) -> dict[str, bool]:
    """The write scopes a job's steps use."""
    steps = job.get("steps") or []
    cosign = any(re.search(r"\bcosign\s+(sign|attest)\b", run(s)) for s in steps)
    attests = any(uses(s) in ATTEST_ACTIONS for s in steps)
    ghcr_login = any(
        (uses(s) == "docker/login-action" and "ghcr.io" in str((s.get("with") or {}).get("registry", "")))
        or re.search(r"helm registry login ghcr\.io", run(s))
        for s in steps
    )
    release = any(re.search(r"\bgh release (create|upload)\b", run(s)) for s in steps)
    return {"id-token": cosign or attests, "attestations": attests, "packages": ghcr_login, "contents": release}


def check_permissions(workflow: dict) -> list[str]:
    problems = []
    top = workflow.get("permissions")
    if top is None:
        problems.append("permissions: no top-level `permissions:` (the default token may write everywhere): set `permissions: {}`")
    elif top != {} and (not isinstance(top, dict) or any(v != "read" for v in top.values())):
        problems.append(f"permissions: the top-level permissions {top!r} grant writes; grant them per job")
    for name, job in (workflow.get("jobs") or {}).items():
        granted = job.get("permissions")
        if not isinstance(granted, dict):
            problems.append(f"permissions: job {name} has no explicit `permissions:` map")
            continue
        needs = job_needs(job)
        for scope, value in granted.items():
            if value == "write" and not needs.get(scope, False):
                problems.append(f"permissions: job {name} grants `{scope}: write` it does not use")
            elif value not in ("read", "write", "none"):
                problems.append(f"permissions: job {name}: `{scope}: {value}`")
        for scope, needed in needs.items():
            if needed and granted.get(scope) != "write":
                problems.append(f"permissions: job {name} needs `{scope}: write`")
    return problems


def find(steps: list, predicate) -> int | None:
    return next((i for i, s in enumerate(steps) if predicate(s)), None)


def check_steps(workflow: dict) -> list[str]:
    problems = []
    jobs = workflow.get("jobs") or {}

    def require(job_name: str, what: str, predicate) -> int | None:
        steps = (jobs.get(job_name) or {}).get("steps") or []
        index = find(steps, predicate)
        if index is None:
            problems.append(f"steps: job {job_name} does not {what}")
        return index

    def provenance_of(output: str):
        return lambda s: uses(s) == "actions/attest-build-provenance" and output in str(
            (s.get("with") or {}).get("subject-digest", "")
        )

    # The image job: build by digest, SBOM, signature, SBOM attestation, provenance.
    require("image", "build and push the image (docker/build-push-action, id: build)",
            lambda s: uses(s) == "docker/build-push-action" and s.get("id") == "build")
    require("image", "generate the pushed image's SBOM (scripts/image.sh sbom)", lambda s: "scripts/image.sh sbom" in run(s))
    require("image", "sign the image by digest (cosign sign … @$DIGEST, the build's digest)",
            lambda s: re.search(r"\bcosign sign\b.*@\$DIGEST", run(s))
            and "steps.build.outputs.digest" in str((s.get("env") or {}).get("DIGEST", "")))
    require("image", "attest the SBOM (cosign attest --type cyclonedx --predicate … @$DIGEST)",
            lambda s: re.search(r"\bcosign attest\b(?=.*--type cyclonedx)(?=.*--predicate)", run(s)))
    require("image", "attest the build provenance of the build's digest (actions/attest-build-provenance)",
            provenance_of("steps.build.outputs.digest"))
    require("image", "upload the SBOM for the release (actions/upload-artifact of the .cdx.json)",
            lambda s: uses(s) == "actions/upload-artifact" and ".cdx.json" in str((s.get("with") or {}).get("path", "")))
    # The multi-arch index.
    require("manifest", "sign the multi-arch index (cosign sign … @$DIGEST of steps.index)",
            lambda s: re.search(r"\bcosign sign\b", run(s)) and "steps.index.outputs.digest" in str((s.get("env") or {}).get("DIGEST", "")))
    require("manifest", "attest the SBOMs on the multi-arch index (cosign attest --type cyclonedx)",
            lambda s: re.search(r"\bcosign attest\b(?=.*--type cyclonedx)", run(s)))
    require("manifest", "attest the build provenance of the multi-arch index", provenance_of("steps.index.outputs.digest"))
    # The chart.
    require("chart", "push the chart (helm push)", lambda s: "helm push" in run(s))
    require("chart", "sign the chart (cosign sign $REPOSITORY@$DIGEST of the push)",
            lambda s: re.search(r"\bcosign sign\b", run(s)) and "steps.push.outputs.digest" in str((s.get("env") or {}).get("DIGEST", "")))
    require("chart", "attest the build provenance of the OCI chart", provenance_of("steps.push.outputs.digest"))
    require("chart", "attest the build provenance of the chart archive (subject-path)",
            lambda s: uses(s) == "actions/attest-build-provenance" and (s.get("with") or {}).get("subject-path"))
    # The release.
    require("github-release", "publish the SBOMs with the release (gh release create … .cdx.json)",
            lambda s: re.search(r"\bgh release create\b.*\.cdx\.json", run(s), re.S))
    # cosign is installed before it runs, in each job.
    for name, job in jobs.items():
        steps = job.get("steps") or []
        first_cosign = find(steps, lambda s: re.search(r"\bcosign\s", run(s)))
        if first_cosign is None:
            continue
        installer = find(steps, lambda s: uses(s) == "sigstore/cosign-installer")
        if installer is None or installer > first_cosign:
            problems.append(f"steps: job {name} runs cosign before installing it (sigstore/cosign-installer)")
    return problems


def check_build(containerfile: str, image_sh: str) -> list[str]:
    problems = []
    for stage in ("build-release", "build-debug"):
        m = re.search(rf"^FROM\s+\S+\s+AS\s+{stage}\s*$(.*?)(?=^FROM\s|\Z)", containerfile, re.M | re.S | re.I)
        if not m or "scripts/image.sh binary" not in m.group(1):
            problems.append(f"auditable: the Containerfile's {stage} stage does not build with `scripts/image.sh binary` (cargo auditable)")
    m = re.search(r"^cmd_binary\(\) \{(.*?)^\}", image_sh, re.M | re.S)
    commands = [l for l in (m.group(1) if m else "").splitlines() if not l.lstrip().startswith(("#", "log "))]
    if not any(re.search(r"\bauditable build --release --locked -p pod-director --bin pod-director\b", l) for l in commands):
        problems.append("auditable: scripts/image.sh binary does not run `cargo auditable build --release --locked`")
    return problems


def check(workflow_text: str, containerfile: str, image_sh: str) -> list[str]:
    try:
        workflow = yaml.safe_load(workflow_text)
    except yaml.YAMLError as e:
        return [f"yaml: {e}"]
    if not isinstance(workflow, dict):
        return ["yaml: the workflow is not a mapping"]
    return [*check_pins(workflow_text), *check_permissions(workflow), *check_steps(workflow), *check_build(containerfile, image_sh)]


# ---- self-test ---------------------------------------------------------------------------------


def remove_step(text: str, job: str, marker: str) -> str:
    """`text` without the step of job `job` whose lines contain `marker` (the first one)."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, l in enumerate(lines) if l.rstrip() == f"  {job}:")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^  \S", lines[i])), len(lines))
    step_starts = [i for i in range(start, end) if lines[i].startswith("      - ")]
    for k, s in enumerate(step_starts):
        e = step_starts[k + 1] if k + 1 < len(step_starts) else end
        if any(marker in l for l in lines[s:e]):
            return "".join(lines[:s] + lines[e:])
    raise AssertionError(f"no step of job {job} contains {marker!r}")


def self_test() -> None:
    workflow, containerfile, image_sh = WORKFLOW.read_text(), CONTAINERFILE.read_text(), IMAGE_SH.read_text()
    failures = []
    baseline = check(workflow, containerfile, image_sh)
    if baseline:
        failures.append("the real workflow fails the check:\n    " + "\n    ".join(baseline))
    removed_steps = [
        ("image", "cosign sign", "steps: job image does not sign the image by digest"),
        ("image", "cosign attest", "steps: job image does not attest the SBOM"),
        ("image", "scripts/image.sh sbom", "steps: job image does not generate the pushed image's SBOM"),
        ("image", "actions/attest-build-provenance", "steps: job image does not attest the build provenance"),
        ("image", "name: sbom-", "steps: job image does not upload the SBOM"),
        ("image", "sigstore/cosign-installer", "steps: job image runs cosign before installing it"),
        ("manifest", "cosign sign", "steps: job manifest does not sign the multi-arch index"),
        ("manifest", "cosign attest", "steps: job manifest does not attest the SBOMs"),
        ("manifest", "actions/attest-build-provenance", "steps: job manifest does not attest the build provenance"),
        ("chart", "cosign sign", "steps: job chart does not sign the chart"),
        ("chart", "subject-digest", "steps: job chart does not attest the build provenance of the OCI chart"),
        ("chart", "subject-path", "steps: job chart does not attest the build provenance of the chart archive"),
        ("github-release", "gh release create", "steps: job github-release does not publish the SBOMs"),
    ]
    mutations = [(f"without the {job} job's `{marker}` step", remove_step(workflow, job, marker), containerfile, image_sh, expected)
                 for job, marker, expected in removed_steps]
    sha = re.search(r"actions/checkout@([0-9a-f]{40}) # (v\S+)", workflow)
    assert sha, "the workflow checks out with a pinned actions/checkout"
    mutations += [
        ("an action pinned by tag", workflow.replace(f"actions/checkout@{sha.group(1)} # {sha.group(2)}", "actions/checkout@v5", 1),
         containerfile, image_sh, "is not pinned by a full commit digest"),
        ("a pin without its release comment", workflow.replace(f"@{sha.group(1)} # {sha.group(2)}", f"@{sha.group(1)}", 1),
         containerfile, image_sh, "has no `# vX.Y.Z` comment"),
        ("the SBOM attested without --type cyclonedx", workflow.replace("cosign attest --yes --type cyclonedx --predicate \"$SBOM\"", "cosign attest --yes --predicate \"$SBOM\"", 1),
         containerfile, image_sh, "steps: job image does not attest the SBOM"),
        ("a write scope a job does not use", workflow.replace("    permissions:\n      contents: read\n    outputs:", "    permissions:\n      contents: read\n      id-token: write\n    outputs:", 1),
         containerfile, image_sh, "permissions: job check grants `id-token: write` it does not use"),
        ("a job without its permissions", workflow.replace("    permissions:\n      contents: write  # create the release and upload its assets\n", "", 1),
         containerfile, image_sh, "permissions: job github-release has no explicit `permissions:` map"),
        ("write-all at the top", workflow.replace("permissions: {}\n", "permissions: write-all\n", 1),
         containerfile, image_sh, "permissions: the top-level permissions"),
        ("a signing job without id-token: write", workflow.replace("      id-token: write  # the OIDC token cosign and the attestation are signed with (keyless)\n", "", 1),
         containerfile, image_sh, "permissions: job image needs `id-token: write`"),
        ("the release binary built without cargo auditable",
         workflow, containerfile.replace("CARGO_PROFILE_RELEASE_STRIP=symbols scripts/image.sh binary", "CARGO_PROFILE_RELEASE_STRIP=symbols cargo build --release --locked --bin pod-director", 1),
         image_sh, "auditable: the Containerfile's build-release stage"),
        ("scripts/image.sh binary without cargo auditable",
         workflow, containerfile, image_sh.replace('"$auditable" auditable build --release --locked', 'cargo build --release --locked', 1),
         "auditable: scripts/image.sh binary does not run `cargo auditable build"),
    ]
    for what, text, cf, sh, expected in mutations:
        if text == workflow and cf == containerfile and sh == image_sh:
            failures.append(f"{what}: the mutation changed nothing (the self-test is stale)")
            continue
        problems = check(text, cf, sh)
        if not any(expected in p for p in problems):
            failures.append(f"{what}: expected a problem containing {expected!r}, got {problems}")
    if failures:
        sys.exit("release-check self-test failed:\n  " + "\n  ".join(failures))
    print(f"[release-check] self-test: the check fails for each of {len(mutations)} removed steps and broken rules", file=sys.stderr)


def main() -> None:
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    if sys.argv[1:]:
        sys.exit(__doc__)
    problems = check(WORKFLOW.read_text(), CONTAINERFILE.read_text(), IMAGE_SH.read_text())
    if problems:
        sys.exit("[release-check] .github/workflows/release.yml:\n  " + "\n  ".join(problems))
    print("[release-check] the release workflow pins every action, grants each job only what it uses, "
          "and signs, attests (SBOM, provenance) the images and the chart", file=sys.stderr)


if __name__ == "__main__":
    main()
