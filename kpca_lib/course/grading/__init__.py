"""Homework grading for the course: question specs, plain-data exchange, the batch grader.

The pieces, in the order a submission meets them:

* :mod:`kpca_lib.course.grading.questions`: every question's declared answers, how they are
  probed (evaluated on inputs), and its public checks.
* :mod:`kpca_lib.course.grading.plain`: answers cross the trust boundary only as plain JSON
  data (numbers, arrays, booleans); never pickle, never live objects.
* :mod:`kpca_lib.course.grading.notebooks`: cell roles in notebook metadata; rebuilding the
  notebook that runs from trusted ``solutions/`` plus the student's answer cells.
* :mod:`kpca_lib.course.grading.runner`: nbval (pytest) in a child process per batch of
  submissions, a fresh kernel per submission, time and memory limits.
* :mod:`kpca_lib.course.grading.grade`: the batch: read, run, check, score each submission.
* :mod:`kpca_lib.course.grading.gradebook`: the gradebook (``grades.csv``, ``grades.json``,
  ``feedback/*.md``), a row at a time and atomically; ``--resume``, ``--merge``, row ids.
"""
