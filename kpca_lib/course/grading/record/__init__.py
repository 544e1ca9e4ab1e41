"""``record``: the instructor's files: the gradebook and what is decided from it.

Owns the gradebook (:mod:`.gradebook`: ``grades.csv``, ``grades.json``, ``feedback/``,
atomically, ``--resume``/``--merge``), one graded row (:mod:`.rows`), the late-work policy and
adjustments (:mod:`.policy`), the roster (:mod:`.roster`), the summary (:mod:`.summary`) and
the escaping of text a submission controls (:mod:`.text`), which every file people read uses.

May import: :mod:`..judge` (a row holds check results) and the library. Never :mod:`..run`,
:mod:`..handback` or the pipeline.
"""
