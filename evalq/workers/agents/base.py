"""The agent adapter interface: build a command, run it under its budget, read back what it did.

Adapters plug in by name (see `evalq.workers.agents.ADAPTERS`). An adapter never invents a
number: what its agent does not report stays None.
"""

from __future__ import annotations

import logging
import os
import stat
from abc import ABC, abstractmethod
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

from evalq.analysis.agent_errors import stderr_tail
from evalq.analysis.pinning import allowed_models
from evalq.errors import AgentDataError
from evalq.fixtures.fixture import Fixture
from evalq.models import Budgets, Condition, Limits, RunMetrics
from evalq.config import load_settings
from evalq.pricing import price_run
from evalq.proc import ProcResult
from evalq.workers.door import open_door
from evalq.workers.gateway import PLACEHOLDER_KEY, RunBudgets
from evalq.workers.wire import record_wire
from evalq.workers.profile import Profile
from evalq.workers.redact import Redactor
from evalq.workers.sandbox import AgentJob, get_agent_sandbox
from evalq.workers.sandbox.base import AGENT_DIR, AGENT_UID, CHECK_DIR, agent_limits
from evalq.workers.sandbox.paths import install_paths, protected_folders, refuse_exposing
from evalq.workers.sandbox.probe import probe
from evalq.workers.secrets import credentials, secret_values
from evalq.workers.agents.locate import find_executable
from evalq.workers.agents.numbers import sane_metrics
from evalq.workers.visible_check.channel import CheckChannel, CheckRecord
from evalq.plaintext import escaped_name, valid_text

OUTPUT_LIMIT = 64 * 1024 * 1024
log = logging.getLogger("evalq.worker")


@dataclass
class AgentContext:
    fixture: Fixture
    condition: Condition
    profile: Profile
    prompt: str
    limits: Limits
    attempt: int = 1
    should_stop: Callable[[], bool] = lambda: False
    #: the agent sandbox backend (None: EVALQ_AGENT_SANDBOX, else bwrap)
    sandbox: Optional[str] = None
    #: the model gateway's run that is this run's door out (a GatewayRun); None: when the
    #: condition names a base_url, the run opens evalq.workers.door.open_door to it
    door: Optional[Any] = None
    #: the base URL the agent is given (set by `run`): http://127.0.0.1:PORT/… inside a sealed
    #: run, the condition's settings.base_url when unsealed, None when there is no endpoint
    model_url: Optional[str] = None
    #: this worker's EVALQ_HOME, which no read-only path may expose (None: from the settings)
    evalq_home: Optional[Path] = None
    #: the study's budgets: memory_mb, pids and cpus size the sandbox (None: its defaults);
    #: max_tokens and max_requests are enforced by the model gateway
    budgets: Optional[Budgets] = None
    #: the condition's agent source on this worker, digest-checked (None: it names none)
    agent_source: Optional[Path] = None
    #: where the agent sees it (set by `run`): AGENT_DIR in a sealed sandbox, read-only;
    #: the worker's own path with the sandbox `none`
    agent_dir: Optional[str] = None

    @property
    def workspace(self) -> Path:
        return self.profile.workspace

    @property
    def settings(self) -> dict[str, Any]:
        return self.condition.settings

    @property
    def model(self) -> Optional[str]:
        """The model id: the condition's `model`, else its `settings.model`."""
        return self.condition.model or self.settings.get("model")


@dataclass
class AgentResult:
    exit_code: Optional[int]
    timed_out: bool
    stop_reason: Optional[str]
    metrics: RunMetrics
    stdout: bytes = b""
    stderr: bytes = b""
    transcript: Optional[bytes] = None
    final_report: Optional[str] = None
    #: usage per model when the agent reports it so (priced model by model)
    usage_by_model: Optional[dict[str, dict[str, Optional[int]]]] = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: what the worker saw of the fixture's visible check (None: the fixture declares none)
    visible_check: Optional[CheckRecord] = None


