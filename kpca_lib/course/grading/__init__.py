"""Homework grading for the course, in four rooms by stage (CONTRIBUTING.md: "The grader's house").

* :mod:`.run`: everything that executes a student's notebook: the bubblewrap sandbox and its
  limits, the nbval workers and their plugin, the code added to the kernel, reading handed-in
  files, the Dask runner, what a run's facts mean. The only room that touches untrusted code.
* :mod:`.judge`: the trusted judge: questions, checks, diagnoses, the plain data that alone
  crosses from the kernel, the notebook the grader builds, from signed exports to scores.
* :mod:`.record`: the instructor's files: the gradebook, rows, the late policy and
  adjustments, the roster, the summary.
* :mod:`.handback`: what people read: feedback pages, the ``students/`` tree, LMS exports.

Above them, :mod:`.pipeline` chains the steps (:func:`.pipeline.grade`, and
:func:`.pipeline.grade_batch` with keywords); two leaves serve every room: :mod:`.config`
(:class:`~.config.GradeConfig`, what a batch is graded with) and :mod:`.text` (text a
submission controls, shown as data). ``judge``, ``record`` and ``handback`` never import
``run``, and nothing imports the pipeline from below (``tests/test_grading_layout.py``).
"""

import sys as _sys

# Start-up cost: nbformat imports jsonschema, whose import builds an IRI grammar with lark
# (``rfc3987_syntax``: 1.4 s idle, ~10 s on a loaded machine) for the "iri" string format,
# which notebook schemas never use. Without the module jsonschema skips that one format.
# Only when nothing imported it yet (a process that already has it keeps it).
if "jsonschema" not in _sys.modules:
    _sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]
