"""Where Ray Tune keeps a stage's sweeps: the local ``.ray_results/<stage>`` folder, or object storage.

By default (``APPROXINFER_TUNE_STORAGE`` unset) a sweep's Tune experiment is ``<storage>/<sweep>``,
``storage`` being the stage's local folder ``.ray_results/<stage>`` (:func:`flows.lifecycle.ray_storage`),
with its settings' fingerprint in ``<storage>/<sweep>.fingerprint``.

``APPROXINFER_TUNE_STORAGE=s3://bucket[/prefix]`` puts the experiment (trial results, checkpoints,
Tune's experiment state) at ``s3://bucket/prefix/<stage>/<sweep>`` instead, ``<stage>`` being the name
of the stage's local folder (e.g. ``train@pos``), so every node of a cluster reads and writes the same
trial checkpoints without a shared file system. The S3 client is ``pyarrow.fs.S3FileSystem``:
endpoint from ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (an S3-compatible server: MinIO, Ceph,
moto; unset: AWS), region from ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, credentials from AWS's usual
chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, ``~/.aws``, an instance role) — never from
the repository. Ray's trial workers build their own client from their environment.

The fingerprint marker stays local (``<storage>/<sweep>.fingerprint``, holding the fingerprint and the
experiment's URI), so a remote experiment follows the stage's local lifecycle: a stage that finished
removes ``.ray_results/<stage>`` (``flows.stages.common``), and so its marker, and ``make clean-runs``
discards abandoned ones; the next run of that sweep then finds the remote experiment without a
matching marker and removes it rather than resuming it — exactly as a local folder would be. A marker
in the bucket would outlive those and make a finished stage's sweeps resumable forever (a forced
re-run would silently reuse old trials). After ``fit``, the experiment's files are copied to
``<storage>/<sweep>`` so that callers read the trials' checkpoints as local folders, as before.

Only :mod:`flows` imports this module (it is used by :mod:`flows.sweeps`).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from components.config import ConfigError

ENV = "APPROXINFER_TUNE_STORAGE"
ENDPOINT_ENVS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


class LocalTuneStorage:
    """A stage's sweeps in its local folder (the default): ``<folder>/<sweep>``."""

    filesystem = None                # Ray resolves a local path itself

    def __init__(self, folder: str | Path):
        self.root = Path(folder).resolve()

    @property
    def storage_path(self) -> str:
        return str(self.root)

    def experiment(self, name: str) -> str:
        return str(self.root / name)

    describe = experiment

    def _stamp(self, name: str) -> Path:
        return self.root / f"{name}.fingerprint"

    def exists(self, name: str) -> bool:
        return (self.root / name).exists()

    def marked(self, name: str, fingerprint: str) -> bool:
        stamp = self._stamp(name)
        return stamp.exists() and stamp.read_text() == fingerprint

    def mark(self, name: str, fingerprint: str) -> None:
        self._write_stamp(name, fingerprint)

    def _write_stamp(self, name: str, text: str) -> None:
        stamp = self._stamp(name)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamp.with_name(stamp.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, stamp)

    def remove(self, name: str) -> None:
        shutil.rmtree(self.root / name)

    def localize(self, name: str) -> None:
        """Nothing to do: the experiment is local."""

    def local_path(self, name: str, path: str | None) -> str | None:
        return path