def unreadable(proc: ProcResult, exc: Exception) -> AgentResult:
    """The result of a run whose output the adapter could not read: usage unavailable (with
    why), and the workspace still graded. Its output is the agent's, so it is not evalq's
    failure: an infrastructure_failure would leave the run out of every rate, a way for an
    agent to drop its losing runs."""
    why = f"the agent's output could not be read ({type(exc).__name__}: {exc})"[:300]
    metrics = RunMetrics(unreported={name: why for name in UNREADABLE_FIELDS})
    return AgentResult(exit_code=proc.exit_code, timed_out=False,
                       stop_reason="unreadable output", metrics=metrics)


def as_data(result: AgentResult) -> AgentResult:
    """What the adapter read, as values evalq can store: numbers checked (NaN, negative or
    huge counts unavailable with the reason), texts valid UTF-8 (an agent's JSON may hold
    lone surrogates, which no database takes)."""
    result.metrics = sane_metrics(result.metrics)
    if result.stop_reason is not None:
        result.stop_reason = valid_text(str(result.stop_reason))
    if result.final_report is not None:
        result.final_report = valid_text(str(result.final_report))
    return result


#: the counts an unreadable output leaves unknown
UNREADABLE_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens",
                     "cache_write_tokens", "tool_calls", "turns")


