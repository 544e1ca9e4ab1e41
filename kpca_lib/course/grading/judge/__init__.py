"""``judge``: the trusted judge: what a question is and how an answer is scored.

Owns question definitions (:mod:`.questions`, :mod:`.registry`), the public and hidden checks'
evaluation (:mod:`.evaluate`), the diagnoses of common slips (:mod:`.diagnosis`), the plain
data that alone crosses from the kernel (:mod:`.plain`), the names a cell depends on
(:mod:`.dependencies`), the roles of a notebook's cells (:mod:`.notebooks`), and the steps that
turn a run's exports into scores (:mod:`.scoring`).

May import: the library and :mod:`kpca_lib.course.checks` (the public checks' front). Never
:mod:`..run` (it reads only plain, signed data from there), :mod:`..record`, :mod:`..handback`
or the pipeline.
"""
