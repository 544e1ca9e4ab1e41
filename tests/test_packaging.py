"""The set-up files agree with each other (pyproject, environment.yml, the lock file), and the
wheel and sdist hold the library and never solutions/."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pyproject_requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += [r for r in extra if not r.startswith("kpca-course")]
    return {canonicalize_name(Requirement(r).name): Requirement(r) for r in reqs}


def _lock() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "requirements-lock.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements-lock.txt: {line!r} is not pinned with =="
            pins[canonicalize_name(name)] = Version(version)
    return pins


def test_environment_yml_lists_the_same_packages():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    names = {}
    pip = [d for dep in env["dependencies"] if isinstance(dep, dict) for d in dep.get("pip", [])]
    for dep in [*env["dependencies"], *pip]:  # conda packages, then those only on PyPI
        if isinstance(dep, str) and not dep.startswith("-"):  # not `-e .`
            name = re.split(r"[<>=! ]", dep, maxsplit=1)[0]
            if name not in {"python", "pip"}:
                names[canonicalize_name(name)] = dep
    py = _pyproject_requirements()
    assert set(names) == set(py), (
        f"only in environment.yml: {sorted(set(names) - set(py))}; "
        f"only in pyproject.toml: {sorted(set(py) - set(names))}"
    )
    for name, dep in names.items():
        assert str(py[name].specifier) in dep.replace(" ", ""), (name, dep, str(py[name].specifier))


def test_lock_pins_every_dependency_within_bounds():
    pins = _lock()
    for name, req in _pyproject_requirements().items():
        assert name in pins, f"{name} is missing from requirements-lock.txt (run make lock)"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} violates {req}"


def test_installed_environment_matches_lock():
    mismatched = []
    for name, version in _lock().items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            mismatched.append(f"{name} (not installed)")
            continue
        if installed != version:
            mismatched.append(f"{name} {installed} != {version}")
    assert not mismatched, "the environment drifted from requirements-lock.txt: " + ", ".join(
        mismatched
    )


def test_base_install_is_the_library_only():
    """`pip install kpca-course` (a Colab user) gets no JupyterLab, nbval or nbformat."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    assert base == {"numpy", "scipy", "scikit-learn", "matplotlib", "ipywidgets", "threadpoolctl"}
    course = {
        canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["course"]
    }
    assert {"jupyterlab", "nbval", "nbformat"} <= course


MATH_MODULES = sorted(p.stem for p in (ROOT / "kpca_lib").glob("*.py") if p.stem != "__init__")


def test_every_public_module_is_listed_in_the_package():
    import kpca_lib

    public = {m for m in MATH_MODULES if not m.startswith("_")} - {
        "kernel_pca", "pca", "approximate_kernel_pca"  # the estimators
    }
    assert public <= set(kpca_lib.__all__), sorted(public - set(kpca_lib.__all__))
    for name in public:
        assert getattr(kpca_lib, name).__name__ == f"kpca_lib.{name}"


def test_math_modules_never_import_the_course_tooling():
    """Every module of kpca_lib (private ones too), imported together, pulls in neither the
    course tooling nor the optional extras (Dask is imported only for a Dask array)."""
    code = (
        "import sys, kpca_lib\n"
        f"for m in {MATH_MODULES!r}:\n"
        "    __import__('kpca_lib.' + m)\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('kpca_lib.course', 'nbformat',\n"
        "             'nbval', 'jupyterlab', 'nbclient', 'skimage', 'pytest', 'dask',\n"
        "             'distributed')))\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# --------------------------------------------------------------------------- wheel and sdist
@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """The sdist of a copy of this repository (solutions/ and tests/ included), and the wheel
    built from that sdist with pip, as `python -m build` would."""
    out = tmp_path_factory.mktemp("dist")
    src = out / "repo"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
        ),
    )
    assert (src / "solutions").is_dir() and (src / "tests").is_dir()
    code = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    sdist = out / proc.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tf:  # our own sdist; the "data" filter where Python has it
        # (3.11.4 and later: Debian 12's 3.11.2 has no extraction filters)
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tf.extractall(out / "unpacked", **safe)
    (unpacked,) = (out / "unpacked").iterdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(out),
            str(unpacked),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("*.whl")
    return {"sdist": sdist, "wheel": wheel}