class AgentAdapter(ABC):
    """One coding agent. Subclasses give the command and the parser of its output."""

    name: ClassVar[str]
    executable: ClassVar[Optional[str]] = None
    description: ClassVar[str] = ""
    #: environment variables holding the provider credential this agent needs
    credential_env: ClassVar[tuple[str, ...]] = ()
    #: environment that turns off the agent's telemetry, update checks and other extra traffic
    quiet_env: ClassVar[dict[str, str]] = {}
    #: the provider's endpoint when a condition names no base_url (for the model gateway)
    default_base_url: ClassVar[Optional[str]] = None
    #: how the gateway puts the real key on requests upstream ("x-api-key": Anthropic's API)
    wire_auth: ClassVar[str] = "bearer"
    #: the provider API whose model calls the door lets through (gateway/endpoints.py)
    wire_api: ClassVar[str] = "any"

    @classmethod
    def installed(cls) -> tuple[bool, str]:
        """Whether the agent's executable is found (EVALQ_AGENT_PATH, then PATH), and where."""
        if cls.executable is None:
            return True, "built in"
        found = find_executable(cls.executable)
        return (found is not None), (found or f"'{cls.executable}' not on PATH or EVALQ_AGENT_PATH")

    @classmethod
    def version(cls, sandbox: Optional[str] = None) -> Optional[str]:
        """The installed agent's version string (`--version`), None when unknown.

        Asked in a throwaway sandboxed profile with no credential: never with the worker's
        HOME or environment (agents write config dirs where they run)."""
        found = find_executable(cls.executable) if cls.executable else None
        if found is None:
            return None
        done = probe([found, "--version"], install_paths(found), env=cls.quiet_env,
                     sandbox=sandbox)
        line = (done.stdout.decode("utf-8", "replace") if done else "").strip().splitlines()
        return line[0][:200] if done and done.exit_code == 0 and line else None

    @classmethod
    def validate_settings(cls, settings: dict[str, Any]) -> tuple[str, str, str] | None:
        """(field, problem, fix) for a bad condition setting, else None."""
        names = settings.get("credential_env")
        if names is not None and not (isinstance(names, list) and
                                      all(isinstance(n, str) for n in names)):
            return "settings.credential_env", "credential_env must be a list of variable names", \
                "write credential_env = [\"ANTHROPIC_API_KEY\"]"
        models = settings.get("allowed_models")
        if models is not None and not (isinstance(models, list) and
                                       all(isinstance(m, str) and m for m in models)):
            return "settings.allowed_models", "allowed_models must be a list of model names", \
                "write allowed_models = [\"claude-haiku-4-5\"] (models besides the pinned one)"
        return None

    def executable_path(self, ctx: AgentContext) -> str:
        from evalq.errors import InfrastructureError

        found = find_executable(self.executable, ctx.settings)
        if found is None:
            wanted = ctx.settings.get("executable") or self.executable
            raise InfrastructureError(f"agent executable '{wanted}' is not installed on this "
                                      "worker (see `evalq agents list`; set EVALQ_AGENT_PATH)")
        return found

    def model_url(self, ctx: AgentContext) -> Optional[str]:
        """The base URL the agent must send its model requests to: the sandbox's door (set by
        `run`), or, unsealed, the condition's `base_url`."""
        return ctx.model_url

    def known_provider(self, ctx: AgentContext) -> Any:
        """The gateway's upstream (url, auth, api) of a provider the run's model id names, for
        agents that route by it (`openai/gpt-5`); None: the agent's own defaults apply."""
        return None

    def upstream_url(self, ctx: AgentContext) -> Optional[str]:
        """The provider endpoint behind the door: the condition's base_url, else the one the
        model id names, else the agent's."""
        known = self.known_provider(ctx)
        return ctx.settings.get("base_url") or (known.url if known else self.default_base_url)

    def door_auth(self, ctx: AgentContext) -> str:
        """How the gateway sends the real key upstream for this run."""
        known = self.known_provider(ctx)
        return known.auth if known else self.wire_auth

    def door_api(self, ctx: AgentContext) -> str:
        """The provider API whose model calls this run's door allows."""
        known = self.known_provider(ctx)
        return known.api if known else self.wire_api

    def credential_names(self, ctx: AgentContext) -> tuple[str, ...]:
        names = ctx.settings.get("credential_env")
        return tuple(names) if names is not None else self.credential_env

    def environment(self, ctx: AgentContext) -> dict[str, str]:
        """Variables added to the profile's minimal environment (beyond the credential)."""
        return {}

    def readonly_paths(self, ctx: AgentContext) -> list[Path]:
        """What the agent sees read-only besides the toolchain: its own install folders."""
        return install_paths(self.executable_path(ctx)) if self.executable else []

    def overlays(self, ctx: AgentContext) -> list[Path]:
        """Read-only paths inside EVALQ_HOME this agent may see (none: only `scripted` has one)."""
        return []

    def prepare(self, ctx: AgentContext) -> None:
        """Write the agent's own config into the fresh profile (skills, instructions, model)."""

    @abstractmethod
    def command(self, ctx: AgentContext) -> list[str]:
        """argv to run with cwd = the workspace."""

    def stdin(self, ctx: AgentContext) -> bytes | None:
        return None

    @abstractmethod
    def parse(self, ctx: AgentContext, proc: ProcResult) -> AgentResult:
        """Read the agent's own output into an AgentResult (None where it reports nothing)."""

    def _parsed(self, ctx: AgentContext, proc: ProcResult) -> AgentResult:
        """parse, or `unreadable` when the output breaks it (it is the agent's output)."""
        try:
            return as_data(self.parse(ctx, proc))
        except Exception as exc:  # noqa: BLE001 - any output an adapter cannot read
            log.warning("%s: output unreadable, graded without its usage: %s", self.name, exc)
            return unreadable(proc, exc)

    def run(self, ctx: AgentContext) -> AgentResult:
        """Prepare the profile, run sealed under the limits, parse, price, check limits, redact.

        A sealed run's only way out is its door, a run of the model gateway: the agent holds a
        placeholder key, the gateway the real one; what the gateway metered on the wire is
        recorded beside what the agent reported, and a spent budget stops the agent."""
        box = get_agent_sandbox(ctx.sandbox)
        granted = credentials(self.credential_names(ctx))
        redactor = Redactor([*secret_values(), *granted.values()])
        door = checks = None
        with ExitStack() as stack:
            gateway_run = ctx.door
            upstream = self.upstream_url(ctx)
            if box.sealed and gateway_run is None and upstream:
                door = stack.enter_context(open_door(
                    upstream, granted, auth=self.door_auth(ctx), api=self.door_api(ctx),
                    budgets=gateway_budgets(ctx), concurrency=ctx.settings.get("concurrency"),
                    models=enforced_models(ctx)))
                gateway_run = door.run
            ctx.model_url = box.model_url(upstream) if gateway_run is not None \
                or not box.sealed else None
            env = ctx.profile.env
            env.update(self.quiet_env)
            env.update(self.environment(ctx))
            # a sealed agent gets a placeholder: the real key stays with the gateway
            env.update({k: PLACEHOLDER_KEY for k in granted} if box.sealed else granted)
            source = [ctx.agent_source] if ctx.agent_source is not None else []
            if source:
                ctx.agent_dir = AGENT_DIR if box.sealed else str(ctx.agent_source)
                env["EVALQ_AGENT_DIR"] = ctx.agent_dir
            self.prepare(ctx)
            argv = self.command(ctx)
            readonly = self.readonly_paths(ctx) if box.sealed else []
            home = ctx.evalq_home or load_settings().home
            # the source lies in EVALQ_HOME's cache: allowed, as the scripted agent's overlay
            refuse_exposing([*readonly, *source], protected_folders(home), home,
                            [*self.overlays(ctx), *source])
            checks = visible_check_channel(ctx, box.sealed, redactor, stack)
            proc = box.run(AgentJob(argv=argv, env=env, workspace=ctx.workspace,
                                    profile_root=ctx.profile.root,
                                    limits=agent_limits(ctx.limits, ctx.budgets,
                                                        OUTPUT_LIMIT),
                                    readonly=readonly, door=gateway_run,
                                    agent_source=ctx.agent_source if box.sealed else None,
                                    stdin=self.stdin(ctx),
                                    check_folder=checks.folder if checks and box.sealed
                                    else None,
                                    should_stop=lambda: bool(door and door.run.exhausted)
                                    or ctx.should_stop(),
                                    label=f"{ctx.fixture.id}/{ctx.condition.name}"))
            record = checks.close() if checks is not None else None
        swapped = reclaim_workspace(ctx.workspace)
        result = self._parsed(ctx, proc)
        result.visible_check = record
        result.stdout, result.stderr = proc.stdout, proc.stderr
        if swapped is not None:
            log.warning("run %s: the agent left %s in place of its workspace; it is kept "
                        "as an empty one", ctx.profile.root, swapped)
            result.extra["workspace_replaced"] = swapped
        if proc.timed_out:
            result.timed_out = True
            result.stop_reason = f"wall time limit of {ctx.limits.wall_seconds:g} s"
        result.metrics.duration_seconds = round(proc.duration_seconds, 3)
        result.metrics.exit_code = -proc.signal if proc.signal else proc.exit_code
        result.metrics.stderr_tail = stderr_tail(proc.stderr)
        price_run(result.metrics, ctx.model, result.usage_by_model)
        if door is not None:
            record_wire(result, door.run)
        limit, cost = ctx.limits.max_cost_usd, result.metrics.cost_usd
        spent_on = door.run.exhausted if door else None
        if spent_on and not result.timed_out:  # the agent may have stopped on the refusal itself
            result.timed_out = True
            result.stop_reason = f"model gateway: {spent_on}"
        if not result.timed_out and limit is not None and cost is not None and cost > limit:
            result.timed_out = True
            result.stop_reason = f"cost limit of ${limit:g} exceeded (${cost:.4f})"
        result.metrics.stop_reason = result.stop_reason
        result.metrics.model_calls = model_calls(result.metrics)
        return redact_result(result, redactor, ctx.workspace)


