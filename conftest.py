"""Root conftest: makes the chaos plugin active for runs from a checkout.

When the package is pip-installed the `pytest11` entry point (named
``chaos.plugin``) registers it already and this line is a no-op.
"""
pytest_plugins = ["chaos.plugin"]
