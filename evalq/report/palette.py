"""Chart colours that stay readable for colour-blind readers.

Pass rates use matplotlib's viridis (perceptually uniform, lightness rising monotonically, safe
for the common colour-vision deficiencies): its samples at 0, 1/4, 1/2, 3/4 and 1, linearly
interpolated. Outcomes use the Okabe-Ito palette, built to be told apart by deuteranopes and
protanopes; correct/incorrect are its bluish green and vermillion rather than green and red.
"""

from __future__ import annotations

VIRIDIS = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")

OUTCOME_COLORS = {"correct": "#009e73", "incorrect": "#d55e00", "timed_out": "#e69f00",
                  "grading_failure": "#cc79a7", "infrastructure_failure": "#56b4e9"}
PENDING_COLOR = "#bdbdbd"


def _rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def viridis(value: float) -> str:
    """The viridis colour for `value` in [0, 1] (clamped), as '#rrggbb'."""
    value = min(1.0, max(0.0, value))
    pos = value * (len(VIRIDIS) - 1)
    i = min(int(pos), len(VIRIDIS) - 2)
    frac = pos - i
    low, high = _rgb(VIRIDIS[i]), _rgb(VIRIDIS[i + 1])
    return "#" + "".join(f"{round(a + (b - a) * frac):02x}" for a, b in zip(low, high))


def luminance(hex_color: str) -> float:
    """WCAG relative luminance (0 black .. 1 white)."""
    def linear(c: int) -> float:
        s = c / 255.0
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(c) for c in _rgb(hex_color))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def ink(background: str) -> str:
    """Black or white text, whichever contrasts more with `background` (WCAG ratio)."""
    lum = luminance(background)
    return "#000000" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "#ffffff"
