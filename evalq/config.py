"""Every evalq setting in one model: environment (EVALQ_*) over evalq.toml over defaults.

Every process (CLI, workers on any machine) reads the same keys, so a machine joins a study by
setting EVALQ_BROKER_URL, EVALQ_DATABASE_URL and EVALQ_ARTIFACTS_URL. A bad value, an unknown
key in the file or a missing EVALQ_CONFIG file is one line naming where it came from.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from evalq.errors import UserError
from evalq.urls import check_broker_url, normalized_database_url

PREFIX = "EVALQ_"
CONFIG_ENV = "EVALQ_CONFIG"
CONFIG_FILE = "evalq.toml"


class Settings(BaseSettings):
    """evalq's settings; each field is EVALQ_<NAME> in the environment and <name> in evalq.toml."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, env_ignore_empty=True, extra="forbid",
                                      frozen=True, validate_default=True)

    home: Path = Field(Path(".evalq"), description="home (database, artifacts, reports)")
    database_url: Optional[str] = Field(
        None, description="results database", json_schema_extra={"default_shown":
                                                                  "`sqlite:///$EVALQ_HOME/evalq.db`"})
    broker_url: Optional[str] = Field(None, description="broker", json_schema_extra={
        "default_shown": "none: the embedded default"})
    artifacts_url: Optional[str] = Field(None, description="artifact store", json_schema_extra={
        "default_shown": "`$EVALQ_HOME/artifacts`"})
    sandbox: Literal["bwrap", "docker"] = Field("bwrap", description="grading sandbox")
    agent_sandbox: Literal["bwrap", "docker", "none"] = Field(
        "bwrap", description="agent sandbox (`none`: debugging only, the study is marked "
                             "unsealed)")
    agent_image: str = Field("evalq-agent:local", description="the Docker agent sandbox's image")
    max_trial_seconds: float = Field(
        3600, gt=0, description="longest trial, in seconds (sets the broker's visibility "
                                "timeout, about twice this)")
    visibility_timeout: Optional[float] = Field(
        None, gt=0, description="visibility timeout override",
        json_schema_extra={"default_shown": "derived"})
    lease_seconds: float = Field(60, gt=0, description="lease of a running attempt or grading, "
                                                       "renewed by a heartbeat")
    broker_retry_seconds: float = Field(
        300, gt=0, description="how long a message send keeps trying while the broker is "
                               "unreachable; past it the trial stays pending and is re-sent "
                               "later")
    agent_path: Optional[str] = Field(
        None, description="extra folders where agent executables are looked for "
                          "(os.pathsep-separated)", json_schema_extra={"default_shown": "none"})
    secrets_file: Optional[Path] = Field(
        None, description="provider credentials as `NAME=value` lines (mode 600)",
        json_schema_extra={"default_shown": "none"})
    redact_env: Optional[str] = Field(
        None, description="more variable names (comma-separated) whose values are redacted "
                          "like credentials", json_schema_extra={"default_shown": "none"})
    confirm_above: int = Field(200, ge=0, description="trials above which `evalq run` asks "
                                                      "for `--yes`")

    @field_validator("home")
    @classmethod
    def _home_is_a_folder(cls, value: Path) -> Path:
        value = value.expanduser().resolve()
        if value.exists() and not value.is_dir():
            raise ValueError(f"{value} exists and is not a folder")
        return value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: Optional[str]) -> Optional[str]:
        return None if value is None else normalized_database_url(value)

    @field_validator("broker_url")
    @classmethod
    def _broker_url(cls, value: Optional[str]) -> Optional[str]:
        return None if value is None else check_broker_url(value)

    def model_post_init(self, _context: Any) -> None:
        derived = {"database_url": f"sqlite:///{self.home / 'evalq.db'}",
                   "artifacts_url": str(self.home / "artifacts")}
        for name, value in derived.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings,
                                   dotenv_settings, file_secret_settings):
        return init_settings, env_settings, _TomlFile(settings_cls)

    @property
    def embedded(self) -> bool:
        """No broker configured: run everything on this machine with no server."""
        return not self.broker_url or self.broker_url.startswith("filesystem://")

    @property
    def visibility_seconds(self) -> int:
        """Redis re-delivers unacked messages after this; about twice the longest trial.

        EVALQ_VISIBILITY_TIMEOUT overrides it (tests set a deliberately short one)."""
        if self.visibility_timeout:
            return max(1, int(self.visibility_timeout))
        return visibility_for(self.max_trial_seconds)

    def env(self) -> dict[str, str]:
        """These settings as environment variables, for child processes."""
        return {env_name(name): str(value) for name, value in self.model_dump().items()
                if value is not None}


