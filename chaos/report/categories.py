"""Allure categories: which anomaly failed a cell test, for Allure 2 and Allure 3 alike.

The failure messages of `chaos.expectations.assert_cell` carry a tag per failed bound
(`[LOST: 3]`, `[MISSING_REORDERED]`, ...). A cell no strategy is to blame for is a *broken*
test, not a failed one, in one of two "Unknown verdict" categories (named alike so they sit
together, apart so a team sees which): the rig broke (`chaos.errors.RigFailure`, whose
message allure-pytest writes as `chaos.errors.RigFailure: RIG FAILURE: <component> ...`, or a
fault that did not heal, `FaultError: ...`) or the runs could not tell (`UnknownVerdict`,
`UNKNOWN: ...`). Those two match on the exception's name, so a black-box cell's RigFailure
lands there too. The rules below match on those tags,
first match wins, so they are ordered by severity. The regexes are written
`[\\s\\S]*TAG[\\s\\S]*` so they match both where the engine anchors them at both ends
(Allure 2: Java's `matches()`) and where it searches (Allure 3: JavaScript's `test()`),
across the newlines of a multi-line message.

Allure 2 reads `categories.json` from the results dir (the pytest plugin writes it there at
session end); Allure 3 reads them from its config file (`reports/allurerc.json`, which
accepts these same Allure 2 keys). Both committed files are generated from CATEGORIES and a
test keeps them equal (`python -m chaos.report.categories` rewrites them; from an installed
package, `python -m chaos.report.categories --out DIR` writes them for your own reports).
"""
from __future__ import annotations

import json
from pathlib import Path

_ANY = r"[\s\S]*"


def _rule(name: str, tag_regex: str, statuses: tuple[str, ...] = ("failed",)) -> dict:
    return {"name": name, "messageRegex": f"{_ANY}{tag_regex}{_ANY}", "matchedStatuses": list(statuses)}


CATEGORIES: list[dict] = [
    # the rig: a server, the proxy or the fork server failed outside a fault, or a fault did not heal
    _rule("Unknown verdict: the rig broke, no strategy is to blame", r"(RigFailure: |RIG FAILURE: |FaultError: )",
          ("broken", "failed")),
    _rule("Unknown verdict: the runs could not tell (worker died, drain stalled)",
          r"(UnknownVerdict: |UNKNOWN: )", ("broken", "failed")),
    _rule("Lost events", r"\[LOST: [1-9]"),
    _rule("Stopped consuming (a live consumer left published events unconsumed after the faults healed)",
          r"\[STOPPED_CONSUMING: "),
    _rule("Wrong final state", r"\[WRONG_(FINAL_STATE_RUNS|KEYS): [1-9]"),
    _rule("Reordered writes", r"\[REORDERED: [1-9]"),
    _rule("Unexpected events (handled without a successful publish)", r"\[UNEXPECTED: [1-9]"),
    _rule("Duplicated effects or entries", r"\[(DUPLICATED|DUPLICATE_ENTRIES|PROJECTION_DRIFT): [1-9]"),
    _rule("Stuck work (pending, undelivered, DLQ)", r"\[(PENDING_LEFT|UNDELIVERED|DLQ): [1-9]"),
    _rule("Known-broken strategy did not break (anomaly expected, not seen)",
          r"\[MISSING_(WRONG_FINAL_STATE_RUNS|WRONG_KEYS|LOST|REORDERED|DUPLICATED|DUPLICATE_ENTRIES|UNEXPECTED)\]"),
    _rule("Recovery or delivery short of expected (recovered, redelivered, DLQ, published)",
          r"\[MISSING_(RECOVERED|REDELIVERED|DLQ|PUBLISHED|HANDLED|DELIVERED|PENDING_LEFT|UNDELIVERED|RETRIES"
          r"|RELEASES_FAILED)\]"),
    _rule("Other expectation mismatch", r"EXPECTATION (MISMATCH|MISSING)"),
]

REPORT_NAME = "Chaos: ordered job processing under faults"


# The Allure 3 report's tree: area > preset > fault (the labels report_cell sets).
TREE = ["epic", "feature", "story"]


def allure3_config() -> dict:
    """The Allure 3 config (`allurerc.json`): report name, the same categories, and the
    default report (awesome) with its tree grouped by area, preset and fault and the steps
    (runs and their phases) shown expanded."""
    return {"name": REPORT_NAME, "categories": CATEGORIES,
            "plugins": {"awesome": {"options": {"reportName": REPORT_NAME, "groupBy": TREE,
                                                     "stepTreeExpansion": "expanded"}}}}


def categories_json() -> str:
    return json.dumps(CATEGORIES, indent=2) + "\n"


def allurerc_json() -> str:
    return json.dumps(allure3_config(), indent=2) + "\n"


def write_config_files(reports_dir: Path) -> list[Path]:
    """Write `categories.json` (Allure 2) and `allurerc.json` (Allure 3) into reports_dir."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in (("categories.json", categories_json()), ("allurerc.json", allurerc_json())):
        path = reports_dir / name
        path.write_text(text, encoding="utf-8")
        out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(description="Write Allure's categories.json (Allure 2) and allurerc.json "
                                                 "(Allure 3, for `allure generate --config`) into a directory.")
    parser.add_argument("--out", type=Path, default=Path("reports"), help="the directory (default: ./reports)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for written in write_config_files(args.out):
        print(written)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
