"""fakekube: a local HTTP server speaking the Kubernetes REST API for the calls tx-scheduler-k8s
makes (run as a script: ``python fakekube/server.py``); :mod:`fakekube.schemas` loads the
published CRD schemas the dryrun tests validate against."""
