"""The black-box fixture and marker come from the plugin (chaos/pytest_plugin/blackbox.py)."""
