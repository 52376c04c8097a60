"""Adoption-track rules for fixtures in a study, checked when a manifest loads.

Grouping results by track is analysis/tracks.py."""

from __future__ import annotations

from pathlib import Path

from evalq.errors import UserError

TRACKS = ("free-selection", "directed-integration", "upgrade")


def check_tracks(manifest, fixtures, path: Path) -> None:
    """A free-selection prompt must not name the package, a directed one must, upgrades pin versions."""
    for fixture in fixtures:
        spec = fixture.spec
        if spec.track is None:
            continue
        where = fixture.path / "fixture.toml"
        if spec.track not in TRACKS:
            raise UserError(f"unknown track '{spec.track}'", file=where, field="track",
                            fix=f"use one of {', '.join(TRACKS)}")
        package = (spec.package or "").strip()
        if spec.track in ("free-selection", "directed-integration") and not package:
            raise UserError("a track task must name the package under study", file=where,
                            field="package", fix="set package = \"<name>\"")
        named = bool(package) and package.lower() in spec.prompt.lower()
        if spec.track == "free-selection" and named:
            raise UserError(f"a free-selection prompt must not name '{package}'", file=where,
                            field="prompt", fix="describe the need without the package name")
        if spec.track == "directed-integration" and not named:
            raise UserError(f"a directed-integration prompt must name '{package}'", file=where,
                            field="prompt", fix="name the package the task requires")
        if spec.track == "upgrade":
            for key in ("baseline_version", "target_version"):
                if not getattr(spec, key):
                    raise UserError("an upgrade task needs baseline_version and target_version",
                                    file=where, field=key, fix=f"set {key} = \"<version>\"")
