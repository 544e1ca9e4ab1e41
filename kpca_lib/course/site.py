"""The course as a static website: ``make site`` (``python -m kpca_lib.course.site``).

The lectures (``notebooks/``) and the homework (``exercises/``) are staged, as stored, next to
``site/conf.py`` and ``site/index.md`` and built by Sphinx with MyST-NB and the Jupyter Book
theme, warnings as errors. Nothing is executed and nothing is fetched when a page is read: math
is typeset by the MathJax copy of ``sphinx-mathjax-offline``, saved widget state is drawn by
the ipywidgets HTML manager served from ``_static/widgets/``, and the theme serves its own
fonts and scripts.

The only download is that widget manager, once, from the npm registry (``npm pack``, the
version and SHA-512 pinned here); it is cached in ``build/site-cache/``.

Staging only adds cell tags, so the site shows a lecture exactly as JupyterLab does:

* a notebook's set-up (its first code cell when that starts with imports, and any cell that
  only imports) and the homework's set-up and question cells (``metadata.kpca.role``
  ``"setup"``/``"question"``) are collapsed (``hide-input``);
* cells hidden in JupyterLab (``jupyter.source_hidden``) are collapsed too.
"""

from __future__ import annotations

import argparse
import ast
import base64
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterable
from pathlib import Path

#: The ipywidgets 8 HTML manager (``embed.js`` draws saved widget state without RequireJS).
WIDGET_MANAGER = "@jupyter-widgets/html-manager@1.0.15"
WIDGET_MANAGER_SHA512 = (
    "5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA=="
)
#: Folders of the repository that become sections of the site, in order.
SECTIONS = ("notebooks", "exercises")
#: Tag that MyST-NB renders as a collapsed "Show code cell source".
COLLAPSED = "hide-input"
#: Homework cell roles (``metadata.kpca.role``) that a reader does not need to read.
COLLAPSED_ROLES = frozenset({"setup", "question"})


class SiteError(RuntimeError):
    """The site cannot be built; the message names the cause and the fix."""


def is_setup_cell(source: str, *, first: bool = False) -> bool:
    """Whether a code cell is set-up: it only imports, or (``first``) it starts with an import.

    Parameters
    ----------
    source : str
        The cell's source.
    first : bool
        Whether it is the notebook's first code cell, where the lectures gather their imports
        with a few helper definitions.

    Returns
    -------
    bool
        True for a cell that parses and whose statements are all ``import``/``from ... import``,
        or, when ``first``, whose first statement is one.
    """
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    imports = [isinstance(node, (ast.Import, ast.ImportFrom)) for node in body]
    return bool(body) and (imports[0] if first else all(imports))


def collapses(cell: dict, *, first: bool = False) -> bool:
    """Whether the site shows this cell's source collapsed (see the module docstring)."""
    if cell.get("cell_type") != "code":
        return False
    metadata = cell.get("metadata", {})
    source = "".join(cell.get("source", ""))
    role = metadata.get("kpca", {}).get("role")
    hidden = metadata.get("jupyter", {}).get("source_hidden", False)
    return role in COLLAPSED_ROLES or hidden is True or is_setup_cell(source, first=first)


def tag_notebook(notebook: dict) -> dict:
    """A copy of ``notebook`` whose collapsed cells carry the ``hide-input`` tag.

    Everything else (sources, outputs, cell ids, widget state) is kept as stored.
    """
    tagged = copy.deepcopy(notebook)
    codes = [cell for cell in tagged.get("cells", []) if cell.get("cell_type") == "code"]
    for cell in codes:
        if collapses(cell, first=cell is codes[0]):
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            if COLLAPSED not in tags:
                tags.append(COLLAPSED)
    return tagged


def stage(root: Path, dest: Path, *, sections: Iterable[str] = SECTIONS) -> list[Path]:
    """Copy the site's sources from the repository ``root`` into an empty ``dest``.

    Returns the staged notebooks, relative to ``dest``. ``dest`` keeps the repository's
    layout, so links between notebooks and the launch links' paths stay as they are.
    """
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in ("conf.py", "index.md"):
        shutil.copy2(root / "site" / name, dest / name)
    shutil.copytree(root / "site" / "_static", dest / "_static")
    staged = []
    for section in sections:
        notebooks = sorted((root / section).glob("*.ipynb"))
        if not notebooks:
            raise SiteError(
                f"no notebooks in {root / section}: the site builds {', '.join(sections)}"
            )
        (dest / section).mkdir()
        for path in notebooks:
            notebook = json.loads(path.read_text(encoding="utf-8"))
            target = dest / section / path.name
            target.write_text(
                json.dumps(tag_notebook(notebook), ensure_ascii=False, indent=1) + "\n",
                encoding="utf-8",
            )
            staged.append(target.relative_to(dest))
    return staged


