"""Settings for the project's own test suite (the examples have their own pytest.ini)."""

# Plugin behaviour is tested end to end in throwaway projects through pytester.
pytest_plugins = ["pytester"]
