"""Every `(default N)` a subcommand's --help states is the value the command gets when the
option is left out (`chaos scorecard --help` once said 10 runs where the command ran 1)."""
from __future__ import annotations

import argparse
import re

from chaos.cli import build_parser


def _subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subcommands(sub, (*path, name))
    if path:
        yield path, parser


def test_the_default_a_help_text_states_is_the_default_the_command_gets():
    checked = 0
    for path, parser in _subcommands(build_parser()):
        for action in parser._actions:
            said = re.search(r"\(default:? (-?\d+(?:\.\d+)?)\)$", (action.help or "").strip())
            if not said or not action.option_strings:
                continue
            got = parser.get_default(action.dest)
            assert str(got) == said.group(1), (
                f"`chaos {' '.join(path)} {action.option_strings[0]}`: its help says default {said.group(1)}, "
                f"the command gets {got!r}")
            checked += 1
    assert checked >= 5
