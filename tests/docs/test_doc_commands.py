"""Every `python -m chaos ...` command written in the README and docs/ is one the CLI takes.

The commands are read out of the documents' code blocks (not listed here), parsed by the
real argument parser, and their presets, parts and faults resolved through the real
registries, so a renamed option, preset or fault parameter fails here before a reader
copies it. Syntax summaries (`[--json]`, `A|B`, placeholders) are skipped.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from chaos.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
PLACEHOLDER = re.compile(r"\[|\]|\||\.\.|\b[A-Z]{2,}\b|examples/X\.toml|<[a-z]")


def documented_commands() -> list[tuple[str, str]]:
    found = []
    for doc in DOCUMENTS:
        for block in re.findall(r"```[a-z]*\n(.*?)```", doc.read_text(), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.strip().removeprefix("$ ").split("  #", 1)[0]
                line = re.split(r"\s{3,}", line)[0].strip().rstrip("&").strip()  # drop a summary's help column
                match = re.search(r"python3? -m chaos (.*)$", line)
                if match and not PLACEHOLDER.search(match.group(1)):
                    found.append((doc.name, match.group(1)))
    return found


COMMANDS = documented_commands()


def test_the_documents_hold_commands():
    assert len(COMMANDS) >= 10, COMMANDS  # the extraction itself works


@pytest.mark.parametrize(("doc", "command"), COMMANDS, ids=[f"{d}:{c[:60]}" for d, c in COMMANDS])
def test_documented_command_is_accepted(doc, command):
    argv = shlex.split(command)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse refused it
        pytest.fail(f"{doc}: `python -m chaos {command}` is refused by the CLI (exit {exc.code})")
    if argv[0] == "run" and getattr(args, "preset", None):
        from chaos.strategies.presets import resolve
        from faults.registry import get_fault
        parts = dict(p.split("=", 1) for p in (getattr(args, "part", None) or []))
        resolve(args.preset, parts=parts)
        for spec in getattr(args, "fault", None) or []:
            get_fault(spec)
    if argv[0] == "describe":
        from chaos.cli.list_cmd import describe
        assert describe(args.name).strip(), f"{doc}: `describe {args.name}` prints nothing"
    if argv[0] == "matrix":
        from chaos.strategies.presets import resolve
        from faults.registry import get_fault
        for preset in (args.presets or "").split(","):
            if preset:
                resolve(preset)
        for fault in (args.faults or "").split(","):
            if fault:
                get_fault(fault)


def test_readme_failover_example_shows_loss_and_redelivery():
    """The README's failover command, run as written: its sentence promises loss and redelivery."""
    import json
    import subprocess
    import sys

    line = next(c for d, c in COMMANDS if d == "README.md" and "promote-replica" in c and "--json" in c)
    done = subprocess.run([sys.executable, "-m", "chaos", *shlex.split(line)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["verdict"] != "unknown", result.get("anomalies")
    assert result["lost"] >= result["runs"] and result["redelivered"] >= result["runs"], (
        f"the README promises lost and redelivered events: lost={result['lost']} "
        f"redelivered={result['redelivered']} over {result['runs']} runs")