class _TomlFile(PydanticBaseSettingsSource):
    """evalq.toml in the working directory, or the file EVALQ_CONFIG names (which must exist)."""

    def __init__(self, settings_cls):
        super().__init__(settings_cls)
        self.path, self.data = read_config_file()

    def get_field_value(self, field, field_name):  # required by the base class; unused
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.data)


def env_name(field: str) -> str:
    return PREFIX + field.upper()


#: setting name -> environment variable
ENV_KEYS = {name: env_name(name) for name in Settings.model_fields}


def settings_table() -> str:
    """The README's settings table, made from the model so the two cannot drift apart."""
    rows = ["| setting | `evalq.toml` key | environment variable | default |", "|---|---|---|---|"]
    for name, info in Settings.model_fields.items():
        extra = info.json_schema_extra or {}
        default = extra.get("default_shown")
        if default is None:
            value = info.default
            default = f"`./{value}`" if isinstance(value, Path) else f"`{value}`"
        rows.append(f"| {info.description} | `{name}` | `{env_name(name)}` | {default} |")
    return "\n".join(rows)


def config_path() -> tuple[Path, bool]:
    """The settings file and whether the user named it (EVALQ_CONFIG) rather than the default."""
    named = os.environ.get(CONFIG_ENV)
    return (Path(named), True) if named else (Path(CONFIG_FILE), False)


def read_config_file() -> tuple[Path, dict[str, Any]]:
    path, named = config_path()
    if not path.is_file():
        if named:
            raise UserError("the settings file does not exist", file=path, field=CONFIG_ENV,
                            fix="point EVALQ_CONFIG at an existing evalq.toml, or unset it")
        return path, {}
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError("not UTF-8 text", file=path, fix="save it as a UTF-8 TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"cannot parse: {exc}", file=path, fix="correct the TOML syntax") from None
    for key in data:
        if key not in Settings.model_fields:
            close = difflib.get_close_matches(key, list(Settings.model_fields), n=1)
            fix = f"did you mean '{close[0]}'?" if close else \
                f"known keys: {', '.join(Settings.model_fields)}"
            raise UserError(f"unknown setting '{key}'", file=path, field=key, fix=fix)
    return path, data


def visibility_for(trial_seconds: float) -> int:
    """A visibility timeout about twice the longest trial, plus a margin (DESIGN.md)."""
    return int(2 * trial_seconds + 300)


def load_settings() -> Settings:
    """Environment first, then evalq.toml (or EVALQ_CONFIG), then defaults under ./.evalq."""
    try:
        return Settings()
    except ValidationError as exc:
        raise _settings_error(exc) from None
    except UserError as exc:  # a URL check names the variable: say so only if it was one
        raise _named_where_set(exc) from None


def _named_where_set(exc: UserError) -> UserError:
    """A check's error about EVALQ_<NAME>, naming the file and key instead when the value
    came from evalq.toml (the environment was not set)."""
    name = next((n for n, env in ENV_KEYS.items() if env == exc.field), None)
    if name is None or os.environ.get(exc.field or ""):
        return exc
    path, _ = config_path()
    return UserError(exc.message, file=path, field=name, fix=exc.fix)


def _settings_error(exc: ValidationError) -> UserError:
    """The first problem, named where the user set it: the variable or the file's key."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error.get("loc") else "?"
    value = os.environ.get(env_name(name))
    message = error.get("msg", "invalid value").removeprefix("Value error, ")
    described = Settings.model_fields.get(name)
    what = f" ({described.description})" if described is not None else ""
    if value not in (None, ""):
        return UserError(f"{message}: {value!r}", field=env_name(name),
                         fix=f"set {env_name(name)} to a valid value{what}, or unset it")
    path, _ = config_path()
    return UserError(message, file=path, field=name, fix=f"give {name} a valid value{what}")
