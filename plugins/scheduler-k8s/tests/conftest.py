"""Fixtures of the tx-scheduler-k8s tests.

No Kubernetes API server can run on the test machines, so the client path is tested
against ``fakekube`` (beside this file): a local HTTP server speaking the Kubernetes REST
API for the calls the plugin makes, whose fake cluster runs each pod's command as a local
process. The session fixture ``fake_cluster`` (of :mod:`tx_scheduler_k8s.testing`, loaded
by the repository's root ``conftest.py`` so that tests/test_portability.py shares the server)
starts it and points ``KUBECONFIG`` at it for the whole session.
"""