def visible_check_channel(ctx: AgentContext, sealed: bool, redactor: Redactor,
                          stack: ExitStack) -> Optional[CheckChannel]:
    """The shim and listener of the fixture's visible check, its bin/ put first on the
    agent's PATH (None when the fixture declares no check); closed with `stack`."""
    declared = ctx.fixture.spec.visible_check
    if declared is None:
        return None
    channel = CheckChannel(declared.command, ctx.workspace, redactor.tree,
                           CHECK_DIR if sealed else None, AGENT_UID if sealed else None)
    stack.callback(channel.close)
    env = ctx.profile.env
    env["PATH"] = f"{channel.bin_dir}:{env.get('PATH', '')}"
    return channel


def reclaim_workspace(workspace: Path) -> Optional[str]:
    """After the run, before anything reads it: the workspace must be a real folder of the run.

    It is an entry of the agent's read-write profile, so the agent can put a symlink to any
    host folder in its place (the fixture cache's reference solution; the secrets file's
    folder), and everything after the run (archive, diff, grading, redaction in place) would
    follow it. Anything but a folder is removed and an empty workspace made; returns what
    was there, or None when the workspace is a folder."""
    try:
        st = os.lstat(workspace)
    except FileNotFoundError:
        workspace.mkdir()
        return "nothing"
    if stat.S_ISDIR(st.st_mode):
        return None
    what = "a file that is no folder"
    if stat.S_ISLNK(st.st_mode):
        what = f"a symlink to {escaped_name(os.readlink(workspace))[:200]}"
    os.unlink(workspace)
    workspace.mkdir()
    return what


