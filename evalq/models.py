"""Pydantic types shared by every part of evalq (CLI, workers, graders, reports)."""

from __future__ import annotations

import re

from enum import Enum
from typing import Any, Literal, Optional, get_args

from pydantic import (BaseModel, ConfigDict, Field, ValidationInfo, field_validator,
                      model_serializer, model_validator)

from evalq.criteria.spec import CriterionSpec, check_names


class Outcome(str, Enum):
    """Exactly one per attempt. Failures of graders and infrastructure are never 'incorrect'."""

    correct = "correct"
    incorrect = "incorrect"
    timed_out = "timed_out"
    grading_failure = "grading_failure"
    infrastructure_failure = "infrastructure_failure"


OUTCOMES: tuple[str, ...] = tuple(o.value for o in Outcome)
#: Outcomes that say something about the agent; the two failure kinds say nothing about it.
VALID_OUTCOMES = frozenset({Outcome.correct, Outcome.incorrect, Outcome.timed_out})


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# ---------------------------------------------------------------- fixtures
class Limits(Strict):
    """Execution limits of an agent run. Missing means no limit of that kind."""

    wall_seconds: float = Field(600, gt=0)
    max_steps: Optional[int] = Field(None, gt=0)
    max_cost_usd: Optional[float] = Field(None, gt=0)


class ToolPolicy(Strict):
    allow: list[str] = Field(default_factory=lambda: ["read", "edit", "bash"])
    network: bool = False


class GradeSpec(Strict):
    """How the hidden tests run. `{report_dir}` in the command is the sandbox's report directory."""

    command: list[str] = Field(min_length=1)
    report: Literal["junit", "tap"] = "junit"
    timeout_seconds: float = Field(120, gt=0)
    memory_mb: int = Field(512, gt=16)
    pids: int = Field(128, gt=4)
    output_limit_bytes: int = Field(1_000_000, gt=0)
    #: files reset to the fixture's own before grading (graders/protect.py); None: the
    #: toolchain's defaults (test-runner configuration), [] for none
    protected: Optional[list[str]] = None
    #: "judge": the hidden tests run in their own sandbox and reach the agent's code only
    #: through evalq_judge (graders/judge/); `command` is then the pytest arguments.
    #: "in-process" (also when unset, which keeps older digests): the command runs the tests
    #: in the agent code's process, a weaker guarantee (README).
    #: "harbor": a Harbor task's tests/test.sh in the task's own environment
    #: (graders/harbor_verifier.py), its reward the verdict.
    verdict: Optional[Literal["judge", "in-process", "harbor"]] = None

    @property
    def split(self) -> bool:
        return self.verdict == "judge"


#: a program name the visible-check shim may stand in for: a bare name found on PATH
PROGRAM_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")


class VisibleCheck(Strict):
    """The check a user or agent runs on its own work (the visible tests), e.g. `make test`.

    evalq puts a shim named after the program ahead of it on the agent's PATH: the first run of
    the check has the workspace snapshotted before it starts, and later runs are counted (the
    session's first attempt and its repair cost)."""

    command: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _program_on_path(self) -> "VisibleCheck":
        program = self.command[0]
        if not PROGRAM_NAME.fullmatch(program):
            raise ValueError(f"command[0] {program[:80]!r} must be a program name found on "
                             "PATH (no '/', no spaces), e.g. [\"python3\", \"-m\", \"pytest\"] "
                             "or [\"make\", \"test\"]")
        if any(not arg or "\0" in arg for arg in self.command):
            raise ValueError("every item of command must be a non-empty string without NUL")
        return self


