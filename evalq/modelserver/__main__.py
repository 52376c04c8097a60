"""`python -m evalq.modelserver SCRIPT [--port N]`: serve a scripted conversation on loopback."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from evalq.modelserver.script import load_script
from evalq.modelserver.server import ModelServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evalq.modelserver")
    parser.add_argument("script", type=Path)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = ModelServer(load_script(args.script), port=args.port).start()
    print(server.url, flush=True)
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    server.stop()
    return 0


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    sys.exit(main())
