"""boto3 clients for Batch and CloudWatch Logs, configured as AWS users configure them, and
AWS errors turned into one-line :class:`tx.schedulers.SchedulerError` messages.

Location and credentials come from boto3's own chain, so a fresh process finds the same
backend: ``AWS_PROFILE``, ``AWS_DEFAULT_REGION``/``AWS_REGION`` (or the profile's region),
the credentials chain, and the endpoint variables ``AWS_ENDPOINT_URL`` (every service),
``AWS_ENDPOINT_URL_BATCH`` and ``AWS_ENDPOINT_URL_CLOUDWATCH_LOGS`` (one service; for logs
``AWS_ENDPOINT_URL_LOGS`` is accepted too), as documented in
https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html. Every request to Batch
(each page, each retry) first takes a token of the host's call budget
(:mod:`tx.schedulers.budget`: ``.txconfig`` ``[aws_batch] max_calls_per_minute``, default
:data:`DEFAULT_CALLS_PER_MINUTE`, shared by the tx processes of the host). Retries use
botocore's ``standard`` mode (throttling and transient errors retried with backoff);
``AWS_MAX_ATTEMPTS`` / ``AWS_RETRY_MODE`` override it as for any AWS SDK
(https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html).
"""
from __future__ import annotations

import os
import re
from typing import Any, Callable, Optional, TypeVar

from tx.schedulers import SchedulerError, ThrottledError, budget_for

T = TypeVar("T")

#: attempts per call (first try included) unless AWS_MAX_ATTEMPTS says otherwise
DEFAULT_MAX_ATTEMPTS = 5

_CREDENTIALS_EXPIRED = {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"}
_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}
_BAD_CREDENTIALS = {
    "UnrecognizedClientException", "InvalidClientTokenId", "InvalidSignatureException",
    "SignatureDoesNotMatch", "IncompleteSignature", "MissingAuthenticationToken",
}
_THROTTLED = {
    "Throttling", "ThrottlingException", "ThrottledException", "TooManyRequestsException",
    "RequestLimitExceeded", "ProvisionedThroughputExceededException", "SlowDown",
}


class AwsClients:
    """Lazily created ``batch`` and ``logs`` clients of one boto3 session.

    Args:
        region: overrides the region of the environment or profile.
        endpoint_url: overrides the endpoint (default: boto3's ``AWS_ENDPOINT_URL*``).

    Raises (on first use):
        SchedulerError: no region is configured, or boto3 is missing.
    """

    def __init__(self, region: Optional[str] = None, endpoint_url: Optional[str] = None) -> None:
        self._region = region
        self._endpoint = endpoint_url
        self._batch: Any = None
        self._logs: Any = None
        self._session: Any = None

    def _make(self, service: str) -> Any:
        try:
            import boto3
            from botocore.config import Config
            from botocore.exceptions import BotoCoreError, NoRegionError
        except ImportError:
            raise SchedulerError("aws_batch needs boto3: pip install tx-scheduler-aws-batch") from None
        if self._session is None:
            self._session = boto3.session.Session(region_name=self._region)
        retries: dict = {"mode": os.environ.get("AWS_RETRY_MODE") or "standard"}
        if not os.environ.get("AWS_MAX_ATTEMPTS"):
            retries["total_max_attempts"] = DEFAULT_MAX_ATTEMPTS
        config = Config(retries=retries, user_agent_extra="tx-scheduler-aws-batch")
        kwargs: dict = {"config": config}
        endpoint = self._endpoint
        if not endpoint and service == "logs" and not os.environ.get("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS"):
            # the SDKs' name is AWS_ENDPOINT_URL_CLOUDWATCH_LOGS (from the service id
            # "CloudWatch Logs"); AWS_ENDPOINT_URL_LOGS, the client's name, is accepted too
            endpoint = os.environ.get("AWS_ENDPOINT_URL_LOGS") or None
        if endpoint:
            kwargs["endpoint_url"] = endpoint
        try:
            client = self._session.client(service, **kwargs)
        except NoRegionError:
            raise SchedulerError(
                "no AWS region configured: set AWS_DEFAULT_REGION (e.g. us-east-1) or a region in "
                "your AWS profile (aws configure)"
            ) from None
        except BotoCoreError as e:
            raise SchedulerError(f"cannot create the AWS {service} client: {e}") from None
        if service == "batch":
            budget = budget_for("aws_batch", account_key(), DEFAULT_CALLS_PER_MINUTE)
            # every HTTP request to Batch (each page, each of botocore's retries) takes a token

            def take_token(**_: Any) -> None:  # returning anything would stand for the response
                budget.acquire()

            client.meta.events.register("before-send.batch", take_token)
        return client

    @property
    def batch(self) -> Any:
        """The ``batch`` client (created on first use)."""
        if self._batch is None:
            self._batch = self._make("batch")
        return self._batch

    @property
    def logs(self) -> Any:
        """The CloudWatch Logs client (created on first use)."""
        if self._logs is None:
            self._logs = self._make("logs")
        return self._logs

    @property
    def region(self) -> str:
        """The region the clients use."""
        return str(self.batch.meta.region_name)


