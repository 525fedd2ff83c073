"""The project and location the tests' fake Batch server answers for (a module of its own:
test modules cannot import conftest)."""

PROJECT = "tx-test-project"
LOCATION = "us-central1"
