"""Whatever an agent leaves is data: generated hostile workspaces and outputs, through every
step evalq takes after the agent exits, end as the agent's outcome with well-formed output.

Each example builds a workspace (names of any bytes, invalid UTF-8, newlines and escapes
included; deep and wide trees; symlinks pointing anywhere; FIFOs, sockets and devices; huge
sparse files; files and folders of mode 000; a file holding a credential, read-only) and
agent output (usage.json with NaN, negative, huge and non-numeric counts; reports, stdout and
stderr of any bytes; a scripted agent's event stream), then runs what the runner runs: the
adapter's parse, redaction, packing, the diff and artifact storage (evalq.workers.runner),
the result row, the unpacking a grader does, the report (JSON, Markdown, HTML, transcripts)
and both exports. Asserted: nothing raises (no traceback, no infrastructure_failure), a
refused workspace is the agent's `incorrect` with its reason, the credential is stored
nowhere, every JSON output parses with a strict parser (no NaN or Infinity, no lone surrogate)
and every text output is valid UTF-8.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import copy_fixture, run_cli
from strict_output import strict_json, strict_jsonl
from evalq.analysis.agent_errors import stderr_tail
from evalq.analysis.export import activation_row, adjudicated_row
from evalq.analysis.jsonl import write_jsonl
from evalq.analysis.runs import study_runs
from evalq.artifacts import open_store
from evalq.fixtures.archive import MAX_WORKSPACE_BYTES, unpack_workspace
from evalq.fixtures.fixture import load_fixture, materialize
from evalq.graders.sandbox.cleanup import remove_tree
from evalq.models import Condition, Limits
from evalq.proc import ProcResult
from evalq.queue.messages import result_payload
from evalq.report.compute import compute_report
from evalq.report.transcripts import write_transcripts
from evalq.report.write import write_reports
from evalq.results.store import get_engine, record_attempt
from evalq.workers.agents.base import AgentContext, redact_result
from evalq.workers.agents.command_template import CommandTemplate
from evalq.workers.agents.scripted import ScriptedAgent
from evalq.workers.profile import new_profile
from evalq.workers.redact import Redactor
from evalq.workers.runner import stored_run

SECRET = "sk-property-credential-0123456789"

# ---------------------------------------------------------------- what the agent leaves
NAME_BYTES = st.one_of(
    st.binary(min_size=1, max_size=24),
    st.sampled_from([b"\xff\xfe", b"\x80", b"a\nb", b"\r\n", b"\x1b[31mred", b"\xe2\x80\xae",
                     b"\xed\xa0\x80", b"\\", b"\\x41", b"-", b"--- a", b"+++ b", b"@@",
                     b"\x7f", b"\xc2\x85", b"\xe2\x80\xa8", b" ", b"n" * 255]),
).map(lambda b: b.replace(b"/", b"_").replace(b"\0", b"_")).filter(
    lambda b: b not in (b".", b".."))
CONTENT = st.one_of(st.binary(max_size=300), st.just(SECRET.encode()),
                    st.binary(max_size=40).map(lambda b: b + SECRET.encode() + b"\n"),
                    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))
TARGETS = st.one_of(st.binary(min_size=1, max_size=40).map(
    lambda b: b.replace(b"\0", b"_")),
    st.sampled_from([b"/etc/passwd", b"/", b"..", b"../../../../etc/shadow", b"self",
                     b"/proc/self/environ", b"/dev/zero", b"\xff" * 10]))

ENTRY = st.one_of(
    st.tuples(st.just("file"), NAME_BYTES, CONTENT),
    st.tuples(st.just("readonly"), NAME_BYTES, CONTENT),
    st.tuples(st.just("mode000"), NAME_BYTES, CONTENT),
    st.tuples(st.just("dir000"), NAME_BYTES, CONTENT),
    st.tuples(st.just("symlink"), NAME_BYTES, TARGETS),
    st.tuples(st.just("fifo"), NAME_BYTES, st.just(b"")),
    st.tuples(st.just("socket"), NAME_BYTES, st.just(b"")),
    st.tuples(st.just("device"), NAME_BYTES, st.sampled_from([b"zero", b"null"])),
    st.tuples(st.just("sparse"), NAME_BYTES, st.sampled_from(
        [b"1", b"%d" % (2 * 1024 * 1024), b"%d" % (300 * 1024 * 1024), b"%d" % (2**40)])),
    st.tuples(st.just("hardlink"), NAME_BYTES, st.just(b"")),
    st.tuples(st.just("deep"), NAME_BYTES, st.integers(1, 70).map(str).map(str.encode)),
    st.tuples(st.just("wide"), NAME_BYTES, st.integers(1, 1200).map(str).map(str.encode)),
)

NUMBER = st.one_of(st.integers(), st.integers(-10, 10**6), st.floats(allow_nan=True),
                   st.sampled_from([float("nan"), float("inf"), -float("inf"), 10**30, -1,
                                    2**63, 2**64, 1e308, 0.5, True, "12", None, [1], {}]))
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
              "tool_calls", "tool_failures", "turns", "cost_usd")


def _usage_text(values: dict) -> bytes:
    """usage.json as an agent may write it: Python's own NaN and Infinity words included."""
    return json.dumps(values, allow_nan=True).encode()


