"""The README and the reference pages in docs/: every relative link goes to a file of this
repository, every #anchor to a heading of its page (as GitHub makes anchors), every docs page
is linked from the README, and every docs page has a title, an introduction and a link back.

(The README's table of contents: tests/test_packaging.py. The student edition's README:
tests/test_edition.py, with :func:`broken_links`.)
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from test_packaging import github_anchor

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^ *```.*?^ *```", "", text, flags=re.S | re.M)


def anchors(text: str) -> set[str]:
    """The #anchors of every heading (#, ##, …) of a Markdown text, outside code blocks; a
    repeated heading gets -1, -2, … as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for title in re.findall(r"^#{1,6} +(.+?) *#* *$", _without_code_blocks(text), re.M):
        slug = github_anchor(title)
        out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return out


def links(text: str) -> list[str]:
    """The targets of the Markdown links and images of a text, outside code (blocks and spans)."""
    prose = re.sub(r"`[^`]*`", "", _without_code_blocks(text))
    return re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose)


def broken_links(page: Path, root: Path) -> list[str]:
    """Each relative link of ``page`` that does not resolve inside ``root``: to no file, out
    of ``root``, or to a #anchor that is not a heading of the Markdown page it names."""
    problems = []
    text = page.read_text(encoding="utf-8")
    for target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / unquote(path)).resolve() if path else page
        where = f"{page.relative_to(root)}: ({target})"
        if not file.is_relative_to(root.resolve()):
            problems.append(f"{where} leaves the repository")
        elif not file.exists():
            problems.append(f"{where}: no such file")
        elif anchor and file.suffix == ".md":
            own = text if file == page else file.read_text(encoding="utf-8")
            if unquote(anchor) not in anchors(own):
                problems.append(f"{where}: no heading with that anchor in {file.name}")
    return problems


def test_there_are_docs_pages():
    assert {p.name for p in DOCS} >= {"benchmarks.md", "grading.md", "scale-out.md", "security.md"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    assert broken_links(page, ROOT) == []


def test_every_docs_page_is_linked_from_the_readme():
    readme = ROOT / "README.md"
    linked = {
        (readme.parent / unquote(t.partition("#")[0])).resolve()
        for t in links(readme.read_text(encoding="utf-8"))
        if t.startswith("docs/")
    }
    missing = [p.name for p in DOCS if p.resolve() not in linked]
    assert not missing, f"docs pages the README does not link to: {missing}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_docs_page_has_a_title_an_introduction_and_a_way_back(page):
    text = page.read_text(encoding="utf-8")
    blocks = [b.strip() for b in text.split("\n\n") if b.strip()]
    assert re.fullmatch(r"# \S.*", blocks[0]), f"{page.name} must start with a # title"
    intro = blocks[1]
    assert not intro.startswith(("#", "-", "*", "|", "```", "[")), (
        f"{page.name}: the title is followed by an introduction paragraph, not {intro[:40]!r}"
    )
    assert "](../README.md" in text, f"{page.name} links back to the README"


def test_broken_links_finds_what_it_should(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "a.md").write_text("# A\n\n## Some `code` section\n", encoding="utf-8")
    page = tmp_path / "docs" / "p.md"
    page.write_text(
        "# P\n\nIntro [ok](../a.md#some-code-section), [self](#p), [web](https://x.invalid),\n"
        "[gone](missing.md), [out](../../elsewhere.md), [no anchor](../a.md#nothing),\n"
        "`[in code](nowhere.md)`\n\n```\n[in a block](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    found = broken_links(page, tmp_path)
    assert [f.split(": (")[1].split(")")[0] for f in found] == [
        "missing.md",
        "../../elsewhere.md",
        "../a.md#nothing",
    ], found
