"""Text that a submission controls, shown as data: in Markdown and on one line.

Exception messages, reprs of the student's objects, the first line of a cell, a file name:
such text reaches the feedback files and the summary. It must read as what it is, never
as Markdown of the grader's own: no heading, link, image, raw HTML, table, code block,
list item or line of its own. :func:`markdown_text` makes any text one line of literal
inline Markdown; :func:`one_line` makes it one line of visible characters.

What :func:`markdown_text` does:

* line breaks (``\\n``, ``\\r``, form feeds, Unicode line and paragraph separators) become
  spaces, so the text never starts a line, hence never a block; terminal escape sequences
  are dropped and other control, format and odd space characters are shown as
  ``<U+XXXX>`` (:func:`visible`);
* every character that Markdown (CommonMark, GitHub's, Jupyter's) gives a meaning inline
  is backslash-escaped: ``\\ ` * _ { } [ ] < > # | ~ ! $ & @`` (emphasis, code, links and
  images, HTML and entities, tables, strikethrough, math, mentions);
* what renderers turn into links by themselves is broken up: ``://`` and ``www.``;
* a list marker or setext underline at the start (``-``, ``+``, ``=``, ``1.``) is escaped.

A backslash already followed by one of the characters escaped here is kept as that escape,
so escaping twice changes nothing: ``markdown_text(markdown_text(s)) == markdown_text(s)``
(a fragment one function escaped can be escaped again by the writer of the file). Only a
backslash written before such a character is lost: ``\\_`` in a message shows as ``_``.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["markdown_text", "one_line", "visible", "MARKDOWN_SPECIALS"]

#: The characters :func:`markdown_text` always escapes.
MARKDOWN_SPECIALS = "\\`*_{}[]<>#|~!$&@"
#: The characters it may escape (a backslash before one of them is an escape already made).
_ESCAPED = MARKDOWN_SPECIALS + ":/.-+=)"
_SET = "".join("\\" + c for c in _ESCAPED)

# Terminal control sequences: CSI (colours, cursor), OSC (titles, hyperlinks), and two-byte ones.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# Line breaks for Markdown, Python's str.splitlines and Unicode, with the spaces around them.
_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")


def _tokens(identifiers: bool) -> re.Pattern[str]:
    specials = "".join("\\" + c for c in MARKDOWN_SPECIALS)
    alternatives = [
        rf"(?P<pair>\\[{_SET}])",  # an escape already made: kept
        r"(?P<word>(?<=[^\W_])_+(?=[^\W_]))" if identifiers else "",  # phi_poly: never emphasis
        r"(?P<scheme>:(?=\\?/))",  # http://x shows as http\:\//x
        r"(?P<slash>/(?=\\?/))",
        r"(?P<www>(?i:www)\.)",
        rf"(?P<special>[{specials}])",
    ]
    return re.compile("|".join(a for a in alternatives if a))


_TOKENS = {False: _tokens(False), True: _tokens(True)}
_LEADING = re.compile(r"^(?:[-+=]|\d{1,9}(?=[.)]))")


def _escape(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind in ("pair", "word"):
        return match.group()
    if kind == "www":
        return match.group()[:3] + "\\."
    return "\\" + match.group()


def visible(text: str) -> str:
    """``text`` with control, format (bidi, zero-width), unassigned and odd space characters as ``<U+XXXX>``."""
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or (cat == "Zs" and ch != " "):
            out.append(f"<U+{ord(ch):04X}>")
        else:
            out.append(ch)
    return "".join(out)


def one_line(text: str) -> str:
    """``text`` on one line of visible characters: line breaks and tabs as spaces, terminal
    escape sequences dropped, other control and format characters as ``<U+XXXX>``, no
    leading or trailing space."""
    text = _ANSI.sub("", str(text))
    return visible(_BREAKS.sub(" ", text).replace("\t", " ")).strip()


def markdown_text(text: str, *, identifiers: bool = False) -> str:
    """``text`` as one line of literal inline Markdown (see the module's docstring).

    Parameters
    ----------
    text : str
        Any text (a message, a file name, a repr); not Markdown.
    identifiers : bool
        Leave an underscore between two letters or digits (``phi_poly``) unescaped: it is
        never emphasis in CommonMark, and a table meant to be read as plain text too stays
        readable. Off for text whose origin is not trusted to read well that way.

    Returns
    -------
    str
        Text that renders as ``one_line(text)``, character for character (but for a
        backslash that was written before an escaped character), as part of a paragraph,
        heading, list item, quote or table cell, wherever it is put on a line.
    """
    out = _TOKENS[identifiers].sub(_escape, one_line(text))
    lead = _LEADING.match(out)
    if lead:
        at = lead.end() if lead.group()[0].isdigit() else 0
        out = out[:at] + "\\" + out[at:]
    return out
