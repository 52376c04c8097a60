"""Analysis of finished studies: per-run records, metrics with CIs, paired comparisons,
pinned-input compatibility, tracks, rater reliability, blinding, seed-002/003 import and export.

Everything here reads the results database (or plain rows) and returns plain data; the
report package renders it.
"""