def _integrity(path: Path) -> str:
    return base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def widget_manager(cache: Path, *, npm: str = "npm") -> Path:
    """The ``dist/`` folder of the pinned ipywidgets HTML manager, fetched once into ``cache``.

    The tarball comes from the npm registry (``npm pack``) and is refused unless its SHA-512
    is the pinned one.
    """
    name, _, version = WIDGET_MANAGER.rpartition("@")
    dist = cache / f"html-manager-{version}" / "dist"
    if (dist / "embed.js").is_file():
        return dist
    cache.mkdir(parents=True, exist_ok=True)
    if shutil.which(npm) is None:
        raise SiteError(
            f"make site fetches the ipywidgets HTML manager ({WIDGET_MANAGER}) once with npm, "
            "and npm is not on PATH: install Node.js and npm (Debian: apt-get install npm)"
        )
    run = subprocess.run(
        [npm, "pack", WIDGET_MANAGER, "--pack-destination", str(cache), "--silent"],
        capture_output=True,
        text=True,
        check=False,
    )
    tarball = cache / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
    if run.returncode != 0 or not tarball.is_file():
        raise SiteError(
            f"npm pack {WIDGET_MANAGER} failed (exit {run.returncode}): "
            f"{(run.stderr or run.stdout).strip()[-500:]}; check that the npm registry "
            "is reachable (npm config get registry)"
        )
    found = _integrity(tarball)
    if found != WIDGET_MANAGER_SHA512:
        tarball.unlink()
        raise SiteError(
            f"{tarball.name} has SHA-512 {found}, not the pinned {WIDGET_MANAGER_SHA512}: "
            "refusing it (a changed package or a corrupt download); fetch it again"
        )
    unpacked = dist.parent
    if unpacked.exists():
        shutil.rmtree(unpacked)
    with tarfile.open(tarball) as archive:  # regular files under package/ only, written by us
        for member in archive.getmembers():
            name = member.name.removeprefix("package/")
            parts = Path(name).parts
            if (
                not member.isfile()
                or name == member.name
                or name.endswith(".map")
                or Path(name).is_absolute()
                or ".." in parts
            ):
                continue
            target = unpacked.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None  # a regular file
            target.write_bytes(source.read())
    if not (dist / "embed.js").is_file():
        raise SiteError(
            f"{tarball.name} has no dist/embed.js: {WIDGET_MANAGER} is not the expected package"
        )
    return dist


def repository_url(root: Path) -> str:
    """The repository the launch links open: ``[project.urls] Repository`` of pyproject.toml."""
    if sys.version_info < (3, 11):  # pragma: no cover - the site's Sphinx needs 3.11 anyway
        raise SiteError("make site needs Python >= 3.11 (tomllib, Sphinx 9)")
    import tomllib

    urls = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"].get(
        "urls", {}
    )
    url = os.environ.get("KPCA_SITE_REPOSITORY") or urls.get("Repository")
    if not url:
        raise SiteError(
            "no repository for the launch links: set [project.urls] Repository in "
            "pyproject.toml (or KPCA_SITE_REPOSITORY)"
        )
    return url


def build(
    root: Path, out: Path, *, work: Path | None = None, warnings_as_errors: bool = True
) -> Path:
    """Build the site of the repository ``root`` into ``out``; return ``out/index.html``.

    ``work`` (default ``root/build/site-src``) holds the staged sources and Sphinx's doctrees.
    Raises :class:`SiteError` when Sphinx fails or (by default) warns.
    """
    root = root.resolve()
    work = (work or root / "build" / "site-src").resolve()
    source = work / "src"
    stage(root, source)
    shutil.copytree(widget_manager(root / "build" / "site-cache"), source / "_static" / "widgets")
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-q",
        "-d",
        str(work / "doctrees"),
        *(["-W", "--keep-going"] if warnings_as_errors else []),
        str(source),
        str(out),
    ]
    env = {**os.environ, "KPCA_SITE_REPOSITORY": repository_url(root)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SiteError(f"sphinx-build failed (exit {done.returncode}):\n{done.stderr.strip()}")
    return out / "index.html"


def main(argv: list[str] | None = None) -> int:
    """``python -m kpca_lib.course.site [--out DIR]``: build the course website."""
    parser = argparse.ArgumentParser(
        prog="python -m kpca_lib.course.site", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="the course repository (default: .)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="where the HTML goes (default: build/site)"
    )
    args = parser.parse_args(argv)
    out = (args.out or args.root / "build" / "site").resolve()
    start = time.perf_counter()
    try:
        index = build(args.root, out)
    except SiteError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    pages = sum(1 for section in SECTIONS for _ in (out / section).glob("*.html"))
    print(f"site: {pages} pages in {time.perf_counter() - start:.0f} s, 0 warnings; open {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
