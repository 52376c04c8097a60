"""What a fixture imported from a Harbor task records of it (`harbor.toml` beside
`fixture.toml`, covered by the fixture's digest): where the agent's workspace sits in the
task's environment, how the verifier's reward reads as a verdict, and the pinned digest of
the environment's root file system."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from evalq.errors import UserError

SETTINGS_FILE = "harbor.toml"


class HarborSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str = "harbor"
    #: task.toml's `version`
    format_version: str
    #: evalq's tree digest of the task folder as imported
    source_digest: str
    #: where the task's environment keeps the agent's workspace (its WORKDIR)
    workdir: str = Field(pattern=r"^/.*[^/]$")
    rootfs_digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    #: the local image the task names instead of a Dockerfile ([environment] docker_image)
    docker_image: Optional[str] = None
    reward_key: str = "reward"
    reward_threshold: float = Field(1.0, gt=0)
    cpus: float = Field(1.0, gt=0)
    verifier_env: dict[str, str] = Field(default_factory=dict)
    image_env: dict[str, str] = Field(default_factory=dict)
    solution_env: dict[str, str] = Field(default_factory=dict)
    #: what task.toml asked for and evalq does not grant, as sentences
    downgraded: list[str] = Field(default_factory=list)


def read_settings(fixture_path: Path) -> HarborSettings:
    path = fixture_path / SETTINGS_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the Harbor settings: {exc}", file=path,
                        fix="re-import the task with `evalq fixtures import harbor`") from None
    try:
        return HarborSettings.model_validate(data)
    except Exception as exc:
        first = str(exc).splitlines()[1] if len(str(exc).splitlines()) > 1 else str(exc)
        raise UserError(f"invalid Harbor settings: {first}", file=path,
                        fix="re-import the task with `evalq fixtures import harbor`") from None
