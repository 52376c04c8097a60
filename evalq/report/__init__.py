"""Reports computed from the results database: one computed result, several formats.

The names below load their modules on first use, so evalq.analysis (which reads
evalq.report.attempts) and evalq.report.compute (which reads evalq.analysis) can import
each other's parts without a cycle.
"""

from __future__ import annotations

from typing import Any


def compute_report(engine, study_id: str, **options: Any) -> dict[str, Any]:
    from evalq.report.compute import compute_report as compute

    return compute(engine, study_id, **options)


def write_reports(report: dict[str, Any], out_dir, formats=("json", "md")):
    from evalq.report.write import write_reports as write

    return write(report, out_dir, formats)


__all__ = ["compute_report", "write_reports"]
