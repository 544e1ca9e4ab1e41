"""``run``: everything that executes a student's notebook (the only room that touches untrusted code).

Owns the bubblewrap sandbox and its limits (:mod:`.sandbox`, the syscall filter
:mod:`.syscalls`, cgroups), the trusted nbval workers (:mod:`.runner`) and their plugin
(:mod:`.report_plugin`, which starts each kernel in its sandbox, enforces the wall clock and
output caps and records per-cell facts), the code the grader adds to the kernel
(:mod:`.kernel_side`), reading handed-in files (:mod:`.handed_in`), the Dask runner
(:mod:`.cluster`) and the reading of a run's facts (:mod:`.outcome`).

May import: :mod:`..judge` (the kernel side runs the public checks and exports plain data),
:mod:`..config`, and the library. Never :mod:`..record`, :mod:`..handback` or the pipeline.
"""
