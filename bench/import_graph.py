"""The import graph and the sizes of chaos/ and faults/, as one JSON object (issue 22's "measure
before and after"):

    python3 bench/import_graph.py

Read from the code as tests/structure reads it (ast; every import counts: at the top, inside a
function, under TYPE_CHECKING):

* `modules`: .py files under chaos/ and faults/;
* `imports`: import statements naming a module of the house, and `edges`: distinct
  (importing module, imported module) pairs;
* `upward`: imports that point up the layer table (docs/INTERFACES.md section 0,
  tests/structure/test_layers.py's `LAYERS`), each named;
* `part_circles`: parts (a `chaos.<subpackage>`, `chaos.<module>` or `faults`) that import
  each other in a loop; `module_circles`: modules that do (a package importing its own
  submodules, and they it, is a module circle but not a part circle);
* `largest_module` / `largest_class` / `largest_function`: lines and where (counted as
  tests/structure/test_sizes.py counts them).

Nothing is run and nothing is timed.
"""
from __future__ import annotations

import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "structure"))

from test_layers import RANK, _cycles, _module_of, imports, unit, upward  # noqa: E402
from test_sizes import definitions, sources  # noqa: E402


def figures() -> dict:
    found = imports()
    modules: dict[str, set[str]] = defaultdict(set)
    parts: dict[str, set[str]] = defaultdict(set)
    for i in found:
        a = _module_of(ROOT / i.path)
        modules[a].add(i.module)
        if unit(a) != unit(i.module) and unit(i.module) != "chaos":
            parts[unit(a)].add(unit(i.module))
    texts = sources()
    size, where = max((len(text.splitlines()), rel) for rel, text in texts)
    largest_class = max(definitions((ast.ClassDef,)))
    largest_function = max(definitions((ast.FunctionDef, ast.AsyncFunctionDef)))
    return {
        "modules": len(texts),
        "imports": len(found),
        "edges": sum(len(v) for v in modules.values()),
        "upward": upward(found, RANK),
        "part_circles": _cycles(parts),
        "module_circles": _cycles(modules),
        "largest_module": [size, where],
        "largest_class": list(largest_class),
        "largest_function": list(largest_function),
    }


if __name__ == "__main__":
    print(json.dumps(figures(), indent=1))
