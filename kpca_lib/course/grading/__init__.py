"""Homework grading for the course: question specs, plain-data exchange, the batch grader.

The pieces, in the order a submission meets them:

* :mod:`kpca_lib.course.grading.judge.registry`: questions are defined in the question cells of
  ``solutions/`` notebooks (names, inputs, probe, public checks, points);
  :mod:`kpca_lib.course.grading.judge.questions` holds what a question is and the probing and
  comparison helpers those cells use, and :mod:`kpca_lib.course.grading.judge.diagnosis` the
  diagnoses of common slips (each charged once per question).
* :mod:`kpca_lib.course.grading.judge.plain`: answers cross the trust boundary only as plain JSON
  data (numbers, arrays, booleans); never pickle, never live objects.
* :mod:`kpca_lib.course.grading.judge.notebooks`: cell roles in notebook metadata; rebuilding the
  notebook that runs from trusted ``solutions/`` plus the student's answer cells.
* :mod:`kpca_lib.course.grading.run.runner`: trusted nbval (pytest) workers, each running a
  chunk of submissions in sequence; :mod:`kpca_lib.course.grading.run.report_plugin` (in the
  worker) starts each kernel in its own sandbox, enforces the wall clock and output caps
  and records per-cell facts; :mod:`kpca_lib.course.grading.run.sandbox` is the bubblewrap
  sandbox and its limits (cgroups where possible).
* :mod:`kpca_lib.course.grading.grade`: the batch: read, run, check, score each submission.
* :mod:`kpca_lib.course.grading.record.gradebook`: the gradebook (``grades.csv``, ``grades.json``,
  ``feedback/*.md``), a row at a time and atomically; ``--resume``, ``--merge``, row ids.
* :mod:`kpca_lib.course.grading.record.summary`: ``summary.md`` and ``summary.png``, the gradebook
  at a glance, rebuilt after every batch.

After grading:

* :mod:`kpca_lib.course.grading.record.policy`: the instructor's ``policy.toml`` (deadline,
  extensions, late penalty, by-hand questions) and ``adjustments.csv``, and each row's final
  grade (the automatic scores stay recorded); :mod:`kpca_lib.course.grading.record.roster`: who
  each submission folder is.
* :mod:`kpca_lib.course.grading.handback.feedback`: a row's feedback as Markdown and as an offline
  HTML page, and names every file system accepts; :mod:`kpca_lib.course.grading.handback.trees`
  rebuilds the summary and ``students/`` after every batch and writes ``kpca-course
  export``'s files, whose formats (plain, Canvas, Moodle) are in
  :mod:`kpca_lib.course.grading.handback.export`.
"""

import sys as _sys

# Start-up cost: nbformat imports jsonschema, whose import builds an IRI grammar with lark
# (``rfc3987_syntax``: 1.4 s idle, ~10 s on a loaded machine) for the "iri" string format,
# which notebook schemas never use. Without the module jsonschema skips that one format.
# Only when nothing imported it yet (a process that already has it keeps it).
if "jsonschema" not in _sys.modules:
    _sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]
