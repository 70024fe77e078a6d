"""flows.tune_storage: where a stage's Tune experiments live (no Ray, no S3 server needed).

Local (``APPROXINFER_TUNE_STORAGE`` unset) is the stage's folder, as before; bad values of the
variable or of the endpoint are errors naming the variable; an unreachable endpoint is an error
naming both. The S3 side against a real server: ``tests/integration/test_s3.py``.
"""
from __future__ import annotations

import pytest

from components.config import ConfigError
from flows.tune_storage import ENV, LocalTuneStorage, S3TuneStorage, parse_uri, tune_storage
from tests.integration.conftest import free_port


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for var in (ENV, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    return monkeypatch


@pytest.mark.parametrize("value", [None, ""])
def test_unset_is_the_stages_local_folder_with_its_local_marker(clean_env, tmp_path, value):
    if value is not None:
        clean_env.setenv(ENV, value)
    folder = tmp_path / ".ray_results" / "train@pos"
    store = tune_storage(folder)
    assert type(store) is LocalTuneStorage and store.filesystem is None
    assert store.storage_path == str(folder.resolve())
    assert store.experiment("train-pos") == store.describe("train-pos") == str(folder.resolve() / "train-pos")
    assert not store.exists("train-pos") and not store.marked("train-pos", "abc")
    store.mark("train-pos", "abc")                       # the same file and bytes as before the change
    assert (folder / "train-pos.fingerprint").read_text() == "abc"
    assert store.marked("train-pos", "abc") and not store.marked("train-pos", "abd")
    (folder / "train-pos" / "t").mkdir(parents=True)
    assert store.exists("train-pos")
    store.localize("train-pos")
    assert store.local_path("train-pos", "/x/y") == "/x/y"
    store.remove("train-pos")
    assert not (folder / "train-pos").exists() and (folder / "train-pos.fingerprint").exists()


@pytest.mark.parametrize("uri", ["bucket/prefix", "s3:/bucket", "s3://", "gs://bucket/x", "s3://key:secret@bucket/x",
                                 "s3://bucket/x?endpoint_override=h", "s3://bucket/a//b", "/tmp/ray"])
def test_a_malformed_uri_is_an_error_naming_the_variable(clean_env, tmp_path, uri):
    clean_env.setenv(ENV, uri)
    with pytest.raises(ConfigError, match=rf"{ENV}=.*expected s3://BUCKET\[/PREFIX\]|{ENV}=.*empty path segment"):
        tune_storage(tmp_path / "s")


def test_parse_uri():
    assert parse_uri("s3://bucket") == ("bucket", "")
    assert parse_uri("s3://bucket/a/b/") == ("bucket", "a/b")


@pytest.mark.parametrize("var", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
@pytest.mark.parametrize("endpoint", ["127.0.0.1:9000", "ftp://h:1", "http://", "http://h:1/path"])
def test_a_malformed_endpoint_is_an_error_naming_its_variable(clean_env, tmp_path, var, endpoint):
    clean_env.setenv(ENV, "s3://bucket/prefix")
    clean_env.setenv(var, endpoint)
    with pytest.raises(ConfigError, match=rf"{var}=.*expected the S3 endpoint's URL.*{ENV}"):
        tune_storage(tmp_path / "s")


def test_an_unreachable_endpoint_is_an_error_naming_both(clean_env, tmp_path):
    clean_env.setenv(ENV, "s3://bucket/prefix")
    clean_env.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")     # nothing listens there
    clean_env.setenv("AWS_ACCESS_KEY_ID", "k")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "s")
    clean_env.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(ConfigError, match=rf"{ENV}='s3://bucket/prefix', endpoint http://127.0.0.1:\d+: "
                                          r"cannot reach the bucket"):
        tune_storage(tmp_path / "s")


def test_s3_paths_markers_and_local_copies(tmp_path):
    """The S3 layout without a server: <uri>/<stage>/<sweep>; the marker is local and names the URI."""
    folder = tmp_path / ".ray_results" / "train@pos"
    store = S3TuneStorage(folder, "s3://bucket/pre/", filesystem=object(), fs_root="bucket/pre")
    assert store.storage_path == "bucket/pre/train@pos"
    assert store.experiment("sw") == "bucket/pre/train@pos/sw"
    assert store.describe("sw") == "s3://bucket/pre/train@pos/sw"
    store.mark("sw", "abc")
    assert store.marked("sw", "abc") and not store.marked("sw", "abd")
    # a marker of the same sweep in the local folder (another storage) does not match
    assert not LocalTuneStorage(folder).marked("sw", "abc")
    LocalTuneStorage(folder).mark("sw", "abc")
    assert not store.marked("sw", "abc")
    assert store.local_path("sw", "bucket/pre/train@pos/sw/t_1/checkpoint_000001") == str(
        folder.resolve() / "sw" / "t_1" / "checkpoint_000001")
    assert store.local_path("sw", "bucket/pre/train@pos/sw2/t") == "bucket/pre/train@pos/sw2/t"
    assert store.local_path("sw", None) is None
