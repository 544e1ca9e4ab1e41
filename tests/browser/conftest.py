"""A real JupyterLab, driven by headless Chromium through Playwright for Python.

* ``lab``: JupyterLab started from this environment (the interpreter running pytest,
  i.e. ``.venv``) on 127.0.0.1 with a random port and token. It serves a temporary
  folder; tests copy the repository's notebooks into it with ``lab.serve(path)``, so
  the repository is never modified. Its settings, workspaces and runtime files live in
  the temporary folder too. It is always shut down (SIGTERM, then SIGKILL), and its
  log is kept as ``build/jupyterlab.log`` when a browser test failed.
* ``page``: a fresh browser tab (1400×900) of Debian's Chromium
  (``executable_path``; Playwright cannot download a browser here). ``shot(page,
  name)`` saves ``build/screenshots/NAME.png``; a failing test leaves
  ``build/screenshots/<test>-FAILED.png`` and the tab's console log behind.

Without Chromium (``KPCA_CHROMIUM``, default ``/usr/bin/chromium``) the tests are
skipped with a message naming the fix, except under CI (``CI`` set), where that is
an error: CI installs Chromium (``.ci/run``) and must run these tests.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
SCREENSHOTS = BUILD / "screenshots"
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # one server per worker, if ever spread
LAB_LOG = BUILD / (f"jupyterlab-{_WORKER}.log" if _WORKER else "jupyterlab.log")
CHROMIUM = Path(os.environ.get("KPCA_CHROMIUM", "/usr/bin/chromium"))
# Without the background-networking flags Chromium tries to reach Google's services, which a
# closed network refuses; --headless is added by Playwright.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--no-proxy-server",
]
VIEWPORT = {"width": 1400, "height": 900}
TIMEOUT_MS = 60_000  # two shared cores: be patient, but never sleep blindly
START_TIMEOUT_S = 180  # a limit, not a delay: every wait ends as soon as its signal shows

# JupyterLab's own signals, in the order they come: the page's scripts have built the
# application shell (#main), then the splash screen it shows while restoring the workspace is
# gone (app.restored), so the documents it opens are on the page.
LAB_STAGES = (
    ("its scripts built the application shell (#main)",
     "() => document.querySelector('#main') !== null"),
    ("it restored the workspace (the splash screen #jupyterlab-splash is gone)",
     "() => document.querySelector('#main') !== null"
     " && document.querySelector('#jupyterlab-splash') === null"),
)  # fmt: skip

_FAILED = pytest.StashKey[bool]()


def require_browser() -> None:
    """Skip (fail under CI) when Chromium or Playwright is missing, before starting anything."""
    if not CHROMIUM.exists():
        reason = f"no Chromium at {CHROMIUM}; install with apt-get install chromium"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "Playwright for Python is not installed (make test installs it)"
        else:
            return
    if os.environ.get("CI"):
        pytest.fail(f"browser tests cannot run under CI: {reason}", pytrace=False)
    pytest.skip(f"SKIPPED browser tests: {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)
    if report.failed and item.get_closest_marker("browser"):
        item.config.stash[_FAILED] = True


def shot(page, name: str) -> Path:
    """Save a screenshot of the tab to build/screenshots/NAME.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


# --------------------------------------------------------------------------- JupyterLab


