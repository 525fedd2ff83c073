"""The AppDef annotation of an app's top object: kept whole, compressed past its limit, left
out (and said so by describe) past that."""
import os

from tx.specs import AppDef, Role
from tx.specs.files import appdef_from_stored, read_stored_appdef
from tx_scheduler_k8s import _pod


def _app(arg: str) -> AppDef:
    return AppDef("big", roles=[Role("r", image="i", entrypoint="echo", args=[arg])])


def test_annotation_is_the_appdef_compressed_past_its_limit_and_left_out_past_that() -> None:
    small = _app("x")
    assert appdef_from_stored(_pod.app_annotations(small)[_pod.ANNOTATION_APPDEF]) == small
    repetitive = _app("x" * (_pod.APPDEF_LIMIT + 1))  # compresses well
    stored = _pod.app_annotations(repetitive)[_pod.ANNOTATION_APPDEF]
    assert '"zlib"' in stored and len(stored) <= _pod.APPDEF_LIMIT and appdef_from_stored(stored) == repetitive
    random = _app(os.urandom(_pod.APPDEF_LIMIT).hex())  # does not
    ann = _pod.app_annotations(random)
    assert _pod.ANNOTATION_APPDEF not in ann and ann[_pod.ANNOTATION_APP] == "big"
    app, why = read_stored_appdef(ann.get(_pod.ANNOTATION_APPDEF), f"annotation {_pod.ANNOTATION_APPDEF}",
                                  _pod.APPDEF_LIMIT)
    assert app is None and why.startswith(
        f"no copy of the AppDef in annotation tx.pytorch.org/appdef (compressed, it exceeds the {_pod.APPDEF_LIMIT}"
        " bytes that holds"), why
