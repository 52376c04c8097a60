"""How wide a line of chart text will be, without a browser: the SVG charts size their gutters
from it, because SVG text never wraps and anything past the viewBox is silently cut off.

The widths are DejaVu Sans advances (thousandths of an em), measured in Chromium; it is wider
than Arial/Helvetica/Liberation Sans, so sizing from it leaves room whichever sans-serif the
viewer's browser picks. Characters outside printable ASCII count as a full em.
"""

from __future__ import annotations

_ADVANCE = (  # ' ' (32) to '~' (126)
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698,
    770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635, 611, 732,
    684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352, 635,
    634, 278, 278, 579, 278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592,
    525, 636, 337, 636, 838)
SAFETY = 1.06  # hinting and kerning differences between fonts and renderers


def text_width(text: str, size: float = 12.0) -> float:
    """Width in px of `text` set at `size` px, rounded up by SAFETY."""
    units = sum(_ADVANCE[ord(c) - 32] if 32 <= ord(c) <= 126 else 1000 for c in text)
    return units / 1000.0 * size * SAFETY