def model_calls(metrics: RunMetrics) -> Optional[int]:
    """How many model calls the run made: the gateway's count when it metered the run, else
    the agent's own turns; None when neither is known."""
    if metrics.wire_requests is not None:
        return metrics.wire_requests
    return metrics.turns


def enforced_models(ctx: AgentContext) -> Optional[frozenset[str]]:
    """The models the gateway lets the run's model calls name: the condition's models
    (evalq.analysis.pinning, the report's check), once it declares `settings.allowed_models`;
    None (any model, each recorded and checked in the report) while it declares none, as an
    agent's own side models are not known until a study names them."""
    if ctx.settings.get("allowed_models") is None:
        return None
    allowed = allowed_models(ctx.condition.model_dump())
    return None if allowed is None else frozenset(allowed)


def gateway_budgets(ctx: AgentContext) -> RunBudgets:
    """What the model gateway enforces live: the study's token and request budgets and the
    trial's cost limit (the tighter of the fixture's and the study's)."""
    budgets = ctx.budgets
    return RunBudgets(max_tokens=budgets.max_tokens if budgets else None,
                      max_requests=budgets.max_requests if budgets else None,
                      max_cost_usd=ctx.limits.max_cost_usd)


def redact_result(result: AgentResult, redactor: Redactor, workspace: Path) -> AgentResult:
    """Mask credentials in everything the run will store: streams, report, metrics, workspace."""
    if not redactor:
        return result
    result.stdout, result.stderr = redactor.data(result.stdout), redactor.data(result.stderr)
    if result.transcript is not None:
        result.transcript = redactor.data(result.transcript)
    if result.final_report is not None:
        result.final_report = redactor.text(result.final_report)
    if result.stop_reason is not None:
        result.stop_reason = redactor.text(result.stop_reason)
    result.metrics = type(result.metrics).model_validate(
        redactor.obj(result.metrics.model_dump()))
    result.extra = redactor.obj(result.extra)
    if result.visible_check is not None:  # the arguments it was run with are the agent's
        result.visible_check.first_args = redactor.obj(result.visible_check.first_args)
    if workspace.exists():
        try:
            redactor.tree(workspace)
        except AgentDataError as exc:  # left half redacted: the runner stores none of it
            result.extra[TOO_LARGE] = str(exc)
    return result


#: result.extra key of a workspace over the size limit (why), which is neither stored nor graded
TOO_LARGE = "workspace_too_large"