_XML_CODE = re.compile(r"<Code>([^<]+)</Code>")
_XML_MESSAGE = re.compile(r"<Message>([^<]*)</Message>")


def error_code(e: BaseException) -> str:
    """The AWS error code of a botocore ``ClientError`` (empty string otherwise). An error
    that came back as an XML document where botocore expected JSON (some front ends answer
    authentication errors so) has its ``<Code>`` read from the document."""
    resp = getattr(e, "response", None)
    if not isinstance(resp, dict):
        return ""
    code = str(resp.get("Error", {}).get("Code", ""))
    if code.isdigit():
        m = _XML_CODE.search(str(resp.get("Error", {}).get("Message", "")))
        if m:
            return m.group(1).strip()
    return code


def error_message(e: BaseException) -> str:
    """The AWS error message of ``e`` on one line."""
    resp = getattr(e, "response", None)
    if isinstance(resp, dict):
        msg = str(resp.get("Error", {}).get("Message", "")).strip()
        m = _XML_MESSAGE.search(msg)
        if m:
            msg = m.group(1).strip()
        if msg:
            return " ".join(msg.split())
    return " ".join(str(e).split())


def explain(e: BaseException, what: str) -> SchedulerError:
    """A one-line :class:`SchedulerError` for an AWS or botocore error raised while doing
    ``what`` (e.g. ``"submitting job x to queue q"``), saying what to do about it."""
    from botocore import exceptions as bx

    if isinstance(e, bx.NoCredentialsError):
        return SchedulerError(
            f"{what}: no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
        )
    if isinstance(e, bx.NoRegionError):
        return SchedulerError(f"{what}: no AWS region configured: set AWS_DEFAULT_REGION")
    if isinstance(e, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        return SchedulerError(f"{what}: cannot reach AWS ({e}); check AWS_ENDPOINT_URL and the network")
    if isinstance(e, bx.TokenRetrievalError) or type(e).__name__ in ("SSOTokenLoadError", "UnauthorizedSSOTokenError"):
        return SchedulerError(f"{what}: AWS SSO session expired or missing: run `aws sso login`")
    code = error_code(e)
    msg = error_message(e)
    if code in _CREDENTIALS_EXPIRED:
        return SchedulerError(
            f"{what}: AWS credentials expired ({code}): refresh them (aws sso login, or a new "
            "session token in AWS_SESSION_TOKEN)"
        )
    if code in _BAD_CREDENTIALS:
        return SchedulerError(f"{what}: AWS rejected the credentials ({code}: {msg}); check AWS_PROFILE / AWS_ACCESS_KEY_ID")
    if code in _DENIED:
        return SchedulerError(f"{what}: access denied ({code}: {msg}); grant the IAM identity that permission")
    if code in _THROTTLED:  # a busy backend, not a failed app
        return ThrottledError(
            f"{what}: AWS throttled the request ({code}) and botocore's retries ran out; the apps' "
            "states are unknown, not failed: try again later or raise AWS_MAX_ATTEMPTS"
        )
    if code:
        return SchedulerError(f"{what}: {code}: {msg}")
    return SchedulerError(f"{what}: {type(e).__name__}: {msg}")


#: AWS Batch's documented rate: SubmitJob takes 50 requests per second
#: (https://docs.aws.amazon.com/batch/latest/userguide/service_limits.html)
DEFAULT_CALLS_PER_MINUTE = 50 * 60


def account_key() -> str:
    """What names the AWS endpoint and account this process reaches (its call budget's key)."""
    return "|".join(os.environ.get(k, "") for k in (
        "AWS_ENDPOINT_URL_BATCH", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID"))


def call(what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` with AWS errors raised as :func:`explain` makes them."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return fn(*args, **kwargs)
    except (ClientError, BotoCoreError) as e:
        raise explain(e, what) from None
