"""Review criteria: the adjudicated rater score of one run, read where ratings are stored.

Ratings live in the attempt's grade (`ratings`: one row per rater, `adjudications`: the third
rater's final values, `scores`: an imported run's adjudicated row; evalq.analysis.adjudicated_import
writes them, this module only reads). The adjudicated value is the adjudicator's where there
is one, else the raters' when they all agree (or, with no rating rows at all, the imported
row's); raters who disagree with no adjudication leave the criterion unresolved (null), as
do ratings that leave the field unscored and a run nobody rated.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional


def adjudicated(grade: Optional[Mapping[str, Any]], field: str
                ) -> tuple[Optional[bool], str, list[dict[str, Any]]]:
    """(score, evidence, the ratings it rests on) for one rater field of one run."""
    grade = grade or {}
    ratings = [{"rater_id": r.get("rater_id"), "value": r.get(field)}
               for r in grade.get("ratings") or [] if isinstance(r, dict)]
    given = [r for r in ratings if isinstance(r["value"], bool)]
    final = [a.get(field) for a in grade.get("adjudications") or []
             if isinstance(a, dict) and isinstance(a.get(field), bool)]
    shown = ", ".join(f"{r['rater_id']}={_word(r['value'])}" for r in ratings)
    if final:
        return final[-1], f"adjudicated {_word(final[-1])} (raters: {shown or 'none'})", ratings
    scores = grade.get("scores") if isinstance(grade.get("scores"), dict) else None
    if ratings and not given:
        return None, f"no rater scored it ({shown})", ratings
    if scores is not None and isinstance(scores.get(field), bool) and not _split(given):
        return scores[field], f"adjudicated row {_word(scores[field])} (raters: " \
                              f"{shown or 'none'})", ratings
    if not given:
        return None, "not rated yet", ratings
    if _split(given):
        return None, f"raters disagree and no adjudication is recorded ({shown})", ratings
    return given[0]["value"], f"raters agree: {_word(given[0]['value'])} ({shown})", ratings


def _split(given: list[dict[str, Any]]) -> bool:
    return len({r["value"] for r in given}) > 1


def _word(value: Any) -> str:
    return {True: "true", False: "false"}.get(value, "null")


def resolved(results: Any, grade: Optional[Mapping[str, Any]]) -> Optional[list[dict[str, Any]]]:
    """Stored criterion results with each review criterion's adjudicated score filled in."""
    if not isinstance(results, list):
        return None
    out = []
    for result in results:
        if not isinstance(result, dict):
            continue
        if result.get("kind") == "review":
            passed, evidence, ratings = adjudicated(grade, str(result.get("field")))
            result = dict(result, passed=passed, evidence=evidence, ratings=ratings)
        out.append(result)
    return out
