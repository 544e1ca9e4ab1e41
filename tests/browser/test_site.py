"""The course website (``make site``), built with warnings as errors and read offline.

The site is built once into a temporary folder, exactly as ``make site`` builds it, and
served on 127.0.0.1. Every page is opened in headless Chromium with every request that does
not go to that server refused and recorded (there must be none). On each page:

* the math is typeset by the site's own MathJax (no raw ``\\(`` left, no TeX error);
* every figure loads (``naturalWidth > 0``), and lectures with plots have figures;
* saved widget state is drawn by the site's widget manager (notebooks 04, 06, 07);
* set-up and question cells are collapsed, and there is a Binder launch link to the page's
  own notebook;
* every local link (between lectures, to the homework, to anchors) resolves.

Screenshots are kept in ``build/screenshots/site-*.png``.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import json
import threading
import urllib.parse
from pathlib import Path

import pytest

from kpca_lib.course import site

from .conftest import ROOT, SCREENSHOTS

pytest.importorskip("playwright.sync_api")
pytest.importorskip("myst_nb")

pytestmark = pytest.mark.browser

PAGES = sorted(
    f"{section}/{path.stem}"
    for section in site.SECTIONS
    for path in (ROOT / section).glob("*.ipynb")
)


def widget_pages() -> set[str]:
    """Pages whose notebook stores widget state and shows at least one widget."""
    found = set()
    for name in PAGES:
        notebook = json.loads((ROOT / f"{name}.ipynb").read_text(encoding="utf-8"))
        shown = any(
            "application/vnd.jupyter.widget-view+json" in output.get("data", {})
            for cell in notebook["cells"]
            for output in cell.get("outputs", [])
        )
        if notebook["metadata"].get("widgets") and shown:
            found.add(name)
    return found


def figure_pages() -> set[str]:
    """Pages whose notebook stores at least one image output."""
    found = set()
    for name in PAGES:
        notebook = json.loads((ROOT / f"{name}.ipynb").read_text(encoding="utf-8"))
        if any(
            "image/png" in output.get("data", {})
            for cell in notebook["cells"]
            for output in cell.get("outputs", [])
        ):
            found.add(name)
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "html"
    site.build(ROOT, out, work=out.parent / "work")  # -W: a warning fails here
    return out


@pytest.fixture(scope="module")
def server(built):
    handler = functools.partial(_QuietHandler, directory=str(built))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_every_local_link_resolves(built):
    pages = sorted(built.rglob("*.html"))
    assert {f"{name}.html" for name in PAGES} <= {str(p.relative_to(built)) for p in pages}
    parsed = {path: _parse(path) for path in pages}
    checked = 0
    for path, links in parsed.items():
        for href in links.hrefs:
            url = urllib.parse.urlsplit(href)
            if url.scheme or url.netloc:
                continue
            target = (path.parent / urllib.parse.unquote(url.path)).resolve() if url.path else path
            if target.is_dir():
                target = target / "index.html"
            assert target.is_file(), f"{path.relative_to(built)}: link {href!r} to a missing file"
            if url.fragment and target.suffix == ".html":
                assert url.fragment in _parse(target).ids, (
                    f"{path.relative_to(built)}: no #{url.fragment}"
                )
            checked += 1
    # The lectures link to each other ("notebook 05 ..."): those links are among the checked ones.
    lecture_06 = parsed[built / "notebooks" / "06_two_moons.html"].hrefs
    assert "05_kernel_pca.html" in lecture_06 and checked > 100


def _open(page, url: str, origin: str) -> list[str]:
    outside: list[str] = []

    def route(r):
        if r.request.url.startswith(origin):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(url)
    page.wait_for_load_state("load")
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.evaluate("() => MathJax.startup.promise")
    return outside


@pytest.mark.parametrize("name", PAGES, ids=[name.replace("/", "-") for name in PAGES])
def test_page_offline(page, server, name):
    outside = _open(page, f"{server}{name}.html", server)
    article = page.locator("article")

    math = page.locator("article .math").count()
    typeset = page.locator("article mjx-container").count()
    assert math > 0 and typeset >= math, (math, typeset)
    assert page.locator("mjx-merror").count() == 0
    assert "\\(" not in article.inner_text()

    images = page.evaluate(
        "() => [...document.querySelectorAll('article img')]"
        ".map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0])"
    )
    assert all(ok for _, ok in images), [src for src, ok in images if not ok]
    if name in figure_pages():
        assert len(images) > 0

    if name in widget_pages():
        page.wait_for_selector("article .jupyter-widgets")
        assert (
            page.locator("article .jupyter-widgets.widget-slider, article .widget-slider").count()
            > 0
        )
        widget = page.locator("article .cell_output:has(.jupyter-widgets)").first
        widget.scroll_into_view_if_needed()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        widget.screenshot(path=str(SCREENSHOTS / f"site-{name.replace('/', '-')}-widget.png"))

    collapsed = page.locator("article details.hide.above-input")
    assert (
        collapsed.count() >= 1
        and page.locator("article details.hide.above-input[open]").count() == 0
    )

    launch = page.locator("a[href^='https://mybinder.org/v2/gh/']")
    assert launch.count() == 1
    assert launch.get_attribute("href").endswith(f"urlpath=lab/tree/{name}.ipynb")

    assert outside == []
    errors = [line for line in page.console_log if line.startswith(("[error]", "[pageerror]"))]
    assert errors == [], errors
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"site-{name.replace('/', '-')}.png"))


def test_index_lists_lectures_and_homework(page, server):
    outside = _open(page, f"{server}index.html", server)
    hrefs = set(
        page.evaluate(
            "() => [...document.querySelectorAll('article a')].map(a => a.getAttribute('href'))"
        )
    )
    assert {f"{name}.html" for name in PAGES} <= hrefs
    assert outside == []
    page.screenshot(path=str(SCREENSHOTS / "site-index.png"), full_page=True)
