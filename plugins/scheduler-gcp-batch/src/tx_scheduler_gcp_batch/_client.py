"""Where the ``gcp_batch`` scheduler finds its project, location, endpoints and credentials,
and how Google API errors become one-line :class:`tx.schedulers.SchedulerError` messages.

Everything is read the way the Google Cloud tools read it, so that a scheduler created by
name in any process (``tx status`` in another shell) reaches the same Batch service:

=====================================  =========================================================
setting                                where it comes from (first found wins)
=====================================  =========================================================
project                                run option ``project``; ``$GOOGLE_CLOUD_PROJECT``;
                                       ``$CLOUDSDK_CORE_PROJECT``; the project of the
                                       application default credentials (``gcloud config set
                                       project``, a service-account key file)
location (region)                      run option ``location``; ``$CLOUDSDK_BATCH_LOCATION``
                                       (gcloud's ``batch/location`` property); ``us-central1``
Batch API endpoint                     ``$CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH`` (gcloud's
                                       ``api_endpoint_overrides/batch``); else the client's
                                       default ``batch.googleapis.com``
Cloud Logging API endpoint             ``$CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING``; else
                                       ``logging.googleapis.com``
credentials                            application default credentials
                                       (``$GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth
                                       application-default login``, the metadata server);
                                       none (anonymous) for a plain ``http://`` endpoint,
                                       which only a local server or emulator offers
=====================================  =========================================================

An endpoint is ``scheme://host[:port]`` (a trailing ``/`` or ``/v1/`` as gcloud writes it is
dropped); without a scheme it is ``https``. References:
https://cloud.google.com/sdk/gcloud/reference/topic/configurations (properties and their
``CLOUDSDK_SECTION_NAME`` variables), https://google.aip.dev/auth/4110 (application default
credentials).
"""
from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

from tx.schedulers import SchedulerError

T = TypeVar("T")

#: environment variables read by this module (documented above and in the README)
PROJECT_ENVS = ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT")
LOCATION_ENV = "CLOUDSDK_BATCH_LOCATION"
BATCH_ENDPOINT_ENV = "CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH"
LOGGING_ENDPOINT_ENV = "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING"
DEFAULT_LOCATION = "us-central1"

#: how to give the project (one line's end)
SET_PROJECT = (
    "set the run option project=PROJECT (-cfg project=PROJECT), or GOOGLE_CLOUD_PROJECT, or run "
    "`gcloud config set project PROJECT`"
)
_SET_CREDENTIALS = (
    "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service-account key file"
)


def endpoint_from_env(var: str) -> Optional[str]:
    """The endpoint named by environment variable ``var`` as the client libraries take it
    (``scheme://host[:port]``), or None where ``var`` is unset or empty."""
    value = os.environ.get(var, "").strip()
    if not value:
        return None
    value = re.sub(r"/(v\d+[a-z0-9]*/?)?$", "", value.rstrip("/") + "/")
    return value if "://" in value else f"https://{value}"


def is_insecure(endpoint: Optional[str]) -> bool:
    """True for a plain-HTTP endpoint (a local server): no credentials are sent there."""
    return bool(endpoint) and endpoint.startswith("http://")  # type: ignore[union-attr]


def default_location() -> str:
    """``$CLOUDSDK_BATCH_LOCATION``, else ``us-central1``."""
    return os.environ.get(LOCATION_ENV, "").strip() or DEFAULT_LOCATION


def credentials_and_project(endpoint: Optional[str]) -> Tuple[Any, Optional[str]]:
    """``(credentials, project of the credentials or None)`` for a client of ``endpoint``.

    Raises:
        SchedulerError: no application default credentials are found (the message says
            what to run or set).
    """
    if is_insecure(endpoint):
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials(), None
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        creds, project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError:
        raise SchedulerError(f"gcp_batch: no Google Cloud credentials found: {_SET_CREDENTIALS}") from None
    return creds, project


def resolve_project(cfg_project: Optional[str], creds_project: Optional[str] = None) -> str:
    """The project: ``cfg_project``, the environment, or the credentials' project.

    Raises:
        SchedulerError: none is set (the message says what to set).
    """
    if cfg_project:
        return cfg_project
    for var in PROJECT_ENVS:
        value = os.environ.get(var, "").strip()
        if value:
            return value
    if creds_project:
        return creds_project
    raise SchedulerError(f"gcp_batch: no Google Cloud project: {SET_PROJECT}")


def env_project() -> Optional[str]:
    """The project named by the environment only (no credential lookup), or None."""
    for var in PROJECT_ENVS:
        value = os.environ.get(var, "").strip()
        if value:
            return value
    return None