class FixtureSpec(Strict):
    """The contents of fixture.toml."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    title: str
    kind: str = "bugfix"
    toolchain: str = "python"
    image: str = "evalq-grader-python:local"
    prompt: str = Field(min_length=1)
    track: Optional[str] = None
    split: Literal["regression", "held-out"] = "regression"
    suitable: bool = True
    #: whether a condition's skill should activate on this task: true for an activation
    #: case, false for an unrelated one (a load is then a false positive); None: undeclared
    skill_expected: Optional[bool] = None
    package: Optional[str] = None
    baseline_version: Optional[str] = None
    target_version: Optional[str] = None
    tool_policy: ToolPolicy = Field(default_factory=ToolPolicy)
    limits: Limits = Field(default_factory=Limits)
    grade: GradeSpec
    #: named criteria (evalq/criteria/); None: one implicit required criterion, every check
    criteria: Optional[list[CriterionSpec]] = Field(None, min_length=1)
    #: the command the agent runs to check its work (first attempt vs eventual success);
    #: None: no visible check is declared, and the session's first attempt is unavailable
    visible_check: Optional[VisibleCheck] = None
    digest: Optional[str] = None
    workspace_digest: Optional[str] = None

    @model_serializer(mode="wrap")
    def _without_undeclared_activation(self, handler):
        """Left out when unset, so the digests of fixtures frozen before them stay the same."""
        data = handler(self)
        for key in ("skill_expected", "visible_check"):
            if data.get(key) is None:
                data.pop(key, None)
        return data

    @model_validator(mode="after")
    def _criteria_named_once(self) -> "FixtureSpec":
        problem = check_names(self.criteria or [])
        if problem:
            raise ValueError(problem)
        return self


# ---------------------------------------------------------------- study
class AgentSource(Strict):
    """The agent's own code: a folder (`path`), or a commit of a git repository (`repo` and
    `commit`, with `path` a folder of it, relative to `repo`); relative to the manifest.
    Frozen into the lock by digest and mounted read-only into every run."""

    path: Optional[str] = Field(None, min_length=1)
    repo: Optional[str] = Field(None, min_length=1)
    commit: Optional[str] = Field(None, min_length=1, pattern=r"^[^-\s][^\s]*$")

    @model_validator(mode="after")
    def _one_kind(self) -> "AgentSource":
        if (self.repo is None) != (self.commit is None) or \
                (self.path is None and self.repo is None):
            raise ValueError("give path = \"agents/\" (a folder), or repo = \".\" and "
                             "commit = \"v2\" (a commit of a git repository)")
        return self

    @model_serializer(mode="wrap")
    def _only_set(self, handler):
        return {k: v for k, v in handler(self).items() if v is not None}


class Condition(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    agent: str = "scripted"
    model: Optional[str] = None
    settings: dict[str, Any] = Field(default_factory=dict)
    skill: Optional[str] = None
    #: a free-text label; a condition with a `source` gets its commit from there instead
    commit: Optional[str] = None
    source: Optional[AgentSource] = None

    @model_serializer(mode="wrap")
    def _without_unset_source(self, handler):
        """Left out when unset, so the digests of studies written before it stay the same."""
        data = handler(self)
        if data.get("source") is None:
            data.pop("source", None)
        return data


class Budgets(Strict):
    """Study-wide budgets; the tighter of these and a fixture's own limits applies."""

    wall_seconds: Optional[float] = Field(None, gt=0)
    max_steps: Optional[int] = Field(None, gt=0)
    max_cost_usd: Optional[float] = Field(None, gt=0)
    #: the agent sandbox's memory (MB), process count and CPUs; default 4096, 512, 2
    memory_mb: Optional[int] = Field(None, gt=0)
    pids: Optional[int] = Field(None, gt=0)
    cpus: Optional[float] = Field(None, gt=0)
    #: enforced live by the model gateway: tokens (all kinds) and model calls per attempt
    max_tokens: Optional[int] = Field(None, gt=0)
    max_requests: Optional[int] = Field(None, gt=0)

    @model_serializer(mode="wrap")
    def _without_unset_sandbox_sizes(self, handler):
        """Left out when unset, so the digests of studies written before them stay the same."""
        data = handler(self)
        for name in ("memory_mb", "pids", "cpus", "max_tokens", "max_requests"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class PinnedEnvironment(Strict):
    model_config = ConfigDict(extra="allow")
    tool: Optional[str] = None
    tool_version: Optional[str] = None
    model_id: Optional[str] = None
    model_parameters: dict[str, Any] = Field(default_factory=dict)
    harness_version: Optional[str] = None
    os: Optional[str] = None
    toolchain: Optional[str] = None
    permissions: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _no_study_keys(self) -> "PinnedEnvironment":
        """Free-form pins are allowed, but not a study setting written in the wrong table."""
        misplaced = sorted(set(self.model_extra or {}) & set(StudyManifest.model_fields))
        if misplaced:
            raise ValueError(f"'{misplaced[0]}' is a study setting, not a pinned environment "
                             "value: move it to the top level of the manifest")
        return self


#: metrics a hypothesis or a primary metric may name: each is compared per task between two
#: conditions (success_rate, pooled over runs, is reported but its paired form is TPR)
MetricName = Literal["tpr", "rp_at_k", "pass_at_k", "pass_hat_k", "rfr", "cpr", "nrr"]
COMPARABLE_METRICS: tuple[str, ...] = get_args(MetricName)


class Hypothesis(Strict):
    id: str
    metric: MetricName
    baseline: str
    candidate: str
    primary: bool = True
    direction: Literal["greater", "less", "two-sided"] = "two-sided"


#: a study id: also a folder name under EVALQ_HOME, so no separators and no leading dot
STUDY_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def check_study_id(value: str, field: str = "STUDY") -> str:
    """`value` if it is a valid study id; a user error otherwise (it would name a path)."""
    if not isinstance(value, str) or not re.fullmatch(STUDY_ID_PATTERN, value) or \
            len(value) > 200:
        from evalq.errors import UserError

        raise UserError(f"{value!r} is not a study id", field=field,
                        fix="use letters, digits, '.', '_' and '-', starting with a letter or "
                            "digit (a manifest path works too)")
    return value


class StageSpec(Strict):
    """A study whose tasks are another study's final workspaces (study/stage.py): each taken
    baseline run becomes one task, the declared change is applied in the agent sandbox, then
    the agent works (or, with agent = false, nothing does) and the hidden checks grade."""

    #: the baseline study's id and its lock digest (`lock_digest` of its study.lock.json)
    baseline: str = Field(pattern=STUDY_ID_PATTERN, max_length=200)
    baseline_lock: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    #: which baseline runs become tasks: "correct" ones, or "all" with a valid outcome
    take: Literal["correct", "all"] = "correct"
    #: only the runs of these baseline conditions (None: every condition)
    conditions: Optional[list[str]] = Field(None, min_length=1)
    #: a script (relative to the manifest) run by /bin/sh in the agent sandbox, in the workspace
    change: Optional[str] = Field(None, min_length=1)
    baseline_version: str = Field(min_length=1)
    target_version: str = Field(min_length=1)
    package: Optional[str] = None
    #: False: a no-agent stage, which only checks what the change left (retention)
    agent: bool = True
    #: the agent's prompt in this stage (None: the baseline task's own prompt)
    prompt: Optional[str] = Field(None, min_length=1)


#: the one condition of a no-agent stage: the scripted agent's noop, which changes nothing
NO_AGENT_CONDITION = {"name": "no-agent", "agent": "scripted", "settings": {"action": "noop"}}


class StudyManifest(Strict):
    """A pre-registered study. Paths are relative to the manifest's directory."""

    id: str = Field(pattern=STUDY_ID_PATTERN, max_length=200)
    #: before fixtures and conditions, which are checked against it (digests sort keys)
    stage: Optional[StageSpec] = None
    #: required unless the study is a stage, whose tasks come from its baseline's runs
    fixtures: list[str] = Field(default_factory=list, validate_default=True)
    conditions: list[Condition] = Field(default_factory=list, validate_default=True)
    repetitions: int = Field(3, ge=1, le=1000)
    seed: int = 0
    mode: Literal["controlled", "workflow-lift", "commit-comparison"] = "controlled"
    budgets: Budgets = Field(default_factory=Budgets)
    environment: PinnedEnvironment = Field(default_factory=PinnedEnvironment)
    hypotheses: list[Hypothesis] = Field(default_factory=list)
    primary_metrics: list[MetricName] = Field(default_factory=lambda: ["tpr"])
    description: Optional[str] = None
    max_attempts: int = Field(3, ge=1, le=20)

    @field_validator("fixtures")
    @classmethod
    def _fixtures_or_stage(cls, value: list[str], info: ValidationInfo) -> list[str]:
        stage = info.data.get("stage")
        if stage is None and "stage" in info.data and not value:
            raise ValueError("name at least one fixture (or declare a [stage])")
        if stage is not None and value:
            raise ValueError("a stage takes its tasks from its baseline's runs; remove "
                             "`fixtures`")
        return value

    @field_validator("conditions")
    @classmethod
    def _conditions_or_no_agent(cls, value: list[Condition], info: ValidationInfo
                                ) -> list[Condition]:
        """A no-agent stage gets its one condition, which changes nothing."""
        stage = info.data.get("stage")
        if stage is not None and not stage.agent:
            if value and [(c.name, c.agent, c.settings) for c in value] != \
                    [tuple(NO_AGENT_CONDITION.values())]:
                raise ValueError("a no-agent stage (agent = false) runs no agent; remove "
                                 "`conditions`")
            return [Condition.model_validate(NO_AGENT_CONDITION)]
        if not value and "stage" in info.data:
            raise ValueError("name at least one condition")
        return value

    @model_serializer(mode="wrap")
    def _without_unset_stage(self, handler):
        """Left out when unset, so the digests of studies written before it stay the same."""
        data = handler(self)
        if data.get("stage") is None:
            data.pop("stage", None)
        return data


# ---------------------------------------------------------------- runs
class RunMetrics(Strict):
    """What one run cost and did. Every field is None when the agent did not report it."""

    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    cache_read_tokens: Optional[int] = None
    cache_write_tokens: Optional[int] = None
    request_prompt_tokens: Optional[list[int]] = None
    estimated_context_tokens: Optional[list[int]] = None
    tool_calls: Optional[int] = None
    tool_failures: Optional[int] = None
    turns: Optional[int] = None
    duration_seconds: Optional[float] = None
    cost_usd: Optional[float] = None
    reported_cost_usd: Optional[float] = None
    cost_source: Optional[Literal["price_table", "agent_reported"]] = None
    price_table_id: Optional[str] = None
    price_table_date: Optional[str] = None
    cache_pricing: Optional[str] = None
    skill_loaded: Optional[bool] = None
    stop_reason: Optional[str] = None
    #: the agent process's exit status (negative: killed by that signal; None: not known)
    exit_code: Optional[int] = None
    #: model calls the run made: the gateway's count when metered, else the agent's own
    #: report (turns); None when neither is known
    model_calls: Optional[int] = None
    #: the last lines of the agent's stderr, credentials masked (evalq/analysis/agent_errors.py)
    stderr_tail: Optional[str] = None
    #: what the model gateway metered on the wire (evalq/workers/wire.py); None: not metered
    wire_requests: Optional[int] = None
    wire_input_tokens: Optional[int] = None
    wire_output_tokens: Optional[int] = None
    wire_cache_read_tokens: Optional[int] = None
    wire_cache_write_tokens: Optional[int] = None
    wire_cost_usd: Optional[float] = None
    wire_provider_errors: Optional[int] = None
    wire_retries: Optional[int] = None
    wire_refused: Optional[int] = None
    #: why the gateway could not enforce a budget (an unpriced model's cost), or None
    wire_budget_unenforced: Optional[str] = None
    #: the models the run's metered requests asked for, as the gateway read them off the wire
    wire_models: Optional[list[str]] = None
    #: counts both sources have and that differ ([] when they agree; None: nothing to compare)
    accounting_disagrees: Optional[list[str]] = None
    #: why a count above is None, by field ("not reported": the agent's output lacked it)
    unreported: Optional[dict[str, str]] = None

    @property
    def accounting_complete(self) -> bool:
        """True when tokens and cost are all known; incomplete runs stay out of cost aggregates."""
        return None not in (self.input_tokens, self.output_tokens, self.cost_usd)


class Criterion(Strict):
    """One hidden check's verdict with its evidence (the criteria rows of a skill evaluation)."""

    index: int
    name: str
    passed: Optional[bool]
    evidence: str = ""


class GradeResult(Strict):
    outcome: Outcome
    reason: Optional[str] = None
    criteria: list[Criterion] = Field(default_factory=list)
    exit_code: Optional[int] = None
    duration_seconds: Optional[float] = None
    sandbox: Optional[str] = None
    output_tail: str = ""
    #: image, toolchain name and rootfs digest the hidden tests ran in
    toolchain: Optional[dict] = None
    #: "judge" or "in-process" (GradeSpec.verdict)
    verdict: Optional[str] = None
    #: True when the report shows forgery (graders/tamper.py); None when not examined
    tampered: Optional[bool] = None
    #: sha256 of the hidden tests and grader files before and after the run
    digests: dict[str, str] = Field(default_factory=dict)


class TrialRef(Strict):
    """What a queue message carries: ids only, never workspaces."""

    study_id: str
    trial_id: str
    attempt: int
    fixture_id: str
    condition: str
    repetition: int
