"""`make lab` as a newcomer meets it: JupyterLab opens on lecture 01, with no news toast.

The command is the one `make -n lab` prints (so the test follows course.mk), run with
`--no-browser` on a free port of 127.0.0.1 with its own token and empty user settings, as
on a first start. The URL it prints for the student to open must lead to lecture 01 (not
the Launcher), the page shows that notebook, and the course's JupyterLab settings say no
news and no update check.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from .conftest import ROOT, START_TIMEOUT_S, TIMEOUT_MS, _free_port, open_lab, require_browser, shot

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

pytestmark = pytest.mark.browser

LECTURE_01 = "notebooks/01_issues_with_pca.ipynb"


def make_lab_command() -> list[str]:
    """The `jupyter lab` command of `make lab`, as make would run it."""
    out = subprocess.run(["make", "-s", "-n", "lab"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    lines = [line for line in out.splitlines() if "jupyter lab" in line]
    assert len(lines) == 1, out
    return shlex.split(lines[0])


def wait_until_ready(proc: subprocess.Popen, port: int, token: str, log_path) -> str:
    """The URL `make lab` printed, once the server answers its own readiness probe
    (``/api/status`` with the token); fails naming what it waited for and the log."""
    deadline = time.monotonic() + START_TIMEOUT_S
    printed = None
    while True:
        if proc.poll() is not None:
            pytest.fail(f"`make lab` exited with {proc.returncode}:\n{log_path.read_text()}")
        if printed is None:
            found = re.findall(rf"http://127\.0\.0\.1:{port}/\S+", log_path.read_text())
            printed = found[-1] if found else None
        if printed is not None:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/api/status",
                                             headers={"Authorization": f"token {token}"})
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    if response.status == 200:
                        return printed
            except (OSError, urllib.error.URLError):
                pass
        if time.monotonic() > deadline:
            waited = "the URL for the student" if printed is None else "an answer on /api/status"
            pytest.fail(f"`make lab` did not print {waited} within {START_TIMEOUT_S} s; "
                        f"its log:\n{log_path.read_text()}")
        time.sleep(0.2)  # polling the server's signal, not waiting for it


def test_make_lab_opens_lecture_01_without_news(page, tmp_path):
    require_browser()
    port, token = _free_port(), secrets.token_hex(24)
    cmd = [*make_lab_command(), "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}"]
    cmd[0] = str(ROOT / cmd[0])
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_DATA_DIR": str(tmp_path / "data"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),  # a first start: none
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    log_path = tmp_path / "lab.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        printed = wait_until_ready(proc, port, token, log_path)
        # The URL printed for the student opens lecture 01, not the Launcher.
        assert printed.startswith(f"http://127.0.0.1:{port}/lab/tree/{LECTURE_01}?token="), printed

        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/apputils-extension:notification",
            headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            schema = json.loads(response.read())["schema"]["properties"]  # defaults + overrides
        defaults = {k: schema[k].get("default") for k in ("fetchNews", "checkForUpdates")}
        assert defaults == {"fetchNews": "false", "checkForUpdates": False}, defaults

        # the log hides the token
        open_lab(page, printed.split("?")[0] + f"?token={token}", "make-lab", log_path)
        tab = page.locator(".lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel",
                           has_text="01_issues_with_pca.ipynb")
        expect(tab.first).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.locator(".jp-NotebookPanel").first).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.locator(".jp-Launcher")).to_have_count(0, timeout=TIMEOUT_MS)
        shot(page, "make-lab-lecture-01")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_a_page_that_does_not_come_up_fails_naming_the_stage(page, tmp_path):
    """What a blank page gives: the stage it stopped at, a screenshot and the log's end."""
    require_browser()
    log = tmp_path / "lab.log"
    log.write_text("line 1\nthe server's last words\n")
    with pytest.raises(pytest.fail.Exception) as failed:
        open_lab(page, "data:text/html,<title>blank</title>", "blank-page", log, limit_s=1)
    message = str(failed.value)
    assert "never showed that its scripts built the application shell (#main)" in message
    assert "the server's last words" in message
    picture = ROOT / "build" / "screenshots" / "blank-page-not-ready.png"
    assert picture.is_file() and str(picture) in message
