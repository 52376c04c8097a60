"""Helpers shared by CLI commands: resolving a study argument, the settings, the engine."""

from __future__ import annotations

from pathlib import Path

import click

from evalq.config import Settings, load_settings
from evalq.models import check_study_id
from evalq.results.store import init_db


def study_id_of(argument: str) -> str:
    """A study argument is a manifest path or a study id already in the database."""
    path = Path(argument)
    if path.is_file():
        from evalq.study.manifest import load_manifest

        return load_manifest(path, verify_fixtures=False).id
    return check_study_id(argument)


class StudyArgument(click.ParamType):
    """A study id or a manifest path, checked while the command line is parsed, so a bad id
    (`../x`, an absolute path) is refused before anything is opened or written."""

    name = "STUDY"

    def convert(self, value, param, ctx):
        if Path(value).is_file():
            return value
        return check_study_id(value, param.human_readable_name if param else "STUDY")


STUDY = StudyArgument()


def engine_and_settings() -> tuple[object, Settings]:
    settings = load_settings()
    return init_db(settings.database_url), settings


def report_dir(settings: Settings, study_id: str) -> Path:
    return settings.home / "reports" / check_study_id(study_id)
