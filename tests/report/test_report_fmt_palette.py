"""Issue 18: number formatting (signed zero, intervals) and the charts' colour-blind-safe colours.

Rounding is checked against decimal's exact half-even quantization; viridis against
matplotlib's published colormap data; colour-blind safety by simulating protanopia,
deuteranopia and tritanopia (Machado, Oliveira & Fernandes 2009, severity 1).
"""

from __future__ import annotations

import random
from decimal import ROUND_HALF_EVEN, Decimal

import pytest

from evalq.report import fmt
from evalq.report.palette import OUTCOME_COLORS, PENDING_COLOR, ink, viridis


@pytest.mark.parametrize("value, text", [(-0.0, "0.000"), (-1e-17, "0.000"), (1e-17, "0.000"),
                                         (-0.0004, "0.000"), (0.125, "+0.125"),
                                         (-0.25, "-0.250"), (1.0, "+1.000"), (None, "unavailable")])
def test_signed_prints_zero_without_a_sign(value, text):
    assert fmt.signed(value) == text


def test_intervals_and_plain_numbers_never_print_negative_zero():
    assert fmt.interval(-1e-17, 0.5, signed_values=True) == "[0.000, +0.500]"
    assert fmt.interval(-0.0, -0.0, signed_values=True) == "[0.000, 0.000]"
    assert fmt.interval(-0.0, 1.0) == "[0.000, 1.000]"
    assert fmt.interval(None, 1.0) == "unavailable" and fmt.interval(0.1, None) == "unavailable"
    assert fmt.number(-0.0) == "0.000" and fmt.number(-0.00049, 3) == "0.000"
    assert fmt.rate(-0.0) == "0.0%" and fmt.rate(-1e-12) == "0.0%"
    assert fmt.percent(-0.0) == "0%" and fmt.percent(0.6667) == "67%"
    assert fmt.percent(None) == fmt.rate(None) == fmt.number(None) == "unavailable"
    assert fmt.estimate({"estimate": -0.0, "ci_low": -1e-17, "ci_high": 0.5}) == \
        "0.000 [0.000, 0.500]"


def _expected_signed(value: float) -> str:
    """The exact binary value rounded half-even to 3 places, zero unsigned."""
    q = Decimal(value).quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN)
    return "0.000" if q == 0 else (f"+{q}" if q > 0 else str(q))


def test_signed_matches_exact_decimal_rounding():
    rng = random.Random(18)
    values = [rng.uniform(-0.002, 0.002) for _ in range(2000)] + \
             [rng.uniform(-1, 1) for _ in range(2000)] + [k / 2000 for k in range(-10, 11)]
    for value in values:
        assert fmt.signed(value) == _expected_signed(value), value


# matplotlib lib/matplotlib/_cm_listed.py, _viridis_data rows 0, 64, 128, 192 and 255
# (what matplotlib.cm.viridis returns at 0, 0.25, 0.5, 0.75 and 1).
MATPLOTLIB_VIRIDIS = {0.0: (0.267004, 0.004874, 0.329415), 0.25: (0.229739, 0.322361, 0.545706),
                      0.5: (0.127568, 0.566949, 0.550556), 0.75: (0.369214, 0.788888, 0.382914),
                      1.0: (0.993248, 0.906157, 0.143936)}

MACHADO = {  # linear-RGB simulation matrices, severity 1.0
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
}
OKABE_ITO = {"#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7",
             "#000000"}


def _channels(hex_color):
    return [int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]


def _linear(c):
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _lightness(linear_rgb):
    """CIE L* (D65) of a linear-RGB colour."""
    r, g, b = linear_rgb
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    return 116 * y ** (1 / 3) - 16 if y > 216 / 24389 else y * 24389 / 27


def _simulate(matrix, linear_rgb):
    return [min(1.0, max(0.0, sum(m * c for m, c in zip(row, linear_rgb)))) for row in matrix]


def test_pass_rate_scale_is_matplotlib_viridis():
    for x, reference in MATPLOTLIB_VIRIDIS.items():
        got = _channels(viridis(x))
        assert all(abs(a - b) <= 0.5 / 255 + 1e-9 for a, b in zip(got, reference)), (x, got)
    assert viridis(-0.5) == viridis(0.0) and viridis(2.0) == viridis(1.0)


def test_pass_rate_scale_is_sequential_for_every_colour_vision():
    """Lightness rises strictly from 0% to 100%, also as each dichromat sees it: the scale
    never depends on telling red from green (the old ramp went red -> green at flat lightness)."""
    samples = [[_linear(c) for c in _channels(viridis(i / 100))] for i in range(101)]
    views = {"normal": samples} | {name: [_simulate(m, s) for s in samples]
                                   for name, m in MACHADO.items()}
    for name, view in views.items():
        lightness = [_lightness(s) for s in view]
        steps = [b - a for a, b in zip(lightness, lightness[1:])]
        assert min(steps) > 0, (name, min(steps))
        assert lightness[-1] - lightness[0] > 50, name  # dark to light, not a muddy middle


def _contrast(a, b):
    la, lb = (sum(w * _linear(c) for w, c in zip((0.2126, 0.7152, 0.0722), _channels(x)))
              for x in (a, b))
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def test_outcome_colours_are_okabe_ito_and_every_label_is_legible():
    assert set(OUTCOME_COLORS.values()) <= OKABE_ITO
    assert len(set(OUTCOME_COLORS.values())) == len(OUTCOME_COLORS)
    backgrounds = list(OUTCOME_COLORS.values()) + [PENDING_COLOR] + \
        [viridis(i / 20) for i in range(21)]
    for background in backgrounds:
        assert _contrast(ink(background), background) >= 4.5, background  # WCAG AA
