"""The settings model: one source for names, types and defaults; the README table is made from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalq.config import ENV_KEYS, Settings, load_settings, settings_table
from evalq.errors import UserError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def clean(monkeypatch, tmp_path):
    """No EVALQ_ variable of the caller's, and a working directory of the test's own."""
    import os

    for name in list(os.environ):
        if name.startswith("EVALQ_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_table_is_the_models_own():
    readme = (ROOT / "README.md").read_text()
    assert settings_table() in readme, "regenerate it with evalq.config.settings_table()"
    for env in ENV_KEYS.values():
        assert f"`{env}`" in readme


def test_environment_over_file_over_defaults(clean, monkeypatch):
    assert load_settings().lease_seconds == 60
    (clean / "evalq.toml").write_text('lease_seconds = 30\nsandbox = "docker"\nconfirm_above = 5\n'
                                      'agent_path = "/opt/agents"\n')
    settings = load_settings()
    assert (settings.lease_seconds, settings.sandbox, settings.confirm_above,
            settings.agent_path) == (30, "docker", 5, "/opt/agents")
    monkeypatch.setenv("EVALQ_LEASE_SECONDS", "12")
    monkeypatch.setenv("EVALQ_SANDBOX", "bwrap")
    assert (load_settings().lease_seconds, load_settings().sandbox) == (12, "bwrap")


def test_settings_read_from_the_file_reach_their_users(clean):
    """The sandbox, agent path and confirm threshold once read the environment only."""
    from evalq.graders.sandbox import get_sandbox
    from evalq.planning.gate import confirm_threshold
    from evalq.workers.agents.locate import search_path

    (clean / "evalq.toml").write_text('sandbox = "docker"\nagent_path = "/opt/x"\n'
                                      'confirm_above = 7\n')
    assert type(get_sandbox()).__name__ == "DockerSandbox"
    assert search_path().split(":")[0] == "/opt/x"
    assert confirm_threshold() == 7


@pytest.mark.parametrize("content, field, hint", [
    ('sandbox = "nonesuch"\n', "sandbox", "'bwrap' or 'docker'"),
    ('sandox = "docker"\n', "sandox", "did you mean 'sandbox'"),
    ("home = 5\n", "home", "valid path"),
    ("lease_seconds = -1\n", "lease_seconds", "greater than 0"),
    ("broken = \n", None, "cannot parse"),
    ('database_url = "mysql://u@h/db"\n', "database_url", "not supported"),
    ('broker_url = "amqp://h"\n', "broker_url", "not supported"),
    ('[sandbox_settings]\nx = 1\n', "sandbox_settings", "unknown setting"),
])
def test_a_bad_file_is_one_line_naming_file_and_key(clean, content, field, hint):
    (clean / "evalq.toml").write_text(content)
    with pytest.raises(UserError) as err:
        load_settings()
    line = err.value.one_line()
    assert "\n" not in line and hint in line, line
    if field:
        assert f"field '{field}'" in line and "evalq.toml" in line, line


def test_a_bad_url_from_the_environment_names_the_variable_not_the_file(clean, monkeypatch):
    (clean / "evalq.toml").write_text('broker_url = "redis://h:6379/0"\n')
    monkeypatch.setenv("EVALQ_BROKER_URL", "amqp://h")
    with pytest.raises(UserError) as err:
        load_settings()
    line = err.value.one_line()
    assert "field 'EVALQ_BROKER_URL'" in line and "evalq.toml" not in line, line


def test_a_missing_named_config_file_is_refused(clean, monkeypatch):
    monkeypatch.setenv("EVALQ_CONFIG", str(clean / "nope.toml"))
    with pytest.raises(UserError, match="does not exist"):
        load_settings()


def test_plain_postgresql_url_uses_the_shipped_driver(postgres_url, clean, monkeypatch):
    from evalq.results.store import init_db

    plain = postgres_url.replace("postgresql+psycopg2://", "postgresql://")
    monkeypatch.setenv("EVALQ_DATABASE_URL", plain)
    settings = load_settings()
    assert settings.database_url == postgres_url
    with init_db(plain).connect() as conn:  # the store maps it too, whoever calls it
        assert conn.dialect.driver == "psycopg2"


def test_every_field_is_documented():
    for name, info in Settings.model_fields.items():
        assert info.description, f"setting {name} has no description"
        assert re.fullmatch(r"[a-z_]+", name)
