"""One measured figure, its target (if the issue sets one), the ratio and whether it is met.

Kept as plain data so the printed table and the JSON file say the same thing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional


@dataclass
class Figure:
    name: str
    value: Optional[float]          # None = unavailable (never 0)
    unit: str
    target: Optional[float] = None  # a bound, in the same unit as `ratio` (or `value`)
    ratio: Optional[float] = None   # value / reference, when the target is a ratio
    reference: Optional[str] = None
    note: str = ""
    extra: dict = field(default_factory=dict)
    at_least: bool = False          # the target is a lower bound (a rate), not an upper one

    @property
    def compared(self) -> Optional[float]:
        return self.ratio if self.reference else self.value

    @property
    def met(self) -> Optional[bool]:
        if self.target is None or self.compared is None:
            return None
        if self.at_least:
            return self.compared >= self.target
        return self.compared <= self.target

    def as_dict(self) -> dict:
        data = asdict(self)
        data["met"] = self.met
        return data

    def line(self) -> str:
        value = "unavailable" if self.value is None else f"{self.value:,.4g} {self.unit}"
        parts = [f"{self.name}: {value}"]
        if self.reference:
            ratio = "unavailable" if self.ratio is None else f"{self.ratio:.2f}×"
            parts.append(f"ratio to {self.reference}: {ratio}")
        if self.target is not None:
            bound = f"{'≥' if self.at_least else '≤'} {self.target:g}{'×' if self.reference else ' ' + self.unit}"
            verdict = {True: "MET", False: "MISSED", None: "unavailable"}[self.met]
            parts.append(f"target {bound}: {verdict}")
        if self.note:
            parts.append(self.note)
        return " | ".join(parts)


def ratio(value: Optional[float], reference: Optional[float]) -> Optional[float]:
    if value is None or not reference:
        return None
    return value / reference
