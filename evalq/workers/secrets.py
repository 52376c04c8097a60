"""Where a provider credential comes from: the worker's environment, else a secrets file.

Only trusted code (the adapter that starts the agent) reads credentials; everything evalq
stores passes through `evalq.workers.redact` first.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable, Mapping

from evalq.errors import UserError

SECRETS_FILE_ENV = "EVALQ_SECRETS_FILE"
#: Extra variable names (comma-separated) whose values are redacted like credentials.
REDACT_ENV = "EVALQ_REDACT_ENV"
#: Credential names any shipped adapter may pass on; their values are always redacted.
KNOWN_CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY",
                     "CODEX_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY")


def read_secrets_file(path: Path) -> dict[str, str]:
    """NAME=value lines (# comments, optional quotes). Refused when others may read it."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UserError("the secrets file does not exist", file=path, field=SECRETS_FILE_ENV,
                        fix="create it or unset EVALQ_SECRETS_FILE") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UserError("the secrets file is readable by other users", file=path,
                        fix=f"chmod 600 {path}")
    values: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.removeprefix("export ").partition("=")
        if not sep or not name.strip().isidentifier():
            raise UserError(f"line {number} is not NAME=value", file=path, fix="write NAME=value")
        values[name.strip()] = value.strip().strip("'\"")
    return values


def _file_values(environ: Mapping[str, str]) -> dict[str, str]:
    """The secrets file's values: the secrets_file setting for this process's own environment
    (EVALQ_SECRETS_FILE or evalq.toml), EVALQ_SECRETS_FILE of any other mapping given."""
    if environ is os.environ:
        from evalq.config import load_settings

        path = load_settings().secrets_file
    else:
        path = environ.get(SECRETS_FILE_ENV)
    return read_secrets_file(Path(path)) if path else {}


def credentials(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The named credentials found, environment first, then the secrets file; absent ones left out."""
    environ = os.environ if environ is None else environ
    names = list(names)
    found = {n: environ[n] for n in names if environ.get(n)}
    missing = [n for n in names if n not in found]
    if missing:
        from_file = _file_values(environ)
        found.update({n: from_file[n] for n in missing if from_file.get(n)})
    return found


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every value that must never be stored: known credentials, EVALQ_REDACT_ENV, the file."""
    environ = os.environ if environ is None else environ
    listed = environ.get(REDACT_ENV, "")
    if environ is os.environ:
        from evalq.config import load_settings

        listed = load_settings().redact_env or ""
    extra = [n.strip() for n in listed.split(",") if n.strip()]
    values = [environ[n] for n in (*KNOWN_CREDENTIALS, *extra) if environ.get(n)]
    try:
        values += list(_file_values(environ).values())
    except UserError:
        pass
    return sorted({v for v in values if v}, key=len, reverse=True)
