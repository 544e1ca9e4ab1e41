"""``handback``: what people read: student feedback, hand-back trees and LMS exports.

Owns a row's feedback as Markdown and as an offline HTML page (:mod:`.feedback`), the
``students/`` tree and summary rebuilt after every batch and ``kpca-course export``'s files
(:mod:`.trees`), and the plain, Canvas and Moodle formats (:mod:`.export`).

May import: :mod:`..record` (it reads the gradebook) and :mod:`..judge`. Never :mod:`..run`
or the pipeline.
"""
