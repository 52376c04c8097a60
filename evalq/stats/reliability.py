"""The low-reliability flag: any primary-outcome kappa below 0.6 downgrades primary claims."""

from __future__ import annotations

from collections.abc import Mapping

KAPPA_THRESHOLD = 0.6


def low_reliability(primary_kappas: Mapping[str, float | None],
                    threshold: float = KAPPA_THRESHOLD) -> tuple[bool, list[str]]:
    """(flag, reasons): flag when any primary kappa < threshold; an undefined kappa is noted, not flagged.

    Kappa is undefined only when both raters used one single label throughout, i.e. they
    agreed on every item, so it is no evidence of unreliability; the note says to read
    raw agreement and the positive rate instead.
    """
    flagged = False
    reasons: list[str] = []
    for outcome, kappa in primary_kappas.items():
        if kappa is None:
            reasons.append(f"note: kappa for {outcome} is unavailable (a single label was used); "
                           "see raw agreement and positive rate")
        elif kappa < threshold:
            flagged = True
            reasons.append(f"kappa for {outcome} is {kappa:.3f}, below {threshold}")
    return flagged, reasons
