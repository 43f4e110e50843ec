"""The release workflow (.github/workflows/release.yml) keeps its steps: it cannot run here, so this
reads it. A published release builds the sdist, the wheel and the .mcpb, attaches them to the
release with their SHA-256, and publishes to PyPI with trusted publishing. Also the stamping of
server.json's mcpb hash (manifests/server_json.py), which the workflow runs."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PROJECT["project"]["version"]


def _workflow() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return data


def _runs(job: dict[str, Any]) -> list[str]:
    return [step.get("run", "") for step in job["steps"]]


def _index_of(job: dict[str, Any], text: str) -> int:
    (index,) = [i for i, run in enumerate(_runs(job)) if text in run]
    return index


def test_the_workflow_parses_and_runs_on_a_published_release() -> None:
    workflow = _workflow()
    triggers = workflow.get("on", workflow.get(True))  # type: ignore[call-overload]  # YAML 1.1 reads a bare `on` as true
    assert triggers == {"release": {"types": ["published"]}}
    assert workflow["permissions"] == {"contents": "read"}  # each job asks for more only where needed
    assert set(workflow["jobs"]) == {"build", "release-upload", "pypi-publish"}


def test_the_build_job_installs_cpu_torch_then_builds_checks_and_hashes() -> None:
    build = _workflow()["jobs"]["build"]
    runs = _runs(build)
    # torch's CPU build from the index the project names for uv, at the version constraints.txt pins
    (index,) = PROJECT["tool"]["uv"]["index"]
    torch = _index_of(build, "pip install torch==2.13.0")
    assert f"--index-url {index['url']}" in runs[torch]
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    project = _index_of(build, "pip install -c constraints.txt -e .")
    assert torch < project
    wheel = _index_of(build, "python -m build --outdir dist")
    check = _index_of(build, "twine check --strict dist/*")
    mcpb = _index_of(build, "manifests/mcpb/build.py --out dist")
    stamp = _index_of(build, "manifests/server_json.py")
    sums = _index_of(build, "sha256sum")
    assert project < wheel < check < mcpb < stamp < sums
    for name in ("corrigenda-$VERSION.tar.gz", "corrigenda-$VERSION-py3-none-any.whl", "corrigenda-$VERSION.mcpb"):
        assert name in runs[sums]
    assert "> SHA256SUMS" in runs[sums]
    uploads = [s["with"]["name"] for s in build["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads == ["python-dist", "release-assets"]


def test_the_tag_must_name_the_version() -> None:
    build = _workflow()["jobs"]["build"]
    step = build["steps"][_index_of(build, 'test "$TAG" = "v$version"')]
    assert step["env"]["TAG"] == "${{ github.event.release.tag_name }}"


def test_the_files_and_their_sums_are_attached_to_the_release() -> None:
    job = _workflow()["jobs"]["release-upload"]
    assert job["needs"] == "build"
    assert job["permissions"] == {"contents": "write"}
    upload = _runs(job)[_index_of(job, "gh release upload")]
    assert "sha256sum --check SHA256SUMS" in upload  # the sums still match what is uploaded
    assert '"$TAG" ./*' in upload


def test_pypi_is_published_with_trusted_publishing() -> None:
    job = _workflow()["jobs"]["pypi-publish"]
    assert job["needs"] == "build"
    assert job["environment"]["name"] == "pypi"
    assert job["permissions"] == {"id-token": "write"}
    (publish,) = [s for s in job["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert "password" not in publish.get("with", {})  # no token: PyPI trusts the workflow's OIDC token
    (download,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
    assert download["with"]["name"] == "python-dist"  # the sdist and the wheel, not the bundle


# -- server.json's mcpb hash ----------------------------------------------------------------------


def _server_json_module() -> Any:
    spec = importlib.util.spec_from_file_location("server_json", ROOT / "manifests" / "server_json.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stamping_writes_the_bundles_sha256(tmp_path: Path) -> None:
    module = _server_json_module()
    server = json.loads((ROOT / "manifests" / "server.json").read_text(encoding="utf-8"))
    bundle = tmp_path / f"corrigenda-{VERSION}.mcpb"
    bundle.write_bytes(b"not really a bundle")
    stamped = module.stamp(server, bundle)
    (package,) = [p for p in stamped["packages"] if p["registryType"] == "mcpb"]
    assert package["fileSha256"] == hashlib.sha256(b"not really a bundle").hexdigest()
    assert [p for p in stamped["packages"] if p["registryType"] != "mcpb"] == [
        p for p in server["packages"] if p["registryType"] != "mcpb"
    ]
    (committed,) = [p for p in server["packages"] if p["registryType"] == "mcpb"]
    assert committed["fileSha256"] == module.PLACEHOLDER  # the committed file is left alone


def test_stamping_refuses_a_bundle_that_server_json_does_not_name(tmp_path: Path) -> None:
    module = _server_json_module()
    server = json.loads((ROOT / "manifests" / "server.json").read_text(encoding="utf-8"))
    other = tmp_path / "corrigenda-9.9.9.mcpb"
    other.write_bytes(b"")
    with pytest.raises(SystemExit, match="names"):
        module.stamp(server, other)
