"""Seals on the files the grader writes and reads back, so an edit is detected and named.

``grades.json`` and ``students/index.json`` are the grader's own record; kpca-course acts on
what it reads back from them (the rows to export, which folder holds whose feedback). Each
is written with a ``.sig`` beside it: an HMAC-SHA256 of its bytes under a key drawn from the
grading secret, which lives outside the gradebook folder (``$KPCA_GRADING_SECRET``, else
``~/.config/kpca-course/grading-secret``, as :func:`kpca_lib.course.grading.config.
grading_secret` finds it; never made here). A file whose seal does not match was changed
outside kpca-course, written with another secret (another machine), or by an older version:
the caller says so, and re-derives what it can instead of trusting it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

__all__ = ["seal_key", "signature", "sealed"]


def seal_key(purpose: str) -> bytes | None:
    """The key that seals the file ``purpose`` names (``None`` without a grading secret)."""
    secret = os.environ.get("KPCA_GRADING_SECRET", "").encode()
    if not secret:
        try:
            path = Path.home() / ".config" / "kpca-course" / "grading-secret"
            secret = path.read_text().strip().encode()
        except OSError:
            return None
    if not secret:
        return None
    return hmac.new(secret, f"kpca-course {purpose}".encode(), hashlib.sha256).digest()


def signature(data: bytes, key: bytes) -> bytes:
    """The ``.sig`` file's bytes for ``data``."""
    return (hmac.new(key, data, hashlib.sha256).hexdigest() + "\n").encode()


def sealed(data: bytes, sig: bytes | None, key: bytes | None) -> str:
    """``""`` when ``sig`` seals ``data`` under ``key``, else why not (for a message)."""
    if key is None:
        return "it cannot be verified (no grading secret)"
    if sig is None:
        return "its signature is missing"
    if not hmac.compare_digest(sig.strip(), signature(data, key).strip()):
        return "its signature does not match"
    return ""
