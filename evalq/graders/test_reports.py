"""Per-criterion verdicts from machine-readable test reports: JUnit XML and TAP.

The files are written inside the sandbox, where the agent's code runs, so they are hostile
input: size-capped and parsed with defusedxml.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from evalq.models import Criterion
from evalq.graders.tamper import read_regular

MAX_REPORT_BYTES = 5_000_000
EVIDENCE_CHARS = 600


class ReportError(Exception):
    """The report exists but cannot be read."""


def _evidence(text: str | None) -> str:
    text = (text or "").strip()
    return text if len(text) <= EVIDENCE_CHARS else text[:EVIDENCE_CHARS] + "…"


def parse_junit(path: Path) -> list[Criterion] | None:
    """Criteria from a JUnit XML file, or None when nothing is there. It is opened without
    following a link and refused unless regular: run in-process, the code under test could put
    a link to a host file (the grader reads as root) or a FIFO (a read never ends) there."""
    if not os.path.lexists(path):
        return None
    data = read_regular(path, MAX_REPORT_BYTES)
    if data is None:
        raise ReportError("JUnit report is not a regular file (a link or special file in its "
                          "place)")
    if len(data) > MAX_REPORT_BYTES:
        raise ReportError(f"JUnit report over {MAX_REPORT_BYTES} bytes")
    try:
        root = ElementTree.fromstring(data)
    except (ElementTree.ParseError, DefusedXmlException, ValueError) as exc:
        raise ReportError(f"JUnit report unreadable: {exc}") from exc
    criteria: list[Criterion] = []
    for case in root.iter("testcase"):
        name = "::".join(x for x in (case.get("classname"), case.get("name")) if x)
        problem = next((child for child in case
                        if child.tag in ("failure", "error")), None)
        skipped = next((child for child in case if child.tag == "skipped"), None)
        if problem is not None:
            detail = problem.get("message") or ""
            evidence = _evidence(f"{problem.tag}: {detail}\n{problem.text or ''}")
            passed: bool | None = False
        elif skipped is not None:
            passed, evidence = None, _evidence(f"skipped: {skipped.get('message') or ''}")
        else:
            passed, evidence = True, "passed"
        criteria.append(Criterion(index=len(criteria), name=name or "unnamed",
                                  passed=passed, evidence=evidence))
    return criteria


_TAP_LINE = re.compile(r"^(not ok|ok)\b\s*(\d+)?\s*(?:-\s*)?(.*?)\s*(#\s*(SKIP|TODO)\b.*)?$",
                       re.IGNORECASE)


def parse_tap(text: str) -> list[Criterion]:
    """Criteria from top-level TAP test points; indented (subtest) lines are ignored."""
    criteria: list[Criterion] = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        match = _TAP_LINE.match(line)
        if not match:
            continue
        ok = match.group(1).lower() == "ok"
        directive = (match.group(5) or "").upper()
        name = match.group(3) or f"test {match.group(2) or len(criteria) + 1}"
        if directive == "SKIP":
            passed, evidence = None, "skipped"
        elif ok:
            passed, evidence = True, "passed"
        else:
            passed = False
            following = []
            for extra in lines[number + 1:number + 12]:
                if not extra.startswith((" ", "\t")):
                    break
                following.append(extra.strip())
            evidence = _evidence("\n".join(following) or "not ok")
        criteria.append(Criterion(index=len(criteria), name=name, passed=passed,
                                  evidence=evidence))
    return criteria
