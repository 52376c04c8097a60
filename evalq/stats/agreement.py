"""Inter-rater agreement for blinded scoring: raw agreement, Cohen's and Fleiss' kappa.

Labels are any hashable values (booleans for the binary outcomes); ``None`` is a
missing rating and is dropped. Kappa whose chance agreement is 1 is undefined: ``None``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike

Label = Hashable

_UNDEFINED = 1e-12


def raw_agreement(ratings: Sequence[Sequence[Label | None]]) -> float | None:
    """Share of items on which every rater gave the same label; items with under two ratings dropped.

    ``ratings`` has one row per item, one entry per rating.
    """
    agreed = counted = 0
    for row in ratings:
        labels = [r for r in row if r is not None]
        if len(labels) < 2:
            continue
        counted += 1
        agreed += all(label == labels[0] for label in labels[1:])
    return agreed / counted if counted else None


def positive_rate(labels: Sequence[bool | None]) -> float | None:
    """Share of ``True`` among the given ratings, reported beside kappa because kappa is unstable for rare classes."""
    defined = [bool(x) for x in labels if x is not None]
    return sum(defined) / len(defined) if defined else None


def cohen_kappa(rater_a: Sequence[Label | None], rater_b: Sequence[Label | None]) -> float | None:
    """Cohen's kappa for two fixed raters over the same items; items either rater skipped are dropped.

    ``None`` when no item is rated by both, or when chance agreement is 1 (kappa undefined).
    """
    if len(rater_a) != len(rater_b):
        raise ValueError(f"rater lists differ in length ({len(rater_a)} vs {len(rater_b)}); "
                         "give both raters' labels in the same item order, None for a missing rating")
    pairs = [(a, b) for a, b in zip(rater_a, rater_b) if a is not None and b is not None]
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(a == b for a, b in pairs) / n
    count_a = Counter(a for a, _ in pairs)
    count_b = Counter(b for _, b in pairs)
    expected = sum(count_a[c] * count_b.get(c, 0) for c in count_a) / (n * n)
    if expected >= 1.0 - _UNDEFINED:
        return None
    return (observed - expected) / (1.0 - expected)


def category_counts(ratings: Sequence[Sequence[Label | None]],
                    categories: Sequence[Label] | None = None) -> tuple[np.ndarray, list[Label]]:
    """Items x categories matrix of how many raters chose each category, the input of Fleiss' kappa.

    Categories default to every label seen, in first-seen order; ``None`` ratings are skipped.
    """
    if categories is None:
        seen: dict[Label, None] = {}
        for row in ratings:
            for r in row:
                if r is not None:
                    seen.setdefault(r, None)
        cats = list(seen)
    else:
        cats = list(categories)
    column = {c: j for j, c in enumerate(cats)}
    counts = np.zeros((len(ratings), len(cats)), dtype=np.int64)
    for i, row in enumerate(ratings):
        for r in row:
            if r is None:
                continue
            if r not in column:
                raise ValueError(f"item #{i} has label {r!r}, which is not among the categories {cats!r}")
            counts[i, column[r]] += 1
    return counts, cats


def _count_matrix(counts: ArrayLike) -> np.ndarray:
    m = np.asarray(counts)
    if m.ndim != 2:
        raise ValueError(f"counts must be a 2-D items x categories matrix, got shape {m.shape}")
    if m.size and (np.any(m < 0) or not np.all(np.equal(np.mod(m, 1), 0))):
        raise ValueError("counts must be non-negative whole numbers of ratings")
    return m.astype(float)


def fleiss_kappa(counts: ArrayLike, *, raters_per_item: int | None = None) -> float | None:
    """Fleiss' kappa for rotating raters from an items x categories count matrix.

    By default items may have any number of ratings n_i (Fleiss' generalisation: each item's
    agreement is its share of agreeing pairs among its n_i(n_i - 1) ordered pairs, category
    shares pool every rating); items with under two ratings are dropped. With
    ``raters_per_item`` n, only items with exactly n ratings count and more is an error (the
    textbook fixed-n form). ``None`` with no usable item or chance agreement 1.
    """
    m = _count_matrix(counts)
    if m.shape[0] == 0:
        return None
    totals = m.sum(axis=1)
    if raters_per_item is not None:
        n = float(raters_per_item)
        if np.any(totals > n):
            over = int(np.argmax(totals > n))
            raise ValueError(f"item #{over} has {int(totals[over])} ratings, more than "
                             f"raters_per_item={int(n)}")
        if n < 2:
            return None
        keep = totals == n
    else:
        keep = totals >= 2
    m, totals = m[keep], totals[keep]
    if m.shape[0] == 0:
        return None
    per_item = (np.sum(m * m, axis=1) - totals) / (totals * (totals - 1.0))
    p_bar = float(per_item.mean())
    shares = m.sum(axis=0) / totals.sum()
    expected = float(np.sum(shares * shares))
    if expected >= 1.0 - _UNDEFINED:
        return None
    return (p_bar - expected) / (1.0 - expected)


def krippendorff_alpha_nominal(counts: ArrayLike) -> float | None:
    """Krippendorff's alpha (nominal) from an items x categories count matrix, any number of
    ratings per item: the missing-data check a rated study names beside kappa.

    alpha = 1 - D_o / D_e from the coincidence matrix; items with under two ratings carry no
    pair and are dropped. ``None`` with no pairable item or a single category (D_e = 0).
    """
    m = _count_matrix(counts)
    totals = m.sum(axis=1)
    keep = totals >= 2
    m, totals = m[keep], totals[keep]
    if m.shape[0] == 0:
        return None
    # coincidences between different categories: sum over items of n_uc n_uk / (m_u - 1)
    disagree = float(np.sum((totals * totals - np.sum(m * m, axis=1)) / (totals - 1.0)))
    n_c = m.sum(axis=0)
    n = float(n_c.sum())
    expected = (n * n - float(np.sum(n_c * n_c))) / (n - 1.0)
    if expected <= _UNDEFINED:
        return None
    return 1.0 - disagree / expected
