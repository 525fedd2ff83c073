"""Fixtures of the tx-scheduler-gcp-batch tests.

No Batch emulator exists: the session fixture ``fake_gcp`` (of
:mod:`tx_scheduler_gcp_batch.testing`, loaded by the repository's root ``conftest.py`` so
that tests/test_portability.py shares the server) starts :class:`fake_gcp.FakeGcp`, a local server for the Batch v1 and Cloud
Logging v2 REST APIs that really runs the tasks as local processes. The scheduler under test
is the real one over the official client libraries, located the way users locate Google
Cloud (environment variables, see ``tx_scheduler_gcp_batch._client``).
"""