USAGE = st.one_of(
    st.dictionaries(st.sampled_from(USAGE_KEYS), NUMBER).map(_usage_text),
    st.binary(max_size=200),
    st.just(b"[" * 5000 + b"]" * 5000),
    st.just(b'{"input_tokens": NaN, "output_tokens": -7, "cache_read_tokens": 1e400, '
            b'"turns": 99999999999999999999999, "cost_usd": -Infinity}'),
)
EVENTS = st.lists(st.one_of(
    st.fixed_dictionaries({"type": st.just("result"),
                           "usage": st.dictionaries(st.sampled_from(USAGE_KEYS), NUMBER),
                           "stop_reason": st.one_of(st.text(), NUMBER),
                           "report": st.one_of(st.text(), NUMBER)}),
    st.fixed_dictionaries({"type": st.just("tool"), "name": st.text(max_size=20),
                           "exit": NUMBER}),
), max_size=4).map(lambda events: b"\n".join(
    json.dumps(e, allow_nan=True).encode() for e in events)
    + b'\n{"type": "result", "report": "\\udcff\\ud800", "stop_reason": "\\udc80"}\n')

OUTPUTS = st.fixed_dictionaries({
    "adapter": st.sampled_from(["command", "scripted"]),
    "usage": USAGE, "report": st.binary(max_size=300), "events": EVENTS,
    "stdout": st.binary(max_size=300), "stderr": st.binary(max_size=300),
    "exit": st.one_of(st.none(), st.integers(-300, 300)),
})


def _join(root: bytes, name: bytes) -> bytes:
    return os.path.join(root, name)