def _members(path: Path) -> list[str]:
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as zf:
            return zf.namelist()
    with tarfile.open(path) as tf:
        return [m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name and m.isfile()]


def test_wheel_and_sdist_hold_the_library_and_never_solutions(dists):
    wheel, sdist = _members(dists["wheel"]), _members(dists["sdist"])
    library = {p.relative_to(ROOT).as_posix() for p in (ROOT / "kpca_lib").rglob("*.py")}
    assert library <= set(wheel) and library <= set(sdist)
    for name in wheel + sdist:
        parts = name.split("/")
        assert "solutions" not in parts and "exercises" not in parts, name
        assert not name.endswith(".ipynb"), name
        assert parts[0] not in ("tests", "notebooks", "benchmarks", "edition"), name
    assert {p.split("/")[0] for p in wheel} == {"kpca_lib", "kpca_course-0.1.0.dist-info"}
    # The licences travel with both: the code's (MIT) and the content's (CC BY 4.0) notice.
    for licence in ("LICENSE", "LICENSE-content.md", "LICENSES/CC-BY-4.0.txt"):
        assert licence in sdist, licence
        assert any(m.endswith(f".dist-info/licenses/{licence}") for m in wheel), (licence, wheel)


def test_wheel_and_sdist_pass_the_leak_scan(dists):
    """No solution line, hidden check or secret in any member (the leak scan of the edition)."""
    from kpca_lib.course.edition import fingerprints, scan

    fps = fingerprints(ROOT / "solutions", secrets=["kpca-canary-5e0d-packaging"])
    # the package's description is the instructor's README, which explains solutions/
    fps.exempt_prefixes += ("README.md", "PKG-INFO", "METADATA")
    for path in dists.values():
        leaks = [str(f) for f in scan(path, fps) if not f.allowed]
        assert not leaks, "\n".join(leaks)


def github_anchor(title: str) -> str:
    """The #anchor GitHub gives a heading: lower case, punctuation dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def test_readme_contents_list_every_section_and_its_links_resolve():
    """The README's table of contents names every ## and ### section, and every link to a
    section (#anchor, as GitHub makes them) goes to one. (Links to files and to docs/ pages:
    tests/test_docs.py.)"""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    body = re.sub(r"```.*?```", "", readme, flags=re.S)  # no headings inside code blocks

    titles = re.findall(r"^#{2,3} (.+)$", body, re.M)
    anchors = {github_anchor(t) for t in titles}
    contents = body.split("**Contents.**", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"\[([^\]]+)\]\(#", contents) == titles
    for target in re.findall(r"\]\(#([^)]+)\)", body):
        assert target in anchors, f"README link to #{target}: no such section"


def test_torch_is_a_test_group_that_ci_installs_and_never_a_user_dependency():
    """PyTorch runs the Array API tests on real tensors: pyproject's test-torch group (PEP 735,
    not an extra), exactly what .ci/run installs into .venv before `make test`, and neither a
    dependency, an extra, nor in the lock or environment.yml (what students install)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (pin,) = pyproject["dependency-groups"]["test-torch"]
    assert Requirement(pin).name == "torch" and str(Requirement(pin).specifier) == "==2.13.0"
    assert "torch" not in _pyproject_requirements()  # dependencies and every extra
    assert "torch" not in _lock()
    assert "torch" not in (ROOT / "environment.yml").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line.strip() for line in ci.splitlines() if not line.lstrip().startswith("#")]
    install = commands.index(f".venv/bin/pip install {pin}")
    assert commands.index("make setup") < install  # .venv exists (course.mk makes it)
    assert install < next(i for i, c in enumerate(commands) if c.startswith("make test"))