class S3TuneStorage(LocalTuneStorage):
    """A stage's sweeps at ``<uri>/<stage>/<sweep>`` in S3; markers and the post-fit copy stay in the
    stage's local folder."""

    def __init__(self, folder: str | Path, uri: str, filesystem: Any, fs_root: str):
        super().__init__(folder)
        self.uri = uri.rstrip("/")                      # s3://bucket/prefix
        self.filesystem = filesystem                    # pyarrow.fs.S3FileSystem
        self.fs_root = f"{fs_root}/{self.root.name}"    # bucket/prefix/<stage>

    @property
    def storage_path(self) -> str:
        return self.fs_root

    def experiment(self, name: str) -> str:
        return f"{self.fs_root}/{name}"

    def describe(self, name: str) -> str:
        return f"{self.uri}/{self.root.name}/{name}"

    def exists(self, name: str) -> bool:
        from pyarrow.fs import FileType
        return self.filesystem.get_file_info(self.experiment(name)).type != FileType.NotFound

    def _marker(self, fingerprint: str) -> str:
        return json.dumps({"fingerprint": fingerprint, "experiment": self.uri}, sort_keys=True)

    def marked(self, name: str, fingerprint: str) -> bool:
        stamp = self._stamp(name)
        return stamp.exists() and stamp.read_text() == self._marker(fingerprint)

    def mark(self, name: str, fingerprint: str) -> None:
        self._write_stamp(name, self._marker(fingerprint))

    def remove(self, name: str) -> None:
        self.filesystem.delete_dir(self.experiment(name))

    def localize(self, name: str) -> None:
        """Copy the experiment's files (trial results, checkpoints) to ``<folder>/<sweep>``."""
        from pyarrow.fs import LocalFileSystem, copy_files
        local = self.root / name
        shutil.rmtree(local, ignore_errors=True)
        local.mkdir(parents=True)
        copy_files(self.experiment(name), str(local), source_filesystem=self.filesystem,
                   destination_filesystem=LocalFileSystem(), use_threads=True)

    def local_path(self, name: str, path: str | None) -> str | None:
        """A path in the experiment (``bucket/prefix/<stage>/<sweep>/...``) -> its local copy."""
        exp = self.experiment(name)
        if path is None or not (path == exp or path.startswith(exp + "/")):
            return path
        return str(self.root / name / path[len(exp):].lstrip("/"))


def _endpoint() -> str | None:
    for var in ENDPOINT_ENVS:
        value = os.environ.get(var)
        if value is None:
            continue
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise ConfigError(f"{var}={value!r}: expected the S3 endpoint's URL, http(s)://HOST[:PORT] "
                              f"(used with {ENV})")
        return value.rstrip("/")
    return None


def parse_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket[/prefix]`` -> (bucket, prefix); a clear error naming ``APPROXINFER_TUNE_STORAGE`` else."""
    parts = urlsplit(uri)
    bucket, prefix = parts.netloc, parts.path.strip("/")
    if parts.scheme != "s3" or not bucket or parts.query or parts.fragment or "@" in bucket or ":" in bucket:
        raise ConfigError(f"{ENV}={uri!r}: expected s3://BUCKET[/PREFIX] (unset it for the local "
                          f".ray_results/<stage> folders)")
    if "//" in prefix:
        raise ConfigError(f"{ENV}={uri!r}: empty path segment in the prefix")
    return bucket, prefix


def s3_filesystem(uri: str) -> tuple[Any, str]:
    """The S3 client for ``uri`` (see the module docstring), checked: the bucket must exist and be
    reachable. -> (filesystem, ``bucket[/prefix]``)."""
    from pyarrow import fs as pafs
    bucket, prefix = parse_uri(uri)
    endpoint = _endpoint()
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    kwargs: dict[str, Any] = {"connect_timeout": 10, "request_timeout": 60,
                              "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3)}
    if endpoint:
        kwargs["endpoint_override"] = endpoint
    if region:
        kwargs["region"] = region
    where = f"{ENV}={uri!r}, endpoint {endpoint or 'AWS (set AWS_ENDPOINT_URL for an S3-compatible server)'}"
    try:
        filesystem = pafs.S3FileSystem(**kwargs)
        info = filesystem.get_file_info(bucket)
    except OSError as e:
        raise ConfigError(f"{where}: cannot reach the bucket: {e}") from e
    if info.type == pafs.FileType.NotFound:
        raise ConfigError(f"{where}: bucket {bucket!r} does not exist")
    return filesystem, f"{bucket}/{prefix}" if prefix else bucket


def tune_storage(folder: str | Path) -> LocalTuneStorage:
    """Where the sweeps of the stage whose local Ray folder is ``folder`` keep their Tune experiments:
    ``folder`` itself, or the stage's place under ``APPROXINFER_TUNE_STORAGE`` when that is set."""
    uri = os.environ.get(ENV)
    if uri is None or uri == "":
        return LocalTuneStorage(folder)
    filesystem, fs_root = s3_filesystem(uri)
    return S3TuneStorage(folder, uri, filesystem, fs_root)
