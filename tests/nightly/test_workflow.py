"""The nightly workflow (and the GitLab CI equivalent in docs/nightly.md) parses, has the
expected structure, and every command it runs exists in this project and takes its options.

Nothing here can run GitHub Actions: the commands are read out of the YAML, their `${{ }}`
expressions given the values a run would give them, and then run for real where that is
cheap (pytest with --collect-only, `bash -n` on scripts) or parsed by the real parser."""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from chaos.report.merge import build_parser as merge_parser

from .helpers import ROOT, run_pytest

WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
NIGHTLY_DOC = ROOT / "docs" / "nightly.md"
SHELL = {"set", "echo", "rm", "cp", "mkdir", "exit", "test", "[", "apt-get"}   # on every CI image
KEYWORDS = {"if", "then", "fi", "else", "{", "}", "do", "done"}


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def gitlab() -> dict:
    [block] = re.findall(r"```yaml\n(.*?)```", NIGHTLY_DOC.read_text(), flags=re.S)
    return yaml.safe_load(block)


def github_values(doc: dict) -> dict[str, str]:
    """What a run gives each expression the workflow uses."""
    return {"matrix.shard": "1", "matrix.server": "redis", "env.SHARDS": doc["env"]["SHARDS"], "env.CHAOS_RUNS": "2",
            "github.run_number": "1", "steps.merge.outputs.code": "0",
            "vars.NIGHTLY_PAGES == 'true'": "false"}