def open_lab(page, url: str, name: str, log: Path | None = None,
             limit_s: float = START_TIMEOUT_S) -> None:
    """Open JupyterLab at ``url`` and wait for its own readiness signals (``LAB_STAGES``).

    Each stage is waited for until it shows (at most ``limit_s``); a page that does not
    come up fails the test naming the stage it stopped at, with a screenshot
    (``build/screenshots/NAME-not-ready.png``) and the end of the server's log.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    # "commit": the navigation itself; the page's scripts may take long on a busy machine,
    # and the stages below wait for what they build rather than for the load event.
    page.goto(url, wait_until="commit", timeout=limit_s * 1000)
    for stage, condition in LAB_STAGES:
        try:
            page.wait_for_function(condition, timeout=limit_s * 1000)
        except PlaywrightTimeout:
            picture = shot(page, f"{name}-not-ready")
            tail = ""
            if log is not None and log.exists():
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            pytest.fail(
                f"JupyterLab's page did not come up within {limit_s:g} s: it never showed "
                f"that {stage}. Screenshot: {picture}. Browser console: "
                f"{getattr(page, 'console_log', [])[-10:]}. Server log (end):\n{tail}",
                pytrace=False,
            )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running JupyterLab server."""

    def __init__(self, workdir: Path) -> None:
        self.root = workdir / "course"
        self.root.mkdir()
        self.port = _free_port()
        self.token = secrets.token_hex(24)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self._workdir = workdir
        self._log = None

    # -- process ---------------------------------------------------------------
    def start(self) -> None:
        settings = self._workdir / "settings"
        # No news or update check: they would ask the student in a toast and go online.
        notification = settings / "@jupyterlab" / "apputils-extension"
        notification.mkdir(parents=True)
        (notification / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False})
        )
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(self._workdir / "config"),
            "JUPYTER_RUNTIME_DIR": str(self._workdir / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(self._workdir / "workspaces"),
        }
        # The project's environment: the `jupyter` next to the interpreter running the tests
        # (.venv/bin/jupyter, as `make lab` runs it).
        jupyter = Path(sys.executable).with_name("jupyter")
        cmd = [
            str(jupyter), "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            # A safety net if this process is killed before its finalizer runs.
            "--MappingKernelManager.cull_idle_timeout=900",
            "--ServerApp.shutdown_no_activity_timeout=900",
        ]  # fmt: skip
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI runs as root
        BUILD.mkdir(exist_ok=True)
        self._log = open(LAB_LOG, "w")  # noqa: SIM115 (closed in stop)
        self._log.write(f"$ {' '.join(cmd).replace(self.token, '<token>')}\n")
        self._log.flush()
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=self.root,
            start_new_session=True,  # its own process group: stop() ends it and nothing else
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}; see {LAB_LOG}")
            try:
                self.api("GET", "status")
                return
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"JupyterLab did not answer within {START_TIMEOUT_S} s; see {LAB_LOG}"
                    ) from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)  # shuts its kernels down, then exits
                self.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()

    # -- REST API --------------------------------------------------------------
    def api(self, method: str, path: str):
        request = urllib.request.Request(
            f"{self.url}/api/{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        for kernel in self.api("GET", "kernels"):
            self.api("DELETE", f"kernels/{kernel['id']}")

    # -- files -----------------------------------------------------------------
    def serve(self, path: Path) -> Path:
        """Copy a notebook of the repository into the served folder; return the copy."""
        target = self.root / path.name
        shutil.copy2(path, target)
        return target

    def open_url(self, name: str) -> str:
        # ?reset: a clean workspace (only this notebook open); the token logs the tab in.
        return f"{self.url}/lab/tree/{name}?reset&token={self.token}"


@pytest.fixture(scope="session")
def lab(tmp_path_factory, request):
    require_browser()  # no server for nothing
    lab = Lab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        lab.start()
        yield lab
    finally:
        lab.stop()
        if request.config.stash.get(_FAILED, False):
            print(f"\nJupyterLab's log is kept in {LAB_LOG}")
        else:
            LAB_LOG.unlink(missing_ok=True)


@pytest.fixture
def served(lab):
    """The lab, with every kernel shut down after the test (each test starts clean)."""
    yield lab
    try:
        lab.shutdown_kernels()
    except (OSError, urllib.error.URLError):
        pass


# --------------------------------------------------------------------------- Chromium


@pytest.fixture(scope="session")
def browser():
    require_browser()
    from playwright.sync_api import sync_playwright

    manager = sync_playwright().start()
    try:
        browser = manager.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()
    finally:
        manager.stop()


@pytest.fixture
def page(browser, request):
    name = request.node.name
    for stale in SCREENSHOTS.glob(f"{name}-*"):  # a previous run's failure
        stale.unlink()
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
    page.on("pageerror", lambda e: console.append(f"[pageerror] {e}"))
    page.console_log = console
    try:
        yield page
    finally:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        (SCREENSHOTS / f"{name}-console.log").write_text("\n".join(console) + "\n")
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            try:
                print(f"\nscreenshot of the failure: {shot(page, f'{name}-FAILED')}")
                (SCREENSHOTS / f"{name}-FAILED.html").write_text(page.content())
            except Exception as exc:  # the tab may be gone; keep the original failure
                print(f"\nno failure screenshot: {exc}")
            print(f"browser console: {SCREENSHOTS / f'{name}-console.log'}")
        context.close()
