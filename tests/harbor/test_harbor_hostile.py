"""The hostile agent of tests/agent_sandbox, run on a Harbor task, so in the task's own
environment, in both sandboxes (bubblewrap also as root without CAP_SYS_ADMIN, where it runs
as the agent's user): every check of that test holds there too.

Its study is the same (canaries in the reference solution and the verifier, another run's
workspace, the worker's HOME, the secrets file and environment; writes outside, leftover
processes, a loopback listener and a host in another network namespace, a trigger in the
results database; the door to a model server), but the fixture is an imported Harbor task,
whose agent runs with the task's tree (bubblewrap) or image (Docker) as its root, on that
environment's python3.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "agent_sandbox"))
sys.path.insert(0, str(HERE.parent / "agents"))
sys.path.insert(0, str(HERE))

import test_hostile_agent as hostile  # noqa: E402
from test_harbor_agent_env import tool_fixture  # noqa: E402,F401 - the imported tool task
from evalq.fixtures.fixture import freeze_fixture  # noqa: E402

CHECKS = [hostile.test_cheating_condition_is_graded_incorrect,
          hostile.test_no_canary_was_read_in_any_form,
          hostile.test_nothing_was_written_outside_the_workspace,
          hostile.test_the_workspace_cannot_fill_the_hosts_disk,
          hostile.test_no_process_outlived_the_run,
          hostile.test_only_the_door_was_reachable,
          hostile.test_results_database_was_not_changed]


def _planter(source: Path):
    """hostile._plant for the Harbor fixture: a canary in a file of the reference solution
    and in the verifier (a comment: the self-check still passes); the same host canaries."""

    def plant(tmp: Path, canaries: dict, home: Path, worker_home: Path) -> dict:
        fixture = tmp / "fixtures" / source.name
        shutil.copytree(source, fixture)
        (fixture / "solutions" / "correct" / "canary.txt").write_text(canaries["solution"])
        verifier = fixture / "hidden" / "tests" / "test.sh"
        verifier.write_text(verifier.read_text() + f"# {canaries['hidden']}\n")
        freeze_fixture(fixture)
        return hostile.plant_around(fixture, tmp, canaries, home, worker_home)

    return plant


@pytest.fixture(scope="module", params=["bwrap", hostile.NO_SYS_ADMIN, "docker"])
def study(request, tmp_path_factory, tool_fixture):
    patch = pytest.MonkeyPatch()
    patch.setattr(hostile, "_plant", _planter(tool_fixture))
    try:
        data = hostile._study(request.param, tmp_path_factory.mktemp(f"hostile-{request.param}"),
                              tmp_path_factory.getbasetemp())
    finally:
        patch.undo()
    data["backend"] = request.param
    (data["row"],) = hostile.attempts(data["home"])
    stdout = hostile.artifact(data["home"], data["row"]["artifacts"]["stdout"]).decode(
        errors="replace")
    summary = [hostile.json.loads(line) for line in stdout.splitlines()
               if line.startswith('{"type": "hostile"')]
    stderr = hostile.artifact(data["home"], data["row"]["artifacts"]["stderr"]).decode(
        errors="replace") if "stderr" in (data["row"]["artifacts"] or {}) else ""
    assert summary, (f"the hostile agent did not finish ({data['row']['outcome']}: "
                     f"{data['row']['reason']}): {stdout[-2000:]} {stderr[-2000:]}")
    data["said"] = summary[0]["results"]
    return data


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__[5:] for c in CHECKS])
def test_the_hostile_agent_is_held_in_the_task_environment(study, check, tool_fixture,
                                                           monkeypatch):
    monkeypatch.setattr(hostile, "FIXTURE", tool_fixture.name)  # its containers' label
    check(study)
