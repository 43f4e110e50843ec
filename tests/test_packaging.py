"""What the public index gets: `python -m build` makes the sdist and the wheel, `twine check` passes
(the long description renders), and the metadata says what the project is. How torch's CPU build
is had: uv, run in a clone, takes it from PyTorch's CPU index on Linux and from PyPI elsewhere
([tool.uv.sources]); installed from the wheel, uv's --torch-backend=cpu and pip's --extra-index-url
take it from that index (tests/cpu_index.py stands in for it at its own URL).

Slow (about 30 s, most of it pip resolving the wheel's dependencies): the build runs in an isolated
environment that pip fills from the index, and uv and pip read package metadata from PyPI."""

from __future__ import annotations

import email.parser
import email.policy
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.message import Message
from pathlib import Path

import pytest

from .cpu_index import local_torch_index, torch_wheel

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PROJECT["project"]["version"]
# What a build reads: the tree as the release workflow checks it out, less what the build ignores.
SOURCES = ["pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "constraints.txt", "store", "server"]

pytestmark = pytest.mark.slow


def _copy_sources(dest: Path) -> Path:
    """The sources in a directory of their own, so that the build leaves no egg-info or build/ in
    the work tree and two runs do not meet."""
    dest.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, as the release workflow builds them."""
    source = _copy_sources(tmp_path_factory.mktemp("build") / "corrigenda")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Package would be ignored" not in done.stdout + done.stderr  # setuptools' warning of an unlisted package
    return out


def _metadata(text: str) -> Message:
    return email.parser.Parser(policy=email.policy.compat32).parsestr(text)


def _wheel(dist: Path) -> Path:
    return dist / f"corrigenda-{VERSION}-py3-none-any.whl"


def _sdist(dist: Path) -> Path:
    return dist / f"corrigenda-{VERSION}.tar.gz"


def test_build_makes_an_sdist_and_a_wheel_that_twine_passes(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == sorted([_sdist(dist).name, _wheel(dist).name])
    check = subprocess.run(
        [BIN / "twine", "check", "--strict", *sorted(dist.iterdir())], capture_output=True, text=True, timeout=300
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("PASSED") == 2, check.stdout


def test_the_wheel_metadata(dist: Path) -> None:
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        meta = _metadata(wheel.read(f"corrigenda-{VERSION}.dist-info/METADATA").decode())
    assert meta["Name"] == "corrigenda"
    assert meta["Version"] == VERSION
    assert meta["Summary"] == PROJECT["project"]["description"]
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["Author"] == "the corrigenda authors"
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["Description-Content-Type"] == "text/markdown"
    classifiers = set(meta.get_all("Classifier") or [])
    assert {
        "Development Status :: 3 - Alpha",
        "Operating System :: OS Independent",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Typing :: Typed",
    } <= classifiers
    assert any(c.startswith("Topic :: ") for c in classifiers)
    assert not any(c.startswith("License :: ") for c in classifiers)  # PEP 639: the expression says it
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert set(urls) == {"Homepage", "Repository", "Issues", "Changelog"}
    assert all(u.startswith("https://github.com/corrigenda/corrigenda") for u in urls.values())
    # The long description is the README, with the line the MCP registry reads to prove ownership.
    description = meta.get_payload()
    assert isinstance(description, str)
    assert description.strip() == (ROOT / "README.md").read_text(encoding="utf-8").strip()
    assert "<!-- mcp-name: io.github.corrigenda/corrigenda -->" in description
    # torch is named at the tested version (the uv sources route it); the rest as pyproject says.
    requires = meta.get_all("Requires-Dist") or []
    assert "torch==2.13.0" in requires
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()


def test_the_wheel_holds_the_packages_their_data_and_the_license(dist: Path) -> None:
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        names = set(wheel.namelist())
        entry_points = wheel.read(f"corrigenda-{VERSION}.dist-info/entry_points.txt").decode()
    info = f"corrigenda-{VERSION}.dist-info"
    for package, directory in (("corrigenda/store", ROOT / "store"), ("corrigenda/server", ROOT / "server")):
        modules = {f"{package}/{p.name}" for p in directory.glob("*.py")}
        assert modules and modules <= names
        assert f"{package}/py.typed" in names
    assert {f"corrigenda/server/ui_static/{p.name}" for p in (ROOT / "server" / "ui_static").iterdir()} <= names
    icons = {f"corrigenda/server/ui_static/{name}" for name in ("favicon.svg", "icon.png")}  # mcp_app.icons() reads
    assert icons <= names, icons - names  # both, named: the line above holds only what the work tree has
    assert f"{info}/licenses/LICENSE" in names
    assert not any(n.startswith(("tests/", "bench/", "manifests/")) for n in names)
    assert re.search(r"^corrigenda = corrigenda\.server\.entry:main$", entry_points, re.M)


def test_the_sdist_builds_the_same_project(dist: Path) -> None:
    with tarfile.open(_sdist(dist)) as sdist:
        names = set(sdist.getnames())
        top = f"corrigenda-{VERSION}"
        pkg_info = sdist.extractfile(f"{top}/PKG-INFO")
        assert pkg_info is not None
        meta = _metadata(pkg_info.read().decode())
    assert {f"{top}/{n}" for n in ("LICENSE", "README.md", "pyproject.toml", "constraints.txt")} <= names
    assert {f"{top}/server/ui_static/{name}" for name in ("ui.css", "favicon.svg", "icon.png")} <= names
    assert not any(n.startswith(f"{top}/tests") for n in names)  # MANIFEST.in: the tests need the whole tree
    assert (meta["Name"], meta["Version"], meta["License-Expression"]) == ("corrigenda", VERSION, "MIT")


# -- uv in a clone: torch from PyTorch's CPU index on Linux ----------------------------------------


# uv's --python-platform for each platform, and the torch it must pick there.
PLATFORMS = {
    "x86_64-manylinux_2_28": "torch==2.13.0+cpu",  # the CPU index's build (PyPI's is CUDA)
    "aarch64-apple-darwin": "torch==2.13.0",  # PyPI's, a CPU build
    "x86_64-pc-windows-msvc": "torch==2.13.0",  # PyPI's, a CPU build
}


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sources, with the CPU index's URL in pyproject.toml pointing to the local stand-in."""
    (index,) = PROJECT["tool"]["uv"]["index"]
    assert PROJECT["tool"]["uv"]["sources"]["torch"] == [{"index": index["name"], "marker": "sys_platform == 'linux'"}]
    assert index["explicit"] is True  # nothing but torch comes from it
    source = _copy_sources(tmp_path_factory.mktemp("clone") / "corrigenda")
    project = source / "pyproject.toml"
    text = project.read_text(encoding="utf-8")
    assert text.count(index["url"]) == 1
    project.write_text(
        text.replace(index["url"], local_torch_index(tmp_path_factory.mktemp("index"))), encoding="utf-8"
    )
    return source


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_uv_in_a_clone_takes_cpu_torch_on_linux(clone: Path, platform: str) -> None:
    compile_ = subprocess.run(
        [BIN / "uv", "pip", "compile", "pyproject.toml", "--python-version", "3.11", "--python-platform", platform,
         "--no-header", "--no-annotate"],
        cwd=clone, capture_output=True, text=True, timeout=600,
        env={**os.environ, "MACOSX_DEPLOYMENT_TARGET": "14.0"},  # torch 2.13's macOS wheels are for 14+
    )  # fmt: skip
    assert compile_.returncode == 0, compile_.stderr[-3000:]
    pins = compile_.stdout.split()
    assert [p for p in pins if p.startswith("torch==")] == [PLATFORMS[platform]]
    assert not [p for p in pins if p.startswith(("nvidia-", "triton", "cuda-"))]  # no CUDA stack


def test_without_the_clones_sources_linux_gets_cuda(clone: Path) -> None:
    """Why an install of the published wheel needs --torch-backend=cpu: the wheel's metadata alone
    (uv's --no-sources) takes PyPI's Linux torch, which brings the CUDA libraries."""
    compile_ = subprocess.run(
        [BIN / "uv", "pip", "compile", "pyproject.toml", "--no-sources", "--python-version", "3.11",
         "--python-platform", "x86_64-manylinux_2_28", "--no-header", "--no-annotate"],
        cwd=clone, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert compile_.returncode == 0, compile_.stderr[-3000:]
    pins = compile_.stdout.split()
    assert "torch==2.13.0" in pins
    assert [p for p in pins if p.startswith("nvidia-")]


# -- the published package: what the README's one-liners do --------------------------------------
# Installed from PyPI, the wheel's metadata is all an installer sees: no [tool.uv.sources]. The
# built wheel stands in for the published one, and tests/cpu_index.py for PyTorch's CPU index at
# its own URL (unreachable from here); PyPI is the real one.


def test_uv_with_torch_backend_cpu_takes_torch_from_the_cpu_index(dist: Path, tmp_path: Path) -> None:
    """`uvx --torch-backend cpu corrigenda serve` (server.json's runtimeArguments, the README's uv
    line): uv's option, not the package, sends torch to PyTorch's CPU index. Resolved with
    `uv pip install --dry-run`, the same resolver and option as uvx and `uv tool install`."""
    from .cpu_index import HOST, pytorch_cpu_index

    venv = tmp_path / "venv"
    subprocess.run([BIN / "uv", "venv", "-q", "--python", sys.executable, venv], check=True, timeout=120)
    torch = torch_wheel(tmp_path / "wheels", "torch-2.13.0+cpu-*.whl")
    with pytorch_cpu_index(torch) as index:
        install = subprocess.run(
            [BIN / "uv", "pip", "install", "--dry-run", "--torch-backend", "cpu", "--python", venv / "bin" / "python",
             _wheel(dist)],
            capture_output=True, text=True, timeout=600, env={**os.environ, **index.env},
        )  # fmt: skip
        asked = index.requests
    assert install.returncode == 0, install.stderr[-3000:]
    assert re.search(r"^ \+ torch==2\.13\.0\+cpu$", install.stderr, re.M), install.stderr[-3000:]
    assert not re.search(r"^ \+ (nvidia-|triton|cuda-)", install.stderr, re.M)
    assert f"{HOST} GET /whl/cpu/torch/" in asked
    # Only torch went to that index (its metadata may come from uv's cache); the rest from PyPI.
    paths = {r.split()[2] for r in asked if r.startswith(f"{HOST} GET ")}
    assert paths <= {"/whl/cpu/torch/", f"/whl/cpu/{torch.name}.metadata"}


def test_pip_with_the_cpu_index_takes_cpu_torch(dist: Path, tmp_path: Path) -> None:
    """`pip install --extra-index-url https://download.pytorch.org/whl/cpu corrigenda` (the README's
    pip and pipx lines): PyPI's torch 2.13.0 and the CPU index's 2.13.0+cpu both satisfy the
    wheel's torch==2.13.0, and pip takes the higher, +cpu."""
    from .cpu_index import HOST, pytorch_cpu_index

    report = tmp_path / "report.json"
    # No pip configuration: this machine's would offer the CPU wheel from its own disk.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    with pytorch_cpu_index(torch_wheel(tmp_path / "wheels", "torch-2.13.0+cpu-*.whl")) as index:
        install = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q", "--report", report,
             "--extra-index-url", f"https://{HOST}/whl/cpu", _wheel(dist)],
            capture_output=True, text=True, timeout=900, env={**env, **index.env},
        )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    installs = {i["metadata"]["name"]: i for i in json.loads(report.read_text(encoding="utf-8"))["install"]}
    torch = installs["torch"]
    assert torch["metadata"]["version"] == "2.13.0+cpu"
    assert torch["download_info"]["url"].startswith(f"https://{HOST}/whl/cpu/torch-2.13.0")
    assert not [n for n in installs if n.lower().startswith(("nvidia-", "triton", "cuda-"))]
