"""The recordings' framing: a ``<attempt>.calls.jsonl.gz`` file is a sequence of gzip members,
one JSON record (and its newline) per member, appended as calls finish.

This module owns the bytes around the records: making a member, appending it so the file never
ends in a member this process tore, finding where the whole members end (a run killed mid-write
leaves a torn last member) and cutting such a tail off, and reading the records' lines back with
a torn tail or a foreign byte run reported, never raised. What a record says is not its concern.
"""

from __future__ import annotations

import contextlib
import errno
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

GZIP_WBITS = 31  # zlib's gzip framing
_CHUNK = 1 << 16  # fed to the decompressor at a time: keeps each member's leftover small


def gzip_member(line: str) -> bytes:
    """One record's line as one gzip member. This runs for every call: level 1 (text
    compresses nearly as well as at the default), and a window and hash table no larger
    than the record needs (setting up zlib's full-size ones costs more than compressing a
    small record)."""
    data = line.encode("utf-8", "surrogatepass")
    window_bits = min(15, max(9, len(data).bit_length()))
    deflate = zlib.compressobj(1, zlib.DEFLATED, 16 + window_bits, max(2, window_bits - 6))
    return deflate.compress(data) + deflate.flush()


def append_member(fd: int, member: bytes, start: int) -> None:
    """One write per record on an O_APPEND fd; a write that fails or lands only in part is cut
    off again (the file never ends in a member this process tore)."""
    try:
        written = os.write(fd, member)
        if written != len(member):
            raise OSError(errno.ENOSPC, f"short write: {written} of {len(member)} bytes")
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise


def whole_members_end(data: bytes) -> int:
    """Where the last whole gzip member of ``data`` ends (a torn tail starts there)."""
    view = memoryview(data)
    end = 0
    while end < len(data):
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        at = end
        try:
            while not inflate.eof and at < len(data):
                piece = view[at : at + 65536]
                inflate.decompress(piece)
                at += len(piece)
        except zlib.error:
            break
        if not inflate.eof:
            break
        end = at - len(inflate.unused_data)
    return end


def cut_torn_tail(fd: int, path: Path, size: int) -> int:
    """A file left by an earlier process may end in a torn member (it was killed while
    writing): cut it off, so the records appended after it stay readable. Returns the size
    the file has now."""
    if size == 0:
        return 0
    with open(path, "rb") as fh:
        end = whole_members_end(fh.read())
    if end < size:
        os.ftruncate(fd, end)
    return end


def record_lines(path: Path, problems: list[str]) -> Iterator[tuple[int, bytes]]:
    """(record number, line) of each non-blank line of each whole gzip member; a torn last
    member or bytes that are not gzip end the reading with a line in ``problems``."""
    data = path.read_bytes()
    view = memoryview(data)
    position, number = 0, 0
    while position < len(data):
        start = position
        member = zlib.decompressobj(wbits=GZIP_WBITS)
        parts = []
        try:
            while not member.eof and position < len(data):
                chunk = view[position : position + _CHUNK]
                parts.append(member.decompress(chunk))
                position += len(chunk)
        except zlib.error as exc:
            problems.append(
                f"bytes {start:,}-{len(data):,}: not a gzip member ({exc}); "
                f"the {len(data) - start:,} bytes from there are skipped"
            )
            return
        if not member.eof:
            problems.append(
                f"record {number + 1}: torn last gzip member ({len(data) - start:,} bytes from "
                f"byte {start:,}, cut short: the writer was stopped mid-record); skipped"
            )
            return
        position -= len(member.unused_data)
        for line in b"".join(parts).split(b"\n"):
            if line.strip():
                number += 1
                yield number, line
