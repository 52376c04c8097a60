"""Pinned inputs of one side of a paired comparison, and which of them differ.

A side is a condition of a study. Its commit and agent source (and, between conditions of
one study outside commit-comparison mode, its settings) are the thing under comparison, so
they are recorded but not required to match; every other pinned value must be equal or the
pair is incompatible. A condition with an agent source is pinned by the lock: the digest of
its code and the commit id its source resolved to, not a label.
"""

from __future__ import annotations

from typing import Any, Optional

from evalq.digest import data_digest
from evalq.results.store import StudyRow
from evalq.analysis.runs import IMPORTED_SOURCES, Run

#: Runner-environment keys that must match; host names and agent version maps may vary.
ENV_KEYS = ("os", "machine", "python", "evalq")
#: Recorded for every side, compared for none: the intervention itself.
INTERVENTION = ("commit", "agent_source")
#: condition fields that are the intervention, so outside the settings digest
NOT_SETTINGS = ("name", "commit", "source")


def _condition(study: StudyRow, name: str) -> dict[str, Any]:
    for c in study.manifest.get("conditions", []):
        if c.get("name") == name:
            return c
    return {"name": name}


def _distinct(values) -> list:
    out: list = []
    for v in values:
        if v not in out:
            out.append(v)
    return sorted(out, key=lambda x: data_digest(x))


def _imported_env(runs: list[Run]) -> list[dict]:
    return _distinct((r.view.counted.worker_env or {}) for r in runs if r.view.counted)


def _toolchains(runs: list[Run]):
    """Rootfs digest per grading image; a list of the distinct maps when one image
    was graded in more than one rootfs on this side (mixed, so never compatible)."""
    recorded = [(a.grade or {}).get("toolchain") for r in runs for a in r.view.attempts]
    pairs = _distinct((t.get("image"), t.get("rootfs_digest")) for t in recorded
                      if isinstance(t, dict) and t.get("image"))
    if not pairs:
        return None
    by_image: dict[str, Any] = {}
    for image, digest in pairs:
        if image in by_image:
            return [{i: d} for i, d in pairs]
        by_image[image] = digest
    return dict(sorted(by_image.items()))
def settings_of(study: StudyRow, condition: str, runs: list[Run]) -> Optional[dict[str, Any]]:
    """The settings a side's settings_digest is taken over (None: an imported side whose runs
    recorded more than one env block)."""
    if (study.lock or {}).get("source") in IMPORTED_SOURCES:
        envs = _imported_env(runs)
        if len(envs) != 1:
            return None
        return {k: v for k, v in envs[0].items() if k not in ("repo_sha", "model_id")}
    return {k: v for k, v in _condition(study, condition).items() if k not in NOT_SETTINGS}


def agent_source_pin(study: StudyRow, condition: str) -> Optional[dict[str, Any]]:
    """{digest, commit, name, dirty} of the condition's frozen agent source, from the lock;
    None when it names none. `commit` is the id the source resolved to (a folder's: the
    checked-out commit of its repository, None outside one); `name` what the manifest said;
    `dirty` whether a folder was frozen with uncommitted changes (so differs from `commit`;
    a commit is exported as committed, whatever its work tree held)."""
    lock = study.lock or {}
    entry = (lock.get("agent_sources") or {}).get(condition)
    if not entry:
        return None
    state = (lock.get("agent_source_states") or {}).get(condition) or {}
    folder = not entry.get("commit")
    return {"digest": entry.get("digest"), "commit": entry.get("commit") or state.get("head"),
            "name": entry.get("name"), "dirty": folder and bool(state.get("dirty"))}


def pinned_inputs(study: StudyRow, condition: str, runs: list[Run]) -> dict[str, Any]:
    """The values a comparison pins for one side; None where the study did not record one."""
    lock = study.lock or {}
    cond = _condition(study, condition)
    if lock.get("source") in IMPORTED_SOURCES:
        envs = _imported_env(runs)
        env = envs[0] if len(envs) == 1 else None
        shas = _distinct(e.get("repo_sha") for e in envs)
        return {
            "commit": shas[0] if len(shas) == 1 else shas or None,
            "suite_id": lock.get("suite_id"),
            "suite_digest": lock.get("suite_digest"),
            "settings_digest": _digest(settings_of(study, condition, runs)),
            "model_id": None if env is None else env.get("model_id"),
            "grader_version": None if env is None else env.get("kit_version"),
            "toolchains": None,
            "runner_environment": None if env is None else {
                "agent_harness_version": env.get("agent_harness_version"),
                "prompt_template_version": env.get("prompt_template_version")},
            "environments_seen": len(envs),
        }
    environment = study.manifest.get("environment", {}) or {}
    graders = _distinct((a.grade or {}).get("grader_version") for r in runs
                        for a in r.view.attempts if a.grade)
    envs = _distinct({k: (a.worker_env or {}).get(k) for k in ENV_KEYS}
                     for r in runs for a in r.view.attempts if a.worker_env)
    source = agent_source_pin(study, condition)
    pinned = {
        "commit": source["commit"] if source else cond.get("commit"),
        "suite_id": lock.get("suite_id") or study.manifest.get("suite") or
        ",".join(sorted((lock.get("fixtures") or {}).keys())) or None,
        "suite_digest": lock.get("suite_digest"),
        "settings_digest": _digest(settings_of(study, condition, runs)),
        "model_id": cond.get("model") or environment.get("model_id"),
        "grader_version": graders[0] if len(graders) == 1 else (graders or None),
        "toolchains": _toolchains(runs),
        "runner_environment": envs[0] if len(envs) == 1 else (envs or None),
        "environments_seen": len(envs),
    }
    if source is not None:  # only then: reports of studies without sources stay as they were
        pinned["agent_source"] = source
    return pinned


def _digest(settings: Optional[dict[str, Any]]) -> Optional[str]:
    return None if settings is None else data_digest(settings)


def incompatible_fields(baseline: dict[str, Any], candidate: dict[str, Any],
                        ignore: tuple[str, ...] = INTERVENTION) -> list[str]:
    """Pinned fields whose values differ, or that are mixed within one side (a list of values)."""
    fields: list[str] = []
    for key in baseline.keys() | candidate.keys():
        if key in ignore or key == "environments_seen":
            continue
        a, b = baseline.get(key), candidate.get(key)
        mixed = isinstance(a, list) or isinstance(b, list)
        if mixed or a != b:
            fields.append(key)
    return sorted(fields)


def describe(value: Optional[Any]) -> str:
    if value is None:
        return "unavailable"
    if isinstance(value, dict):
        return ", ".join(f"{k}={describe(v)}" for k, v in value.items())
    return str(value)
