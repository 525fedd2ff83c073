"""The project and location the tests' fake Batch server answers for (a module of its own,
not conftest: several test directories put their own conftest on sys.path)."""

PROJECT = "tx-test-project"
LOCATION = "us-central1"
