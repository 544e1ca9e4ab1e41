"""The environment JupyterLab runs in can draw the course's widgets.

"Error displaying widget" in a student's JupyterLab has two usual causes (see the
README's Troubleshooting section): the Python package ipywidgets and JupyterLab's
front end for it (jupyterlab_widgets) are out of step, or the notebook runs in a
kernel from another environment than JupyterLab and kpca_lib. These tests check
both, with the same tools JupyterLab uses to find its extensions and kernels.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from jupyter_core.paths import jupyter_path
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
FIX = "see README.md, Troubleshooting"

# ipywidgets major -> (jupyterlab_widgets major, widgetsnbextension major, labextension major)
PAIRS = {8: (3, 4, 5)}


def _version(name: str) -> Version:
    try:
        return Version(metadata.version(name))
    except metadata.PackageNotFoundError:
        pytest.fail(f"{name} is not installed in {sys.prefix}; run `make test` to set up .venv")


def _declared(package: str, dependency: str) -> Requirement:
    """``package``'s declared requirement on ``dependency`` (from its installed metadata)."""
    for line in metadata.requires(package) or []:
        req = Requirement(line)
        if canonicalize_name(req.name) == canonicalize_name(dependency) and req.marker is None:
            return req
    pytest.fail(f"{package} declares no requirement on {dependency}")


# --------------------------------------------------------------------------- widgets pairing


@pytest.mark.parametrize("frontend", ["jupyterlab_widgets", "widgetsnbextension"])
def test_ipywidgets_and_its_frontend_are_a_matching_pair(frontend):
    ipywidgets = _version("ipywidgets")
    installed = _version(frontend)
    required = _declared("ipywidgets", frontend)
    assert required.specifier.contains(installed, prereleases=True), (
        f"ipywidgets {ipywidgets} needs {required}, but {frontend} {installed} is installed: "
        f"widgets will show 'Error displaying widget' ({FIX})"
    )
    assert ipywidgets.major in PAIRS, f"the course is tested with ipywidgets 8.x, not {ipywidgets}"
    want = PAIRS[ipywidgets.major][0 if frontend == "jupyterlab_widgets" else 1]
    assert installed.major == want, (
        f"ipywidgets {ipywidgets.major}.x pairs with {frontend} {want}.x, not {installed}"
    )


def _first_labextension(name: str) -> Path:
    """The copy of a prebuilt extension JupyterLab loads: the first one on its search path."""
    for directory in jupyter_path("labextensions"):
        package = Path(directory, *name.split("/"), "package.json")
        if package.is_file():
            return package
    pytest.fail(f"JupyterLab finds no {name} extension in {jupyter_path('labextensions')} ({FIX})")


def test_jupyterlab_loads_the_widget_extension_of_this_environment():
    package = _first_labextension("@jupyter-widgets/jupyterlab-manager")
    data = json.loads(package.read_text())
    version = Version(data["version"])
    lab_widgets = _version("jupyterlab_widgets")
    want = PAIRS[_version("ipywidgets").major][2]
    assert version.major == want, (
        f"JupyterLab loads @jupyter-widgets/jupyterlab-manager {version} from {package.parent}, "
        f"which does not draw ipywidgets {_version('ipywidgets')} widgets ({FIX})"
    )
    # The copy loaded is the one jupyterlab_widgets installed, not a stale one elsewhere.
    dist = metadata.distribution("jupyterlab_widgets")
    installed = [
        Path(dist.locate_file(f)).resolve()
        for f in dist.files or []
        if str(f).endswith("jupyterlab-manager/package.json")
    ]
    assert package.resolve() in installed, (
        f"JupyterLab loads the widget extension from {package.parent}, not the copy installed by "
        f"jupyterlab_widgets {lab_widgets} ({installed}); remove the stale copy ({FIX})"
    )


