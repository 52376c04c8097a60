"""Analysis of finished studies: per-run records, metrics with CIs, paired comparisons,
pinned-input compatibility, tracks, rater reliability, blinding, activation-row and adjudicated-results import and export.

Everything here reads the results database (or plain rows) and returns plain data; the
report package renders it.
"""
