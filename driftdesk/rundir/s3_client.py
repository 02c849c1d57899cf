"""``s3://`` through botocore's own client: the listing, whole objects, writes (a conditional
create for the lock object), deletes and heads, without s3fs, whose imports (aiobotocore,
aiohttp: ~0.35 s of CPU) were most of what an unchanged history cost a reader, and most of
what publishing added to a short run. Same chain of credentials and endpoint as s3fs's
(botocore's); anything else (ranged reads, ``exists``) goes through s3fs, made on first use.
The layout is ``driftdesk.rundir.store``'s; this module is only how its objects move.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from driftdesk.rundir.stored import Changed, StoredObject, StoreError


def _chain_settings() -> list[tuple[str, str]]:
    """What of the environment botocore's chain reads (a change makes another client)."""
    return [(k, v) for k, v in os.environ.items() if k.startswith("AWS_")]


@functools.cache
def _shared_client(settings: tuple[tuple[str, str], ...]) -> Any:
    """One botocore client per process and chain settings (~0.1 s to make; a ``push`` of 200
    runs made 200); botocore's clients are safe to share between threads."""
    import botocore.session
    from botocore.config import Config

    session = botocore.session.get_session()
    # times stay text: nothing here reads them, and parsing a listing's was a third of its CPU
    parsers = session.get_component("response_parser_factory")
    parsers.set_parser_defaults(timestamp_parser=str)
    return session.create_client("s3", config=Config(max_pool_connections=BotocoreS3.CONNECTIONS))


def plain_s3() -> bool:
    """Whether s3fs would be botocore's default client: s3fs and botocore are installed and
    no fsspec configuration gives s3fs settings of its own (then s3fs lists, as it reads)."""
    from importlib.util import find_spec

    if any(find_spec(name) is None for name in ("fsspec", "s3fs", "botocore")):
        return False  # ``store.filesystem`` says what to install
    # fsspec's configuration comes from FSSPEC_* variables and the files of its folder: when
    # there are none, it has nothing for s3fs (and fsspec's import, ~0.07 s, is spared)
    folder = os.environ.get("FSSPEC_CONFIG_DIR", os.path.expanduser("~/.config/fsspec"))
    if not any(k.startswith("FSSPEC_") for k in os.environ) and not os.path.isdir(folder):
        return True
    try:
        from fsspec.config import conf
    except ImportError:
        return False
    return not conf.get("s3") and not conf.get("s3a")