@pytest.mark.slow
def test_jupyter_labextension_list_reports_widgets_enabled_ok():
    """The README's own check: `jupyter labextension list` shows the widget manager enabled, OK."""
    jupyter = Path(sys.executable).with_name("jupyter")
    out = subprocess.run(
        [str(jupyter), "labextension", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    line = next((ln for ln in text.splitlines() if "@jupyter-widgets/jupyterlab-manager" in ln), "")
    assert re.search(r"v5\.\S+\s+enabled\s+OK", line), (
        f"`jupyter labextension list` does not report the widget manager enabled and OK:\n{text}"
    )


# --------------------------------------------------------------------------- the kernel


def _kernel_python() -> tuple[list[str], dict[str, str]]:
    """argv[0] and environment of the python3 kernel, resolved as JupyterLab resolves them."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    # jupyter_client turns a bare "python" into the server's own interpreter; this test runs
    # in the interpreter `make lab` runs JupyterLab with (.venv/bin/python).
    cmd = KernelManager(kernel_name="python3").format_kernel_cmd()
    env = {**os.environ, **spec.env}
    return cmd, env


KERNEL_PROBE = """
import json, sys
from importlib import metadata
import ipywidgets, kpca_lib, kpca_lib.widgets
print(json.dumps({
    "prefix": sys.prefix,
    "kpca_lib": kpca_lib.__file__,
    "kpca_version": kpca_lib.__version__,
    "ipywidgets": ipywidgets.__version__,
    "requires": metadata.requires("ipywidgets"),
}))
"""


def test_python3_kernel_imports_kpca_lib(tmp_path):
    cmd, env = _kernel_python()
    assert cmd[1:3] == ["-m", "ipykernel_launcher"], cmd
    python = cmd[0]
    # Run from an unrelated directory: the kernel must find kpca_lib installed, not by accident
    # of the working directory.
    out = subprocess.run(
        [python, "-c", KERNEL_PROBE],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, (
        f"the python3 kernel ({python}) cannot import kpca_lib and ipywidgets: the notebooks would "
        f"fail and widgets would not display. Select the .venv kernel ({FIX}).\n{out.stderr}"
    )
    kernel = json.loads(out.stdout.strip().splitlines()[-1])
    import kpca_lib

    assert Path(kernel["kpca_lib"]).resolve() == Path(kpca_lib.__file__).resolve(), (
        f"the kernel imports kpca_lib from {kernel['kpca_lib']}, not from this checkout ({FIX})"
    )
    assert kernel["kpca_version"] == kpca_lib.__version__
    # the kernel's ipywidgets pairs with the front end JupyterLab loads
    lab_widgets = _version("jupyterlab_widgets")
    required = next(
        Requirement(r)
        for r in kernel["requires"]
        if canonicalize_name(Requirement(r).name) == "jupyterlab-widgets"
    )
    assert required.specifier.contains(lab_widgets, prereleases=True), (
        f"the kernel's ipywidgets {kernel['ipywidgets']} needs {required}; JupyterLab has "
        f"jupyterlab_widgets {lab_widgets} ({FIX})"
    )
    assert Path(kernel["prefix"]).resolve() == Path(sys.prefix).resolve(), (
        f"the kernel runs in {kernel['prefix']}, JupyterLab in {sys.prefix} ({FIX})"
    )


def _notebooks() -> list[Path]:
    return sorted(
        p for d in ("notebooks", "solutions", "exercises") for p in (ROOT / d).glob("*.ipynb")
    )


def test_every_notebook_asks_for_the_python3_kernel():
    """A notebook naming another kernel makes JupyterLab ask students to pick one."""
    available = KernelSpecManager().find_kernel_specs()
    wrong = {}
    for path in _notebooks():
        spec = json.loads(path.read_text()).get("metadata", {}).get("kernelspec", {})
        name = spec.get("name", "python3")
        if name != "python3" or name not in available:
            wrong[str(path.relative_to(ROOT))] = name
    assert not wrong, f"notebooks not on the python3 kernel: {wrong}"
