"""No spec string is sliced by hand: `name:k=v` is read by chaos/params.py, `a+b` and comma
lists of specs by chaos/cellspec.py (split_faults, split_specs); everything past the edge
holds parsed `Spec`/`CellSpec` objects. The other `:`, `+` and `,` splits in the code read
something that is not a fault or preset spec; each file that has one says what here."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLICE = re.compile(r"""\.(r?split|r?partition)\(\s*['"](:|\+|,)['"]""")
NOT_A_SPEC = {
    "chaos/params.py": "the name:k=v grammar itself",
    "chaos/cellspec.py": "the readers of a+b and of comma lists of specs",
    "chaos/extensions.py": "entry-point targets (module:attr) and comma lists of distribution names",
    "faults/registry.py": "registry targets (module:Class)",
    "chaos/cli/mutants_cmd.py": "--only, a comma list of mutant names",
    "chaos/workload/producer.py": "a barrier's comma list of stream names",
    "chaos/cluster/endpoint.py": "host:port",
    "chaos/cluster/sentinel_client.py": "comma lists of host:port",
    "chaos/proxy/relay.py": "host:port",
}


def test_spec_strings_are_read_only_by_the_grammar():
    found = []
    for folder in ("chaos", "faults"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in NOT_A_SPEC:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if SLICE.search(line):
                    found.append(f"{name}:{n}: {line.strip()}")
    assert not found, ("spec text sliced by hand; hold a chaos.cellspec.Spec/CellSpec (parsed at the edge) or "
                       "use chaos.cellspec.split_faults/split_specs:\n" + "\n".join(found))


def test_every_exception_is_still_there():
    """An entry above for a file that no longer splits anything would hide a new slice there later."""
    stale = [name for name in NOT_A_SPEC if not SLICE.search((ROOT / name).read_text(encoding="utf-8"))]
    assert not stale, f"drop these from NOT_A_SPEC: {stale}"