def build_tree(root: Path, entries: list[tuple[str, bytes, bytes]]) -> None:
    """Make the entries under root (a name already there is made unique by its index)."""
    base = os.fsencode(root)
    files = []
    for index, (kind, name, data) in enumerate(entries):
        path = _join(base, b"%d-%s" % (index, name[:200]))
        if kind in ("file", "readonly", "mode000"):
            with open(path, "wb") as handle:
                handle.write(data)
            files.append(path)
            if kind != "file":
                os.chmod(path, 0o444 if kind == "readonly" else 0)
        elif kind == "dir000":
            os.mkdir(path)
            with open(_join(path, b"inside\xff"), "wb") as handle:
                handle.write(data)
            os.chmod(path, 0)
        elif kind == "symlink":
            os.symlink(path if data == b"self" else data, path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "socket":
            with socket.socket(socket.AF_UNIX) as sock:
                try:
                    sock.bind(path)
                except OSError:  # a unix socket's path is at most 107 bytes
                    os.mkfifo(path)
        elif kind == "device":
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 5 if data == b"zero" else 3))
        elif kind == "sparse":
            with open(path, "wb") as handle:
                handle.truncate(int(data))
        elif kind == "hardlink" and files:
            os.link(files[0], path)
        elif kind == "deep":
            os.mkdir(path)
            fd = os.open(path, os.O_RDONLY)
            for _ in range(int(data)):
                os.mkdir(name[:50], dir_fd=fd)
                child = os.open(name[:50], os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = child
            os.close(fd)
        elif kind == "wide":
            os.mkdir(path)
            for i in range(int(data)):
                open(_join(path, b"%d\xff\n" % i), "wb").close()


# ---------------------------------------------------------------- one real study
@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A study of one trial, run for real (scripted agent, bwrap grader): the row each
    example's hostile result replaces, so the report and exports read it as evalq would."""
    tmp = tmp_path_factory.mktemp("agent-data")
    fixture_dir = copy_fixture("py-slugify-bugfix", tmp / "fixtures")
    manifest = tmp / "study.toml"
    manifest.write_text(f'id = "agentdata"\nfixtures = ["{fixture_dir.as_posix()}"]\n'
                        'repetitions = 1\n[[conditions]]\nname = "c"\nagent = "scripted"\n'
                        'settings = { action = "noop" }\n')
    home = tmp / "home"
    proc = run_cli(["run", str(manifest)], {"EVALQ_HOME": str(home)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    engine = get_engine(f"sqlite:///{home / 'evalq.db'}")
    row = engine.raw_connection().execute(
        "select t.study_id, a.trial_id, a.attempt, t.fixture_id, t.condition, t.repetition, "
        "t.fixture_ref, t.fixture_digest from attempts a join trials t on t.id = a.trial_id"
    ).fetchone()
    keys = ("study_id", "trial_id", "attempt", "fixture_id", "condition", "repetition",
            "fixture_ref", "fixture_digest")
    yield SimpleNamespace(tmp=tmp, home=home, engine=engine, ref=dict(zip(keys, row)),
                          fixture=load_fixture(fixture_dir),
                          store=open_store(home / "artifacts"))
    engine.dispose()


def _run_after_agent(study, work: Path, entries, outputs) -> tuple[dict, Path]:
    """Everything evalq does once the agent has exited, as the runner does it; returns the
    recorded payload and the workspace it left."""
    profile = new_profile(work / "runs")
    materialize(study.fixture, profile.workspace)
    build_tree(profile.workspace, entries)
    out = profile.logs / "agent-output"
    out.mkdir(parents=True)
    (out / "usage.json").write_bytes(outputs["usage"])
    (out / "report.txt").write_bytes(outputs["report"])
    scripted = outputs["adapter"] == "scripted"
    adapter = ScriptedAgent() if scripted else CommandTemplate()
    settings_ = {"action": "noop"} if scripted else {"argv": ["agent"]}
    ctx = AgentContext(fixture=study.fixture, profile=profile, prompt="fix it",
                       condition=Condition(name="c", agent=adapter.name, settings=settings_),
                       limits=Limits(wall_seconds=60))
    stdout = outputs["events"] if scripted else outputs["stdout"]
    proc = ProcResult(exit_code=outputs["exit"], stdout=stdout, stderr=outputs["stderr"],
                      duration_seconds=1.5, timed_out=False, output_exceeded=False,
                      signal=None)
    result = adapter._parsed(ctx, proc)
    result.stdout, result.stderr = proc.stdout, proc.stderr
    result.metrics.exit_code = proc.exit_code
    result.metrics.stderr_tail = stderr_tail(proc.stderr)
    result.metrics.stop_reason = result.stop_reason
    redactor = Redactor([SECRET])
    result = redact_result(result, redactor, profile.workspace)
    artifacts, refused = stored_run(study.store, study.fixture, profile, result)
    metrics = result.metrics.model_dump(mode="json")
    # refused only for the size limit, never because a name or a file broke a step
    over = any(kind == "sparse" and int(data) > MAX_WORKSPACE_BYTES for kind, _, data in entries)
    assert (refused is not None) == over, refused
    if refused is not None:
        assert refused.startswith("workspace over") and "workspace" not in artifacts
        payload = result_payload(study.ref, outcome="incorrect", metrics=metrics,
                                 artifacts=artifacts, reason=f"not graded: {refused}")
    else:  # the grader's side: unpack the stored workspace, name what it dropped
        dropped = unpack_workspace(study.store.get(artifacts["workspace"]),
                                   work / "graded")
        payload = result_payload(study.ref, outcome="incorrect", metrics=metrics,
                                 artifacts=artifacts, criteria=[],
                                 reason="dropped before grading: " + "; ".join(dropped))
    record_attempt(study.engine, redactor.obj(payload), regrade=True)
    return payload, profile


def _check_outputs(study, work: Path, payload: dict) -> None:
    for name, ref in payload["artifacts"].items():
        data = study.store.get(ref)
        assert SECRET.encode() not in data, name
        if name in ("metrics", "transcript"):
            strict_json(data)
        elif name in ("diff", "final_report"):
            data.decode("utf-8")
        elif name == "workspace":
            pass  # checked by unpacking
    db = study.engine.raw_connection()
    for column in ("metrics", "artifacts", "criteria", "grade", "worker_env"):
        for (text,) in db.execute(f"select {column} from attempts"):
            if text is not None:
                strict_json(text)
    db.close()
    metrics = strict_json(json.dumps(payload["metrics"]))
    for key, value in metrics.items():
        if key.endswith("tokens") or key in ("tool_calls", "tool_failures", "turns"):
            assert value is None or (isinstance(value, int) and 0 <= value <= 10**12), key
        if "cost" in key and not key.startswith("cost_source"):
            assert value is None or (isinstance(value, float) and 0 <= value), key
    report = compute_report(study.engine, study.ref["study_id"], n_resamples=200)
    folder = work / "report"
    links = write_transcripts(study.engine, str(study.home / "artifacts"),
                              study.ref["study_id"], folder)
    paths = write_reports(report, folder, links=links)
    strict_json(paths["json"].read_bytes())
    paths["md"].read_bytes().decode("utf-8")
    paths["html"].read_bytes().decode("utf-8")
    for page in (folder / "transcripts").glob("*"):
        page.read_bytes().decode("utf-8")
    row, runs = study_runs(study.engine, study.ref["study_id"])
    for make, name in ((activation_row, "rows.jsonl"), (adjudicated_row, "results.jsonl")):
        write_jsonl((make(row, r) for r in runs), work / name)
        rows = strict_jsonl((work / name).read_bytes())
        assert len(rows) == 1


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(entries=st.lists(ENTRY, max_size=10), outputs=OUTPUTS)
def test_hostile_agent_data_ends_as_the_agents_outcome(study, entries, outputs):
    work = study.tmp / "example"
    remove_tree(work)
    work.mkdir()
    try:
        payload, _ = _run_after_agent(study, work, entries, outputs)
        assert payload["outcome"] == "incorrect"
        _check_outputs(study, work, payload)
    finally:
        assert remove_tree(work) == []


def test_the_strict_reader_refuses_what_it_must():
    """The checks above can fail: NaN, Infinity, a lone surrogate, invalid UTF-8."""
    for bad in ('{"a": NaN}', "[Infinity]", '["\\udcff"]', b'"\xff"'):
        with pytest.raises((AssertionError, UnicodeError)):
            strict_json(bad)
    assert strict_json('{"a": ["\\ud83d\\ude00", 1.5, null]}') == {"a": ["😀", 1.5, None]}


def test_only_refused_agent_data_is_the_agents_outcome(study, tmp_path):
    """The line between the agent's doing and evalq's: a workspace the worker refuses is the
    agent's `incorrect` (with the artifacts that could be stored); an artifact store that
    cannot be written is evalq's fault and raises (the runner records infrastructure_failure)."""
    from evalq.artifacts import ArtifactStore
    from evalq.workers.agents.base import TOO_LARGE, AgentResult
    from evalq.models import RunMetrics

    profile = new_profile(tmp_path / "runs")
    materialize(study.fixture, profile.workspace)
    result = AgentResult(exit_code=0, timed_out=False, stop_reason="exit",
                         metrics=RunMetrics(), stdout=b"out", extra={TOO_LARGE: "too big"})
    artifacts, refused = stored_run(study.store, study.fixture, profile, result)
    assert refused == "too big" and "workspace" not in artifacts and "stdout" in artifacts
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    result.extra.clear()
    with pytest.raises(OSError):
        stored_run(ArtifactStore(blocked), study.fixture, profile, result)



def test_a_row_written_before_numbers_were_checked_still_exports_strict(study, tmp_path):
    """An older evalq stored an agent's NaN cost and negative counts as they came; both
    exports of such a study are strict JSON, those values null (the report's statistics
    refuse a NaN cost with a one-line error of their own)."""
    db = study.engine.raw_connection()
    db.execute("update attempts set outcome = 'correct', metrics = ? ", (
        '{"input_tokens": -5, "output_tokens": 10, "cost_usd": NaN, '
        '"duration_seconds": Infinity}',))
    db.commit()
    db.close()
    row, runs = study_runs(study.engine, study.ref["study_id"])
    for make, name in ((activation_row, "rows.jsonl"), (adjudicated_row, "results.jsonl")):
        write_jsonl((make(row, r) for r in runs), tmp_path / name)
        (exported,) = strict_jsonl((tmp_path / name).read_bytes())
        if make is activation_row:
            assert exported["input_tokens"] is None and exported["cost_usd"] is None
            assert exported["output_tokens"] == 10 and exported["elapsed_seconds"] is None
        else:
            assert exported["cycle_time_seconds"] is None


def test_report_json_writes_a_number_that_is_no_number_as_null(tmp_path):
    """A NaN that reaches report.json (from any source) is unavailable: null, never the bare
    word no strict parser reads; the rest of the report is as it was."""
    report = {"a": 1.5, "rows": [{"cost": float("nan"), "n": 2}], "inf": [float("inf")]}
    paths = write_reports(report, tmp_path, formats=("json",))
    assert strict_json(paths["json"].read_bytes()) == {"a": 1.5, "rows": [{"cost": None, "n": 2}],
                                                       "inf": [None]}
