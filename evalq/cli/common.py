"""Helpers shared by CLI commands: resolving a study argument, the settings, the engine (and
the read-only commands' engine, which never creates a database)."""

from __future__ import annotations

from pathlib import Path

import click

from evalq.config import Settings, load_settings
from evalq.errors import UserError
from evalq.models import check_study_id
from evalq.results.store import init_db
from evalq.urls import masked


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


def read_engine(settings: Settings):
    """The results database of a command that only reads it, never created by reading.

    A SQLite file that does not exist, or a database without evalq's tables, is refused in one
    line naming the database read (its URL masked), so `evalq status` in the wrong folder says
    where it looked instead of leaving an empty evalq.db behind. An existing evalq database is
    opened as every command opens it (an older one gets the columns it lacks)."""
    from sqlalchemy import inspect
    from sqlalchemy.exc import InterfaceError, OperationalError

    from evalq.results.store import get_engine

    url = settings.database_url
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        raise _no_database(url, "no such file")
    try:
        with get_engine(url).connect() as conn:
            has_tables = inspect(conn).has_table("studies")
    except (OperationalError, InterfaceError) as exc:
        first = (str(exc.orig).strip().splitlines() or ["refused"])[0]
        raise UserError(f"cannot open the results database {masked(url)}: {first}",
                        field="EVALQ_DATABASE_URL",
                        fix="check the URL and that the server is running") from None
    if not has_tables:
        raise _no_database(url, "it holds no evalq tables")
    return init_db(url)


def _no_database(url: str, why: str) -> UserError:
    return UserError(f"no evalq results database at {masked(url)} ({why})",
                     field="EVALQ_DATABASE_URL",
                     fix="run this where the study ran, or point EVALQ_HOME or "
                         "EVALQ_DATABASE_URL at its database; `evalq run study.toml` makes one")


def read_engine_and_settings() -> tuple[object, Settings]:
    settings = load_settings()
    return read_engine(settings), settings


def require_study(engine, settings: Settings, study_id: str) -> str:
    """`study_id` if the database holds it; else one line naming the database read and the
    studies it has."""
    from sqlmodel import Session, select

    from evalq.results.store import StudyRow

    with Session(engine) as session:
        if session.get(StudyRow, study_id) is not None:
            return study_id
        known = list(session.exec(select(StudyRow.id).order_by(StudyRow.id)).all())
    shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
    raise UserError(f"no study '{study_id}' in the results database "
                    f"{masked(settings.database_url)}", field="STUDY",
                    fix=f"use one of: {shown}" if known else
                    "run it first with `evalq run study.toml`, or point EVALQ_HOME or "
                    "EVALQ_DATABASE_URL at the database that has it")