def expand(script: str, values: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        expr = match.group(1).strip()
        assert expr in values, f"expression ${{{{ {expr} }}}} has no value in this test: add it"
        return values[expr]
    return re.sub(r"\$\{\{(.*?)\}\}", one, script)


def commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script (continuations joined, lists and if split)."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"\s*(?:&&|\|\||;)\s*", line):
            tokens = [t for t in shlex.split(part.split(">")[0]) if t not in KEYWORDS]
            if tokens and not re.match(r"^[A-Za-z_]+=", tokens[0]) and tokens[0] != "for":
                found.append(tokens)
    return found


def run_steps(doc: dict) -> list[tuple[str, str]]:
    return [(name, step["run"]) for name, job in doc["jobs"].items() for step in job["steps"] if "run" in step]


def check_command(tokens: list[str], tmp_path: Path) -> str:
    """Run or parse one command as far as this machine can; returns what it was."""
    head = tokens[0]
    if head == "bash":
        script = ROOT / tokens[1]
        assert script.is_file(), f"{tokens}: {script} does not exist"
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
        return "script"
    if tokens[:3] == ["python3", "-m", "pytest"]:
        args = [str(ROOT / t) if (ROOT / t).exists() and not t.startswith("-") else t for t in tokens[3:]]
        if "-n" in args:
            args[args.index("-n") + 1] = "0"     # one process is enough to check the options
        proc = run_pytest(*args, "--collect-only", "-q", cwd=tmp_path)
        assert proc.returncode == 0, f"{tokens}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        return "pytest"
    if tokens[:3] == ["python3", "-m", "chaos.report.merge"]:
        merge_parser().parse_args(tokens[3:])   # SystemExit on an option it does not take
        return "merge"
    assert head in SHELL, f"{tokens}: not a command of this project nor a standard shell utility"
    return "shell"


def test_the_workflow_parses_and_is_scheduled_and_manual():
    doc = workflow()
    triggers = doc.get("on", doc.get(True))      # YAML 1.1 reads a bare `on` as true
    [schedule] = triggers["schedule"]
    assert len(schedule["cron"].split()) == 5
    assert "workflow_dispatch" in triggers
    assert set(doc["jobs"]) == {"shard", "merge", "pages"}


def test_the_shards_are_a_matrix_that_runs_the_readme_set_up_and_uploads_results_and_summary():
    doc = workflow()
    job = doc["jobs"]["shard"]
    shards = int(doc["env"]["SHARDS"])
    assert job["strategy"]["matrix"]["shard"] == list(range(1, shards + 1)) and shards >= 2
    assert job["strategy"]["fail-fast"] is False, "one failing shard must not cancel the others"
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert "bash scripts/setup.sh" in runs[0] and "bash scripts/setup.sh" in (ROOT / "README.md").read_text()
    [pytest_cmd] = [c for r in runs for c in commands(r) if c[:3] == ["python3", "-m", "pytest"]]
    text = " ".join(pytest_cmd)
    assert "--chaos-shard ${{ matrix.shard }}/${{ env.SHARDS }}" in text
    assert "--chaos-server ${{ matrix.server }}" in text and job["strategy"]["matrix"]["server"] == ["redis", "valkey"]
    assert "--chaos-runs" in pytest_cmd and "suites" in pytest_cmd
    alluredir = pytest_cmd[pytest_cmd.index("--alluredir") + 1]
    summary = pytest_cmd[pytest_cmd.index("--chaos-summary") + 1]
    [upload] = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload["if"] == "always()" and upload["with"]["name"] == "shard-${{ matrix.shard }}-${{ matrix.server }}"
    folder = upload["with"]["path"]
    assert alluredir.startswith(folder) and summary.startswith(folder)


def test_the_merge_combines_every_shard_carries_history_publishes_and_fails_on_a_mismatch():
    doc = workflow()
    job = doc["jobs"]["merge"]
    assert job["needs"] == "shard" and job["if"] == "always()", "the report is merged whatever the shards did"
    steps = job["steps"]
    [download] = [s for s in steps if s.get("uses", "").startswith("actions/download-artifact")]
    assert download["with"]["pattern"] == "shard-*"
    [merge_cmd] = [c for s in steps if "run" in s for c in commands(s["run"]) if "chaos.report.merge" in c]
    assert merge_cmd[3] == f"{download['with']['path']}/shard-*"
    restore = [s for s in steps if s.get("uses", "").startswith("actions/cache/restore")][0]["with"]
    save = [s for s in steps if s.get("uses", "").startswith("actions/cache/save")][0]["with"]
    history = merge_cmd[merge_cmd.index("--history") + 1]
    assert restore["path"] == save["path"] == history
    assert save["key"].startswith(restore["restore-keys"]), "tomorrow's restore finds today's save"
    out = merge_cmd[merge_cmd.index("--out") + 1]
    keep = [s["run"] for s in steps if "run" in s and f"cp -r {out}/state {history}" in s["run"]]
    assert keep, "the merged state (Allure history, durations) is what the cache saves"
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and all(s["if"] == "always()" for s in uploads)
    assert any(s.get("uses", "").startswith("actions/upload-pages-artifact") for s in steps)
    pages = doc["jobs"]["pages"]
    assert "needs.merge.outputs.pages == 'true'" in pages["if"] and "vars.NIGHTLY_PAGES" in str(steps)
    assert pages["permissions"] == {"pages": "write", "id-token": "write"}
    last = steps[-1]["run"]
    assert "steps.merge.outputs.code" in last and "exit 1" in last and "if" not in steps[-1]
    # a strategy regression (merge exit 1) and a rig-only night (exit 2) are annotated apart
    assert '"$code" = "1" ]; then echo "::error title=strategy broke::' in last
    assert '"$code" = "2" ]; then echo "::error title=rig broke (no strategy regression)::' in last
    # the shard artifacts' layout is what the merge reads
    [pytest_cmd] = [c for s in doc["jobs"]["shard"]["steps"] if "run" in s for c in commands(s["run"])
                    if c[:3] == ["python3", "-m", "pytest"]]
    assert pytest_cmd[pytest_cmd.index("--alluredir") + 1].endswith("/allure-results")
    assert pytest_cmd[pytest_cmd.index("--chaos-summary") + 1].endswith("/summary.json")


def test_every_action_is_pinned_to_a_version():
    for job in workflow()["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                assert re.search(r"@v\d+$", step["uses"]), step["uses"]


def test_every_command_the_workflow_runs_exists_in_the_project(tmp_path):
    doc = workflow()
    kinds = set()
    for _name, script in run_steps(doc):
        for tokens in commands(expand(script, github_values(doc))):
            kinds.add(check_command(tokens, tmp_path))
    assert kinds == {"script", "pytest", "merge", "shell"}


def test_the_gitlab_equivalent_parses_and_runs_the_same_commands(tmp_path):
    doc = gitlab()
    shard, merge = doc["shard"], doc["merge"]
    assert shard["parallel"] == len(workflow()["jobs"]["shard"]["strategy"]["matrix"]["shard"])
    assert merge["needs"] == ["shard"] and merge["when"] == "always"
    assert shard["artifacts"]["when"] == "always" and doc["pages"]["artifacts"]["paths"] == ["public/"]
    values = {"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "4", "CI_PIPELINE_IID": "1"}
    kinds = set()
    for job in (shard, merge, doc["pages"]):
        for line in job["script"]:
            line = re.sub(r"\$(\w+)", lambda m: values.get(m.group(1), m.group(0)), line)
            for tokens in commands(line):
                kinds.add(check_command(tokens, tmp_path))
    assert kinds == {"script", "pytest", "merge", "shell"}
    [pytest_line] = [line for line in shard["script"] if "pytest" in line]
    folder = shard["artifacts"]["paths"][0].rstrip("/")
    assert f"--alluredir {folder}/allure-results" in pytest_line and f"--chaos-summary {folder}/summary.json" in pytest_line


@pytest.mark.parametrize("tokens", [["python3", "-m", "pytest", "suites", "--chaos-shardz", "1/2"],
                                    ["bash", "scripts/nope.sh"],
                                    ["python3", "-m", "chaos.report.merge", "x", "--outt", "y"],
                                    ["make", "nightly"]])
def test_the_command_check_can_fail(tokens, tmp_path):
    with pytest.raises((AssertionError, SystemExit)):
        check_command(tokens, tmp_path)


def test_the_documented_local_run_uses_commands_that_exist(tmp_path):
    blocks = [b for b in re.findall(r"```\n(.*?)```", NIGHTLY_DOC.read_text(), flags=re.S) if "chaos.report.merge" in b]
    assert blocks
    kinds = set()
    for block in blocks:
        for tokens in commands(block.replace("$k", "1")):
            kinds.add(check_command(tokens, tmp_path))
    assert {"pytest", "merge"} <= kinds