def api_error(e: BaseException, what: str) -> SchedulerError:
    """A one-line :class:`SchedulerError` for a Google API error ``e`` raised while doing
    ``what`` (e.g. ``"create job projects/p/locations/l/jobs/j"``), saying what to do.

    Handles ``google.api_core.exceptions`` by HTTP status, as the REST transport raises
    them (403 Forbidden / PermissionDenied, 401 Unauthorized / Unauthenticated, 429
    TooManyRequests / ResourceExhausted, 404 NotFound, 400 BadRequest / InvalidArgument /
    FailedPrecondition), credential errors and transport errors (connection refused)."""
    from google.api_core import exceptions as gex
    from google.auth import exceptions as gauth

    msg = _first_line(getattr(e, "message", None) or str(e))
    msg = re.sub(r"^(GET|POST|PUT|PATCH|DELETE) \S+: ", "", msg)  # the REST transport's "METHOD URL: "
    if isinstance(e, gex.Forbidden):
        hint = (
            "check the project and that your account has the Batch Job Editor role "
            "(roles/batch.jobsEditor) and Logs Viewer for logs; " + SET_PROJECT
        )
        return SchedulerError(f"gcp_batch: permission denied to {what}: {msg} ({hint})")
    if isinstance(e, (gex.Unauthorized, gauth.GoogleAuthError)):
        return SchedulerError(f"gcp_batch: not authenticated to {what}: {msg} ({_SET_CREDENTIALS})")
    if isinstance(e, gex.TooManyRequests):
        return SchedulerError(
            f"gcp_batch: quota exceeded to {what}: {msg} (request a higher quota at "
            "https://console.cloud.google.com/iam-admin/quotas, or use another location= or fewer resources)"
        )
    if isinstance(e, gex.NotFound):
        return SchedulerError(f"gcp_batch: not found: {what}: {msg} (check project= and location=)")
    if isinstance(e, gex.BadRequest):
        return SchedulerError(f"gcp_batch: Batch rejected the request to {what}: {msg}")
    if isinstance(e, gex.GoogleAPICallError):
        return SchedulerError(f"gcp_batch: {what} failed: {type(e).__name__}: {msg}")
    endpoint = os.environ.get(BATCH_ENDPOINT_ENV)
    where = f" (endpoint from {BATCH_ENDPOINT_ENV}={endpoint})" if endpoint else ""
    return SchedulerError(f"gcp_batch: cannot reach Google Cloud to {what}{where}: {type(e).__name__}: {msg}")


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0][:500] if lines else ""


def make_batch_client() -> Tuple[Any, Optional[str]]:
    """A ``google.cloud.batch_v1.BatchServiceClient`` (over REST) for the Batch endpoint of
    ``$CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH`` (else Google's), and the project of its
    credentials (None when they name none)."""
    from google.api_core.client_options import ClientOptions
    from google.cloud import batch_v1

    endpoint = endpoint_from_env(BATCH_ENDPOINT_ENV)
    creds, project = credentials_and_project(endpoint)
    opts = ClientOptions(api_endpoint=endpoint) if endpoint else None
    return batch_v1.BatchServiceClient(credentials=creds, transport="rest", client_options=opts), project


def make_logging_client(project: str) -> Any:
    """A ``google.cloud.logging.Client`` of ``project`` (over HTTP) for the endpoint of
    ``$CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING`` (else Google's)."""
    from google.cloud import logging as gcl

    endpoint = endpoint_from_env(LOGGING_ENDPOINT_ENV)
    creds, _ = credentials_and_project(endpoint)
    opts = {"api_endpoint": endpoint} if endpoint else None
    return gcl.Client(project=project, credentials=creds, client_options=opts, _use_grpc=False)


def call(what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, with a Google API, auth, network or OS error turned into a
    one-line :class:`SchedulerError` that says what was being done (``what``).

    Raises:
        SchedulerError: the call failed so.
    """
    from google.api_core import exceptions as gex
    from google.auth import exceptions as gauth

    try:
        return fn(*args, **kwargs)
    except (gex.GoogleAPIError, gauth.GoogleAuthError, OSError) as e:
        raise api_error(e, what) from None
    except Exception as e:  # requests' ConnectionError and friends
        if type(e).__module__.startswith(("requests", "urllib3")):
            raise api_error(e, what) from None
        raise


def job_message(fields: Dict[str, Any]) -> Any:
    """The ``google.cloud.batch_v1.Job`` message of ``fields`` (a dict in the message's shape,
    as :func:`tx_scheduler_gcp_batch.request.build_job` builds it).

    Built by the protobuf runtime's own message class, which takes nested dicts, lists and
    enum names as proto-plus does, about 3 times as fast (a sweep makes one per trial), and
    wrapped as the proto-plus ``Job``; by proto-plus where the runtime refuses a field
    (a name proto-plus spells otherwise)."""
    from google.cloud import batch_v1

    try:
        return batch_v1.Job.wrap(batch_v1.Job.pb()(**fields))
    except (TypeError, ValueError, KeyError):
        return batch_v1.Job(fields)


def translate(e: BaseException, what: str) -> BaseException:
    """``e`` as the exception to raise: a Google API, auth, network or OS error during
    ``what`` becomes a one-line :class:`SchedulerError` (:func:`api_error`); a
    :class:`SchedulerError` and anything else are returned as they are."""
    from google.api_core import exceptions as gex
    from google.auth import exceptions as gauth

    if isinstance(e, (gex.GoogleAPIError, gauth.GoogleAuthError, OSError, SchedulerError)) or type(
        e
    ).__module__.startswith(("requests", "urllib3")):
        return e if isinstance(e, SchedulerError) else api_error(e, what)
    return e
