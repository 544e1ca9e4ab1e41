"""``make site`` without a browser: what staging changes (only tags), the pinned widget manager,
the launch links' repository. The built site itself is read in Chromium by
tests/browser/test_site.py."""

from __future__ import annotations

import ast
import json
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from kpca_lib.course import site

ROOT = Path(__file__).resolve().parents[1]


def code(source: str, **metadata) -> dict:
    return {
        "cell_type": "code",
        "id": "c",
        "metadata": metadata,
        "source": source,
        "outputs": [],
        "execution_count": None,
    }


@pytest.mark.parametrize(
    ("source", "first", "expected"),
    [
        ("import numpy as np\nfrom math import comb\n", False, True),
        ("# set-up\nimport numpy as np\n\n", False, True),
        ("import numpy as np\nrng = np.random.default_rng(0)\n", False, False),
        ("import numpy as np\nrng = np.random.default_rng(0)\n", True, True),
        ("rng = 1\nimport numpy as np\n", True, False),
        ("", True, False),
        ("%matplotlib inline\nimport numpy\n", True, False),  # not Python: shown as it is
        ("def f(:\n", True, False),
    ],
)
def test_is_setup_cell(source, first, expected):
    assert site.is_setup_cell(source, first=first) is expected


@pytest.mark.parametrize("path", sorted((ROOT / "exercises").glob("*.ipynb")), ids=lambda p: p.stem)
def test_homework_question_and_setup_cells_collapse_and_nothing_else_changes(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    tagged = site.tag_notebook(notebook)
    assert notebook == json.loads(path.read_text(encoding="utf-8"))  # the input is not modified
    roles = set()
    for before, after in zip(notebook["cells"], tagged["cells"], strict=True):
        role = before.get("metadata", {}).get("kpca", {}).get("role")
        roles.add(role)
        tags = after.get("metadata", {}).get("tags", [])
        assert (site.COLLAPSED in tags) is (role in {"setup", "question"}), (role, before["source"])
        after_metadata = dict(after.get("metadata", {}))
        after_metadata.pop("tags", None)
        before_metadata = {k: v for k, v in before.get("metadata", {}).items() if k != "tags"}
        assert after_metadata == before_metadata
        assert {k: v for k, v in after.items() if k != "metadata"} == {
            k: v for k, v in before.items() if k != "metadata"
        }
    assert {"setup", "question", "answer", "check"} <= roles


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_a_lecture_collapses_its_set_up_only(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    tagged = site.tag_notebook(notebook)
    codes = [cell for cell in tagged["cells"] if cell["cell_type"] == "code"]
    collapsed = [cell for cell in codes if site.COLLAPSED in cell["metadata"].get("tags", [])]
    assert codes[0] in collapsed  # every lecture starts with its imports
    for cell in collapsed[1:]:
        body = ast.parse("".join(cell["source"])).body
        assert all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in body)
    assert len(collapsed) < len(codes) / 2


def test_a_cell_hidden_in_jupyterlab_is_collapsed_once():
    cell = code("x = 1\n", jupyter={"source_hidden": True}, tags=[site.COLLAPSED])
    notebook = {
        "cells": [code("y = 2\n"), cell],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    tagged = site.tag_notebook(notebook)
    assert tagged["cells"][0]["metadata"] == {}
    assert tagged["cells"][1]["metadata"]["tags"] == [site.COLLAPSED]


def test_stage_keeps_the_repository_layout_and_leaves_it_alone(tmp_path):
    sources = [p for s in site.SECTIONS for p in sorted((ROOT / s).glob("*.ipynb"))]
    before = {p: p.read_bytes() for p in sources}
    staged = site.stage(ROOT, tmp_path / "src")
    assert staged == [p.relative_to(ROOT) for p in sources]
    assert (tmp_path / "src" / "conf.py").is_file() and (tmp_path / "src" / "index.md").is_file()
    assert (tmp_path / "src" / "_static" / "mathjax2-shim.js").is_file()
    assert {p: p.read_bytes() for p in sources} == before
    for rel in staged:
        original = json.loads((ROOT / rel).read_text(encoding="utf-8"))
        assert [c.get("id") for c in json.loads((tmp_path / "src" / rel).read_text())["cells"]] == [
            c.get("id") for c in original["cells"]
        ]


def test_the_site_config_fetches_nothing_from_a_cdn():
    tree = ast.parse((ROOT / "site" / "conf.py").read_text(encoding="utf-8"))
    assigned = {
        t.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    widgets = ast.literal_eval(assigned["nb_ipywidgets_js"])
    assert widgets and all(not url.startswith(("http:", "https:", "//")) for url in widgets)
    assert "sphinx-mathjax-offline" in ast.literal_eval(assigned["extensions"])
    assert ast.literal_eval(assigned["nb_execution_mode"]) == "off"


def fake_npm(tmp_path: Path, payload: bytes | None) -> str:
    """An ``npm`` whose ``pack`` writes a tarball holding ``payload`` as dist/embed.js."""
    tarball = tmp_path / "fixture.tgz"
    if payload is not None:
        (tmp_path / "embed.js").write_bytes(payload)
        with tarfile.open(tarball, "w:gz") as archive:
            archive.add(tmp_path / "embed.js", arcname="package/dist/embed.js")
    script = tmp_path / "npm"
    script.write_text(
        "#!/bin/sh\n"
        f'[ -f "{tarball}" ] || {{ echo "E404 not found" >&2; exit 1; }}\n'
        f'cp "{tarball}" "$4/jupyter-widgets-html-manager-1.0.15.tgz"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_a_widget_manager_that_is_not_the_pinned_one_is_refused(tmp_path):
    with pytest.raises(site.SiteError, match="SHA-512 .* not the pinned .* refusing"):
        site.widget_manager(tmp_path / "cache", npm=fake_npm(tmp_path, b"alert('not it')"))
    assert not list((tmp_path / "cache").glob("*.tgz"))
    assert not (tmp_path / "cache" / "html-manager-1.0.15").exists()


def test_npm_missing_or_failing_names_the_fix(tmp_path):
    with pytest.raises(site.SiteError, match="npm is not on PATH: install Node.js and npm"):
        site.widget_manager(tmp_path / "cache", npm=str(tmp_path / "no-such-npm"))
    with pytest.raises(site.SiteError, match="npm pack .* failed .*E404.*registry"):
        site.widget_manager(tmp_path / "cache", npm=fake_npm(tmp_path, None))


def test_a_cached_widget_manager_is_used_without_npm(tmp_path):
    dist = tmp_path / "cache" / "html-manager-1.0.15" / "dist"
    dist.mkdir(parents=True)
    (dist / "embed.js").write_text("// cached\n")
    assert site.widget_manager(tmp_path / "cache", npm=str(tmp_path / "no-such-npm")) == dist


def test_launch_links_open_the_declared_repository(tmp_path, monkeypatch):
    monkeypatch.delenv("KPCA_SITE_REPOSITORY", raising=False)
    assert site.repository_url(ROOT).startswith("https://github.com/")
    monkeypatch.setenv("KPCA_SITE_REPOSITORY", "https://github.com/someone/fork")
    assert site.repository_url(ROOT) == "https://github.com/someone/fork"
    monkeypatch.delenv("KPCA_SITE_REPOSITORY")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    with pytest.raises(site.SiteError, match=r"set \[project.urls\] Repository"):
        site.repository_url(tmp_path)


def test_make_site_is_in_make_help():
    done = subprocess.run(["make", "-s", "-C", str(ROOT), "help"], capture_output=True, text=True)
    assert done.returncode == 0 and "make site" in done.stdout


def test_only_regular_files_inside_the_package_are_unpacked(tmp_path, monkeypatch):
    """Defence in depth (the pinned SHA-512 comes first): no path outside the cache, no links.
    Written without ``extractall(filter=...)``, which Debian 12's Python 3.11.2 lacks."""
    payload = tmp_path / "payload.js"
    payload.write_text("// widgets\n")
    tarball = tmp_path / "fixture.tgz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(payload, arcname="package/dist/embed.js")
        archive.add(payload, arcname="package/../escaped.js")
        archive.add(payload, arcname="outside-package.js")
        archive.add(payload, arcname="package/dist/embed.js.map")
        link = tarfile.TarInfo("package/dist/link.js")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    monkeypatch.setattr(site, "WIDGET_MANAGER_SHA512", site._integrity(tarball))
    script = tmp_path / "npm"
    script.write_text(f'#!/bin/sh\ncp "{tarball}" "$4/jupyter-widgets-html-manager-1.0.15.tgz"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    dist = site.widget_manager(tmp_path / "cache", npm=str(script))
    unpacked = dist.parent
    assert sorted(str(p.relative_to(unpacked)) for p in unpacked.rglob("*") if p.is_file()) == [
        "dist/embed.js"
    ]
    assert (
        not (tmp_path / "cache" / "escaped.js").exists() and not (tmp_path / "escaped.js").exists()
    )