class BotocoreS3:
    """An ``s3://`` store listed (``list_objects``), read whole (``fetch_groups``,
    ``cat_file``), written (``pipe_file``), deleted from and asked about (``info``) by
    botocore, with fsspec's names and errors (``FileNotFoundError``, ``FileExistsError``,
    ``PermissionError``); any other use goes to s3fs's filesystem (``real``)."""

    CONNECTIONS = 32  # objects fetched at once

    def __init__(self, url: str, fallback: Callable[[str], Any]) -> None:
        self.url = url
        self._fallback = fallback  # ``store.filesystem``: s3fs, for what botocore does not do
        self._fs: Any = None
        self._s3: Any = None

    def real(self) -> Any:
        if self._fs is None:
            self._fs = self._fallback(self.url)
        return self._fs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)

    @staticmethod
    def _strip_protocol(url: str) -> str:
        return re.sub(r"^s3a?://", "", url).rstrip("/")

    def list_objects(self, root: str) -> dict[str, dict[str, Any]] | None:
        """Every object under ``root`` as ``fs.find(root, detail=True)`` gives it (path ->
        size, ETag), by ListObjectsV2; None when botocore could not list (s3fs lists then,
        and says why as it did)."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = root.partition("/")
        prefix = f"{key}/" if key else ""
        listed: dict[str, dict[str, Any]] = {}
        try:
            client, more = self._client(), dict[str, str]()
            while True:  # pages of 1,000 (the paginator's model is one more file to load)
                page = client.list_objects_v2(Bucket=bucket, Prefix=prefix, **more)
                for item in page.get("Contents", ()):
                    listed[f"{bucket}/{item['Key']}"] = {
                        "size": item["Size"],
                        "ETag": item["ETag"],
                        "type": "file",
                    }
                if not page.get("IsTruncated"):
                    break
                more = {"ContinuationToken": page["NextContinuationToken"]}
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchBucket", "404"):
                return {}
            if code in ("AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId"):
                raise StoreError(f"the store refused to list {root}: {code}") from None
            return None
        except BotoCoreError:
            return None
        return listed

    def _client(self) -> Any:
        if self._s3 is None:
            self._s3 = _shared_client(tuple(sorted(_chain_settings())))
        return self._s3

    def _call(self, operation: str, path: str, **params: Any) -> Any:
        """One S3 operation on the object at ``path`` (``bucket/key``), its errors as fsspec
        raises them."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = path.partition("/")
        try:
            return getattr(self._client(), operation)(Bucket=bucket, Key=key, **params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            if code in ("NoSuchKey", "404", "NoSuchBucket", "NotFound"):
                raise FileNotFoundError(path) from None
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                raise FileExistsError(path) from None
            if code in ("AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId"):
                raise PermissionError(f"{path}: {code}") from None
            raise StoreError(f"{path}: {code or exc}") from None
        except BotoCoreError as exc:
            raise StoreError(f"{path}: {exc}") from None

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite") -> None:
        """Write the object (``mode="create"``: only if absent, else ``FileExistsError``)."""
        condition = {"IfNoneMatch": "*"} if mode == "create" else {}
        self._call("put_object", path, Body=value, **condition)

    def cat_file(self, path: str) -> bytes:
        return bytes(self._call("get_object", path)["Body"].read())

    def rm_file(self, path: str) -> None:
        self._call("delete_object", path)

    def remove_many(self, paths: list[str]) -> None:
        """Delete objects a thousand a request (DeleteObjects); one not deleted is an error."""
        from botocore.exceptions import BotoCoreError, ClientError

        by_bucket: dict[str, list[str]] = {}
        for path in paths:
            bucket, _, key = path.partition("/")
            by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            for start in range(0, len(keys), 1000):
                batch = [{"Key": key} for key in keys[start : start + 1000]]
                try:
                    answer = self._client().delete_objects(
                        Bucket=bucket, Delete={"Objects": batch, "Quiet": True}
                    )
                except (BotoCoreError, ClientError) as exc:
                    raise StoreError(f"the store refused to delete in {bucket}: {exc}") from None
                failed = answer.get("Errors") or []
                if failed:
                    first = failed[0]
                    raise StoreError(
                        f"{bucket}/{first.get('Key')}: not deleted ({first.get('Code')}), "
                        f"and {len(failed) - 1} more"
                    )

    def info(self, path: str) -> dict[str, Any]:
        head = self._call("head_object", path)
        return {"name": path, "size": head["ContentLength"], "ETag": head["ETag"], "type": "file"}

    def invalidate_cache(self, path: str | None = None) -> None:
        """Nothing is cached here (every call asks the store)."""

    def fetch_object(self, stored: StoredObject) -> bytes:
        """The bytes of ``stored`` as listed (``Changed`` if it was replaced or deleted)."""
        try:
            data = self.cat_file(stored.path)
        except FileNotFoundError:
            raise Changed(stored.path) from None
        except PermissionError as exc:
            raise StoreError(f"the store refused to read {exc}") from None
        if len(data) != stored.size:
            raise Changed(stored.path)
        return data

    def fetch_groups(
        self,
        groups: Sequence[Sequence[StoredObject]],
        consume: Callable[[int, dict[str, bytes]], None],
    ) -> None:
        """``store.fetch_groups`` by botocore's client, ``CONNECTIONS`` groups at once, each
        consumed in the thread that fetched it."""
        from concurrent.futures import ThreadPoolExecutor

        self._client()  # made once, before the threads share it

        def fetch_and_consume(index: int) -> None:
            consume(index, {o.path: self.fetch_object(o) for o in groups[index]})

        if not groups:
            return
        pool = ThreadPoolExecutor(min(self.CONNECTIONS, len(groups)))
        try:
            for _ in pool.map(fetch_and_consume, range(len(groups))):
                pass  # the first error is raised here
        finally:
            pool.shutdown(cancel_futures=True)  # after an error, the groups not begun are not
