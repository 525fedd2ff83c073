"""The job's ``working_dir``, packaged once and uploaded under the URI of what was packaged.

Ray's Job Submission SDK hashes a local ``working_dir`` twice: once for the URI it writes
into the job's runtime env, and again inside its upload (``upload_working_dir_if_needed``,
then ``SubmissionClient._upload_package_if_needed``). A file that changes between the two
(a trial's output written into the directory, tx's own state under it) gives two hashes: the
package is uploaded under the second, the job names the first, and its runtime env fails
with "Failed to download runtime_env file package gcs://_ray_pkg_<hash>.zip" before the job
runs. Seen in a full test run: a sweep's trial named ``_ray_pkg_c928...`` while the client
had checked and uploaded ``_ray_pkg_65b4...`` a moment before (the dashboard's access log).

Here the directory is zipped once (Ray's ``create_package``, with the same ignore files and
excludes as the SDK), the URI is the hash of that zip (``get_uri_for_package``), and that
zip is what is uploaded (unless the head has it already): the URI and the bytes always match.
A ``gcs://`` zip is unpacked as it is, without stripping a top directory
(``download_and_unpack_package``), as a package made from the directory is. Ray's packaging
API: https://docs.ray.io/en/latest/ray-core/handling-dependencies.html#api-reference
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Dict


def upload_working_dir(client: Any, runtime_env: Dict[str, Any]) -> Dict[str, Any]:
    """``runtime_env`` with its local ``working_dir`` (a directory) replaced by the
    ``gcs://_ray_pkg_<hash>.zip`` URI of one zip of it, uploaded through ``client`` (a
    ``JobSubmissionClient``) unless the head has that URI already; ``runtime_env`` itself
    (unchanged) where ``working_dir`` is absent or already a URI, or where this Ray lacks the
    packaging functions (before 2.x's ``get_runtime_env_default_excludes``: the SDK then
    uploads it, with the race above).

    Raises:
        OSError: the directory cannot be read or the zip written.
        RuntimeError: the dashboard refused the upload (the SDK's error).
    """
    working_dir = runtime_env.get("working_dir")
    if not working_dir or "://" in str(working_dir) or not os.path.isdir(str(working_dir)):
        return runtime_env
    try:
        from ray._private import ray_constants
        from ray._private.runtime_env.packaging import create_package, get_uri_for_package

        default_excludes = ray_constants.get_runtime_env_default_excludes()
    except (ImportError, AttributeError):
        return runtime_env
    if not (hasattr(client, "_package_exists") and hasattr(client, "_upload_package")):
        return runtime_env
    # as the SDK decides (dashboard_sdk.SubmissionClient._upload_working_dir_if_needed)
    include_gitignore = os.environ.get(getattr(ray_constants, "RAY_RUNTIME_ENV_IGNORE_GITIGNORE",
                                               "RAY_RUNTIME_ENV_IGNORE_GITIGNORE"), "0") != "1"
    excludes = list(default_excludes) + list(runtime_env.get("excludes") or [])
    with tempfile.TemporaryDirectory(prefix="tx-ray-pkg-") as tmp:
        package = Path(tmp) / "working_dir.zip"
        create_package(str(working_dir), package, include_gitignore=include_gitignore, include_parent_dir=False,
                       excludes=excludes)
        uri = get_uri_for_package(package)
        if not client._package_exists(uri):  # (the dashboard pins the URI for 10 min as it answers)
            client._upload_package(uri, str(package), include_gitignore=include_gitignore, is_file=True)
    return {**runtime_env, "working_dir": uri}
