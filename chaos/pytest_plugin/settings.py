"""Every ``--chaos-*`` option has an ini twin, so a team sets it once in its pyproject:

    [tool.pytest.ini_options]
    chaos_time_scale = "0.5"
    chaos_summary = "reports/chaos-summary.json"

``add`` declares both (the option's default is None, so "not given" is seen); ``value`` reads
the command line first, then the ini file, then the default, converting and checking the ini
text like argparse checks the option's. Only pytest is imported here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pytest

GROUP = "chaos"
GROUP_TITLE = "chaos: fault injection on Redis Streams + PostgreSQL"


@dataclass(frozen=True)
class Setting:
    flag: str                              # --chaos-x
    default: Any
    convert: Callable[[str], Any] = str
    choices: tuple[str, ...] = ()
    flag_only: bool = False                # store_true: the ini twin is a bool

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


_SETTINGS: dict[str, Setting] = {}


def add(parser: pytest.Parser, flag: str, *, help: str, default: Any = None, type: Callable[[str], Any] = str,
        metavar: str | None = None, choices: tuple[str, ...] = (), flag_only: bool = False) -> None:
    """Declare ``--chaos-x`` and its ini twin ``chaos_x``."""
    setting = Setting(flag, default, type, choices, flag_only)
    _SETTINGS[setting.dest] = setting
    group = parser.getgroup(GROUP, GROUP_TITLE)
    if flag_only:
        group.addoption(flag, dest=setting.dest, action="store_true", default=None, help=help)
        parser.addini(setting.dest, help=f"{help} (the ini twin of {flag})", type="bool", default=bool(default))
        return
    group.addoption(flag, dest=setting.dest, default=None, type=type, metavar=metavar, help=help,
                    **({"choices": choices} if choices else {}))
    parser.addini(setting.dest, help=f"{help} (the ini twin of {flag})", default="")


def value(config: pytest.Config, dest: str) -> Any:
    """``--chaos-x`` if given, else the ini ``chaos_x`` if set, else the default."""
    setting = _SETTINGS[dest]
    given = config.getoption(dest, None)
    if given is not None:
        return given
    raw = config.getini(dest)
    if setting.flag_only:
        return bool(raw)
    text = str(raw).strip() if raw is not None else ""
    if not text:
        return setting.default
    if setting.choices and text not in setting.choices:
        raise pytest.UsageError(f"ini {dest} = {text!r}: give one of {', '.join(setting.choices)}")
    try:
        return setting.convert(text)
    except ValueError:
        raise pytest.UsageError(f"ini {dest} = {text!r}: not a valid value for {setting.flag} "
                                f"(a {getattr(setting.convert, '__name__', 'value')})") from None


def explicitly_set(config: pytest.Config) -> list[str]:
    """The chaos settings this session was given, on the command line or in the ini file."""
    found = []
    for dest, setting in _SETTINGS.items():
        if config.getoption(dest, None) is not None:
            found.append(setting.flag)
        elif config.inicfg.get(dest) not in (None, ""):
            found.append(dest)
    return found
