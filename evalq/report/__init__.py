"""Reports computed from the results database: one computed result, several formats."""

from .compute import compute_report
from .write import write_reports

__all__ = ["compute_report", "write_reports"]
