"""The benchmark harness runs (a smoke run of one section); no timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_deploy_bench_quick_stats_writes_results(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--only", "stats",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "bootstrap CI" in proc.stdout and "permutation test" in proc.stdout
    section = json.loads((tmp_path / "stats.json").read_text())
    names = [f["name"] for f in section["figures"]]
    assert any(n.startswith("bootstrap CI") for n in names), names
    assert all(f["value"] is not None and f["value"] > 0 for f in section["figures"])
    low, high = section["data"]["ci"]
    assert low < high and 0 < section["data"]["p_value"] <= 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["quick"] is True and summary["figures"] == section["figures"]


def test_deploy_bench_summary_keeps_the_sections_not_run(tmp_path):
    """`--only` rewrites its own sections' files; summary.json still lists every section's
    latest figures, in bench order, and says which sections this run measured."""
    earlier = {"name": "an earlier gateway figure", "value": 1.0, "unit": "ms", "target": 2.0,
               "met": True}
    (tmp_path / "gateway.json").write_text(json.dumps({"figures": [earlier], "data": {}}))
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--only", "stats",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    section = json.loads((tmp_path / "stats.json").read_text())
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["figures"] == section["figures"] + [earlier]
    assert summary["sections_run"] == ["stats"]


def test_deploy_bench_rejects_an_unknown_section(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench", "--only", "nonsense", "--out",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown section" in proc.stderr


def test_a_bench_childs_peak_memory_is_its_own_not_its_parents():
    """ru_maxrss survives exec, so a child of a big parent would report the parent's RSS."""
    ballast = bytearray(400 * 2**20)
    ballast[::4096] = b"\x01" * len(ballast[::4096])  # touch every page: resident
    code = "import bench.peak; print(bench.peak.peak_rss_mib())"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout) < 100, proc.stdout  # ru_maxrss here says over 400 (Linux 6)
    del ballast
