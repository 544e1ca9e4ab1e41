"""``students/index.json`` is signed (issue 39, item 5): an edit is detected and named, never used.

The index keeps the names handed back once (a student's folder, a row's file) from one
refresh to the next. It lives in the gradebook folder, where anyone who can write there can
edit it; an edited index once made ``export --archives`` put one student's feedback into
another's folder and zip, silently. Now the index is signed with a key drawn from the grading
secret (outside the gradebook folder): an index whose signature does not match is not used
(every row's place is derived from its row id again), the command says so, and the index is
rewritten and signed.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from kpca_lib.course.cli import main
from kpca_lib.course.grading.handback import trees

sys.path.insert(0, str(Path(__file__).parent))
from test_grading import ASSIGNMENT, blank, sandbox_or_skip, student_copy  # noqa: E402


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-index-secret")


def test_the_signature_is_checked_and_its_absence_named(monkeypatch):
    data = b'{"alice/01": {"folder": "alice", "html": "01.html", "md": "01.md"}}\n'
    key = trees._index_key()
    good = trees._signature(data, key)
    assert trees._signed_index(data, good) == (data, "")
    assert trees._signed_index(None, None) == (None, "")
    edited = data.replace(b'"alice", "html"', b'"bob", "html"')
    got, why = trees._signed_index(edited, good)
    assert got is None and "changed outside kpca-course" in why and "does not match" in why
    got, why = trees._signed_index(data, None)
    assert got is None and "is missing" in why
    monkeypatch.setenv("KPCA_GRADING_SECRET", "another-secret")
    assert trees._signed_index(data, good)[0] is None


def test_the_key_is_the_graders_secret(monkeypatch, tmp_path):
    from kpca_lib.course.grading.config import grading_secret

    monkeypatch.delenv("KPCA_GRADING_SECRET")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert trees._index_key() is None  # none yet, and none is made here
    assert not (tmp_path / ".config").exists()
    secret = grading_secret(None)  # as the grader makes it
    monkeypatch.setenv("KPCA_GRADING_SECRET", secret.decode())
    from_env = trees._index_key()
    monkeypatch.delenv("KPCA_GRADING_SECRET")
    assert trees._index_key() == from_env is not None


def test_an_edited_index_is_named_and_not_acted_on(tmp_path, capsys):
    sandbox_or_skip()
    subs = tmp_path / "subs"
    for who, nb in (("alice", student_copy()), ("bob", blank())):
        (subs / who).mkdir(parents=True)
        nbformat.write(nb, subs / who / f"{ASSIGNMENT}.ipynb")
    out = tmp_path / "grades"
    files = [str(subs / who / f"{ASSIGNMENT}.ipynb") for who in ("alice", "bob")]
    assert (
        main(["grade", "--assignment", ASSIGNMENT, "--out", str(out), "--jobs", "2", *files]) == 0
    )
    students = out / "students"
    assert (students / trees.INDEX_SIG).exists()
    alice_md = (students / "alice" / f"{ASSIGNMENT}.md").read_text()
    bob_md = (students / "bob" / f"{ASSIGNMENT}.md").read_text()
    assert alice_md != bob_md
    capsys.readouterr()
    assert main(["export", "--out", str(out), "--archives"]) == 0
    assert "changed outside kpca-course" not in capsys.readouterr().err  # signed: no warning

    # The edit: bob's row handed back in alice's folder, under alice's file names.
    index = json.loads((students / trees.INDEX).read_text())
    index[f"bob/{ASSIGNMENT}"] = dict(index[f"alice/{ASSIGNMENT}"])
    index[f"alice/{ASSIGNMENT}"] = {"folder": "alice-old", "html": "x.html", "md": "x.md"}
    (students / trees.INDEX).write_text(json.dumps(index, indent=1) + "\n")
    assert main(["export", "--out", str(out), "--archives"]) == 0
    err = capsys.readouterr().err
    assert "students/index.json was changed outside kpca-course" in err, err
    assert (students / "alice" / f"{ASSIGNMENT}.md").read_text() == alice_md
    assert (students / "bob" / f"{ASSIGNMENT}.md").read_text() == bob_md
    assert not (students / "alice-old").exists()
    with zipfile.ZipFile(out / "archives" / "alice.zip") as z:
        names = z.namelist()
        assert all(n.startswith("alice/") for n in names), names
        assert z.read(f"alice/{ASSIGNMENT}.md").decode() == alice_md
    after = json.loads((students / trees.INDEX).read_text())
    assert after[f"bob/{ASSIGNMENT}"]["folder"] == "bob"
    assert main(["export", "--out", str(out)]) == 0  # rewritten and signed: no warning again
    assert "changed outside kpca-course" not in capsys.readouterr().err
