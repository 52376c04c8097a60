"""Helpers shared by CLI commands: resolving a study argument, the settings, the engine."""

from __future__ import annotations

from pathlib import Path

from evalq.config import Settings, load_settings
from evalq.results.store import init_db


def study_id_of(argument: str) -> str:
    """A study argument is a manifest path or a study id already in the database."""
    path = Path(argument)
    if path.is_file():
        from evalq.study.manifest import load_manifest

        return load_manifest(path, verify_fixtures=False).id
    return argument


def engine_and_settings() -> tuple[object, Settings]:
    settings = load_settings()
    return init_db(settings.database_url), settings


def report_dir(settings: Settings, study_id: str) -> Path:
    return settings.home / "reports" / study_id
