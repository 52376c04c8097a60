"""Where evalq keeps things and which servers it talks to, from the environment or evalq.toml.

Every process (CLI, workers on any machine) reads the same keys, so a machine joins a study by
setting EVALQ_BROKER_URL, EVALQ_DATABASE_URL and EVALQ_ARTIFACTS_URL.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ENV_KEYS = {
    "home": "EVALQ_HOME",
    "database_url": "EVALQ_DATABASE_URL",
    "broker_url": "EVALQ_BROKER_URL",
    "artifacts_url": "EVALQ_ARTIFACTS_URL",
    "sandbox": "EVALQ_SANDBOX",
    "agent_sandbox": "EVALQ_AGENT_SANDBOX",
    "max_trial_seconds": "EVALQ_MAX_TRIAL_SECONDS",
    "lease_seconds": "EVALQ_LEASE_SECONDS",
    "visibility_timeout": "EVALQ_VISIBILITY_TIMEOUT",
}


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str
    broker_url: Optional[str]
    artifacts_url: str
    sandbox: str
    max_trial_seconds: float
    lease_seconds: float
    visibility_override: Optional[float] = None
    #: where agents run: bwrap (default), docker, or none (debugging only: the run is unsealed)
    agent_sandbox: str = "bwrap"

    @property
    def embedded(self) -> bool:
        """No broker configured: run everything on this machine with no server (SPEC D5)."""
        return not self.broker_url or self.broker_url.startswith("filesystem://")

    @property
    def visibility_timeout(self) -> int:
        """Redis re-delivers unacked messages after this; keep it about twice the longest trial.

        EVALQ_VISIBILITY_TIMEOUT overrides it (tests set a deliberately short one)."""
        if self.visibility_override:
            return max(1, int(self.visibility_override))
        return visibility_for(self.max_trial_seconds)

    def env(self) -> dict[str, str]:
        """These settings as environment variables, for child processes."""
        values = {
            "EVALQ_HOME": str(self.home), "EVALQ_DATABASE_URL": self.database_url,
            "EVALQ_ARTIFACTS_URL": self.artifacts_url, "EVALQ_SANDBOX": self.sandbox,
            "EVALQ_AGENT_SANDBOX": self.agent_sandbox,
            "EVALQ_MAX_TRIAL_SECONDS": str(self.max_trial_seconds),
            "EVALQ_LEASE_SECONDS": str(self.lease_seconds),
        }
        if self.visibility_override:
            values["EVALQ_VISIBILITY_TIMEOUT"] = str(self.visibility_override)
        if self.broker_url:
            values["EVALQ_BROKER_URL"] = self.broker_url
        return values


def visibility_for(trial_seconds: float) -> int:
    """A visibility timeout about twice the longest trial, plus a margin (DESIGN.md)."""
    return int(2 * trial_seconds + 300)


def _config_file() -> dict:
    path = Path(os.environ.get("EVALQ_CONFIG", "evalq.toml"))
    if path.is_file():
        with path.open("rb") as handle:
            return tomllib.load(handle)
    return {}


def load_settings() -> Settings:
    """Environment first, then evalq.toml (or EVALQ_CONFIG), then defaults under ./.evalq."""
    file_values = _config_file()

    def pick(key: str, default=None):
        return os.environ.get(ENV_KEYS[key]) or file_values.get(key) or default

    home = Path(pick("home", ".evalq")).expanduser().resolve()
    return Settings(
        home=home,
        database_url=pick("database_url", f"sqlite:///{home / 'evalq.db'}"),
        broker_url=pick("broker_url"),
        artifacts_url=pick("artifacts_url", str(home / "artifacts")),
        sandbox=pick("sandbox", "bwrap"),
        agent_sandbox=pick("agent_sandbox", "bwrap"),
        max_trial_seconds=float(pick("max_trial_seconds", 3600)),
        lease_seconds=float(pick("lease_seconds", 60)),
        visibility_override=float(pick("visibility_timeout")) if pick("visibility_timeout")
        else None,
    )
