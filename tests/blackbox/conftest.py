"""Until chaos/plugin.py loads chaos.blackbox.pytest_api (docs/requests-blackbox.md B2),
the black-box fixture and marker are made available to these tests here."""
from chaos.blackbox.pytest_api import MARKER, blackbox  # noqa: F401 - the fixture


def pytest_configure(config):
    config.addinivalue_line("markers", MARKER)
