"""The course tooling around the library: release, public checks, grading, the CLI.

* :mod:`kpca_lib.course.checks`: the public checks students run in the exercises
  (needs only NumPy, like the library);
* :mod:`kpca_lib.course.release`: ``exercises/`` generated from ``solutions/``;
* :mod:`kpca_lib.course.grading`: the sandboxed batch grader;
* :mod:`kpca_lib.course.cli`: the ``kpca-course`` command.

Release and grading need the ``course`` extra (``pip install 'kpca-course[course]'``:
nbformat, nbval, JupyterLab). The math modules of :mod:`kpca_lib` never import this
package.
"""
