"""`evalq agents list`: every agent adapter and whether its executable is installed here."""

from __future__ import annotations


import click
from evalq.report.json_text import dumps


@click.group()
def agents() -> None:
    """Agent adapters on this machine."""


@agents.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per adapter.")
def list_agents(as_json: bool) -> None:
    """Show each adapter, whether its executable is installed, and where (EVALQ_AGENT_PATH, PATH)."""
    from evalq.workers.agents.registry import ADAPTERS

    rows = []
    for name, adapter in sorted(ADAPTERS.items()):
        ok, where = adapter.installed()
        rows.append({"name": name, "executable": adapter.executable, "installed": ok,
                     "where": where, "version": adapter.version() if ok else None,
                     "description": adapter.description})
    if as_json:
        for row in rows:
            click.echo(dumps(row))
        return
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        state = "installed" if row["installed"] else "missing"
        version = row["version"] or ("" if row["executable"] is None or not row["installed"]
                                     else "version unavailable")
        click.echo(f"{row['name']:<{width}}  {state:<9}  {version}  {row['where']}  — "
                   f"{row['description']}")
