"""The black-box fixture and marker come from chaos.plugin (chaos.blackbox.pytest_api)."""
