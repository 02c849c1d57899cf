"""inspect logs that must not be imported as they are: two samples of one (id, epoch), and
members that decompress past a bound (zip bombs). Real logs written by the installed
inspect_ai (mockllm, no model called), edited as a hostile or broken writer would, imported
through the real CLI; the import's memory is measured (the child's ru_maxrss)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from driftdesk.analysis.import_formats import ResultsImportError
from driftdesk.analysis.imports import import_results
from driftdesk.analysis.inspect_logs import DEFAULT_MAX_MEMBER_MB

pytestmark = pytest.mark.xdist_group("inspect-logs")

_MAKE_LOGS = """
import sys
from pathlib import Path
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, mean, scorer
from inspect_ai.solver import solver

@solver
def no_model():
    async def solve(state, generate):
        return state
    return solve

@scorer(metrics=[mean()])
def given_score():
    async def score(state, target):
        return Score(value=float(target.text))
    return score

root = Path(sys.argv[1])
task = lambda: Task(name="t", dataset=[Sample(id=f"s{i}", input="q", target=str(i % 2))
                                      for i in range(3)], solver=no_model(), scorer=given_score())
for fmt in ("eval", "json"):
    inspect_eval(task(), model="mockllm/model", log_dir=str(root / fmt), epochs=2,
                 log_format=fmt, display="none")
"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inspect-bounds")
    script = root / "make_logs.py"
    script.write_text(_MAKE_LOGS)
    done = subprocess.run(
        [sys.executable, str(script), str(root)], cwd=root, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def _eval_log(logs: Path) -> Path:
    (source,) = (logs / "eval").glob("*.eval")
    return source


def _zstd() -> int:
    import inspect_ai._util.zipfile  # noqa: F401  (zstd members in zipfile, as inspect writes)

    return zipfile.ZIP_ZSTANDARD  # type: ignore[attr-defined]


Member = bytes | Callable[[zipfile.ZipFile, zipfile.ZipInfo], None]


def rewrite_eval(source: Path, target: Path, members: dict[str, Member]) -> Path:
    """``source`` copied to ``target`` (zstd members, as inspect writes them) with ``members``
    replaced or added: bytes, or a writer of the member's content."""
    zstd = _zstd()
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        names = list(dict.fromkeys(old.namelist()))
        names += [name for name in members if name not in names]
        for name in names:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zstd
            content = members.get(name)
            if callable(content):
                content(new, info)
            else:
                new.writestr(info, content if content is not None else old.read(name))
    return target


def zeros(mib: int) -> Callable[[zipfile.ZipFile, zipfile.ZipInfo], None]:
    """A member of ``mib`` MiB of zeros (a few KB compressed), written a MiB at a time."""

    def write(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
        block = b"\0" * (1 << 20)
        with archive.open(info, "w") as stream:
            for _ in range(mib):
                stream.write(block)

    return write


def understate_sizes(path: Path, member: str, size: int) -> None:
    """Make the zip's headers say ``member`` decompresses to ``size`` bytes (a bomb whose
    headers lie): its central directory record and its local header."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    found = 0
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + name_length] == name:
            struct.pack_into("<I", data, at + 24, size)
            local = struct.unpack_from("<I", data, at + 42)[0]
            struct.pack_into("<I", data, local + 22, size)
            found += 1
        at = data.find(b"PK\x01\x02", at + 4)
    assert found == 1
    path.write_bytes(bytes(data))


# Linux carries a process's peak memory across exec: a child forked from this (large) test
# process would report this process's peak as its own. A small launcher forks the import and
# writes down the import's peak (os.wait4), in KiB.
_MEASURED = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def import_cli(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """The real ``driftdesk import`` in a child; with its peak resident memory in MiB."""
    peak = cwd / "peak-kib.txt"
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, str(peak), sys.executable, "-m", "driftdesk",
         "import", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300,
    )  # fmt: skip
    return done, int(peak.read_text()) // 1024


def nothing_written(out: Path) -> bool:
    return not out.exists() or not any(out.iterdir())


@pytest.fixture(scope="module")
def baseline_mib(logs: Path, tmp_path_factory: pytest.TempPathFactory) -> int:
    """The peak memory of importing the clean .eval log."""
    folder = tmp_path_factory.mktemp("baseline")
    done, peak = import_cli(str(_eval_log(logs)), "--out", str(folder / "runs"), cwd=folder)
    assert done.returncode == 0, done.stderr
    assert "imported 6 attempts of 3 tasks" in done.stdout
    return peak


# -- duplicates ---------------------------------------------------------------------------


def test_a_json_log_with_two_samples_of_one_id_and_epoch_is_refused(
    logs: Path, tmp_path: Path
) -> None:
    (source,) = (logs / "json").glob("*.json")
    document = json.loads(source.read_text())
    twin = json.loads(json.dumps(document["samples"][0]))
    (scorer,) = twin["scores"]
    twin["scores"][scorer]["value"] = 1.0 - float(twin["scores"][scorer]["value"])
    twin["uuid"] = "another-uuid"
    document["samples"].append(twin)  # 7 samples, two of (s0, epoch 1) with other scores
    hostile = tmp_path / "dup.json"
    hostile.write_text(json.dumps(document))
    out = tmp_path / "runs"
    done, _ = import_cli(str(hostile), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and "s0" in line and "epoch 1" in line and "twice" in line, line
    assert nothing_written(out)
    # A folder holding it is refused the same way.
    with pytest.raises(ResultsImportError, match="epoch 1"):
        import_results(tmp_path, out=out)
    assert nothing_written(out)


def test_an_eval_log_with_two_samples_of_one_id_and_epoch_is_refused(
    logs: Path, tmp_path: Path
) -> None:
    source = _eval_log(logs)
    with zipfile.ZipFile(source) as archive:
        _zstd()
        sample = json.loads(archive.read("samples/s0_epoch_1.json"))
        summaries = json.loads(archive.read("summaries.json"))
    (scorer,) = sample["scores"]
    sample["scores"][scorer]["value"] = 1.0 - float(sample["scores"][scorer]["value"])
    sample["uuid"] = "another-uuid"
    # Filed as sample "s9" (its summary says so), but the sample inside is s0 of epoch 1.
    summary = next(s for s in summaries if s["id"] == "s0" and s["epoch"] == 1)
    summaries.append({**summary, "id": "s9", "uuid": "another-uuid"})
    hostile = rewrite_eval(
        source,
        tmp_path / "dup.eval",
        {
            "samples/s9_epoch_1.json": json.dumps(sample).encode(),
            "summaries.json": json.dumps(summaries).encode(),
        },
    )
    out = tmp_path / "runs"
    done, _ = import_cli(str(hostile), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "s0" in done.stderr and "epoch 1" in done.stderr and "twice" in done.stderr
    assert nothing_written(out)


def test_an_eval_retry_that_redoes_a_sample_is_not_a_duplicate(logs: Path, tmp_path: Path) -> None:
    """The same (id, epoch) in two logs is a retry (the later log wins), not a duplicate."""
    folder = tmp_path / "logs"
    folder.mkdir()
    source = _eval_log(logs)
    (folder / source.name).write_bytes(source.read_bytes())
    (folder / ("z" + source.name)).write_bytes(source.read_bytes())
    result = import_results(folder, out=tmp_path / "runs")
    assert result.attempts == 6


# -- bombs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "mib", "bound", "lying"),
    [
        # the default bound, a bomb of zeros past it whose headers lie about its size
        ("samples/s1_epoch_1.json", DEFAULT_MAX_MEMBER_MB + 64, None, True),
        # a small bound, the header member, honest headers
        ("header.json", 48, 16, False),
        ("summaries.json", 48, 16, True),
    ],
    ids=["sample-default-bound-lying", "header-honest", "summaries-lying"],
)
def test_a_member_decompressing_past_the_bound_is_refused_naming_it(
    logs: Path, tmp_path: Path, baseline_mib: int, member: str, mib: int, bound: int | None,
    lying: bool,
) -> None:  # fmt: skip
    bomb = rewrite_eval(_eval_log(logs), tmp_path / "bomb.eval", {member: zeros(mib)})
    assert bomb.stat().st_size < 1 << 20  # megabytes of zeros in a small file
    if lying:
        understate_sizes(bomb, member, 1000)
    out = tmp_path / "runs"
    bound_args = [] if bound is None else ["--max-member-mb", str(bound)]
    done, peak = import_cli(str(bomb), "--out", str(out), *bound_args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip()
    assert "\n" not in line, line
    assert member in line and "--max-member-mb" in line, line
    assert f"{bound or DEFAULT_MAX_MEMBER_MB} MiB" in line, line
    assert nothing_written(out)
    # Memory stays near a clean import's, far below the bomb's size.
    assert peak < baseline_mib + 64, (peak, baseline_mib)


def test_a_deflated_bomb_member_is_refused_too(logs: Path, tmp_path: Path) -> None:
    """Older logs (and other zip writers) deflate their members: bounded the same way."""
    bomb = tmp_path / "deflated.eval"
    with zipfile.ZipFile(_eval_log(logs)) as old, zipfile.ZipFile(bomb, "w") as new:
        _zstd()
        for name in dict.fromkeys(old.namelist()):
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if name == "samples/s2_epoch_2.json":
                with new.open(info, "w") as stream:
                    for _ in range(24):
                        stream.write(b"\0" * (1 << 20))
            else:
                new.writestr(info, old.read(name))
    understate_sizes(bomb, "samples/s2_epoch_2.json", 10)
    with pytest.raises(ResultsImportError, match=r"samples/s2_epoch_2\.json"):
        import_results(bomb, out=tmp_path / "runs", max_member_mb=8)
    assert nothing_written(tmp_path / "runs")
    # Within a bound it holds, the same log is imported.
    clean = tmp_path / "clean.eval"
    clean.write_bytes(_eval_log(logs).read_bytes())
    assert import_results(clean, out=tmp_path / "runs", max_member_mb=8).attempts == 6


def test_a_bound_below_one_mib_is_refused(logs: Path, tmp_path: Path) -> None:
    done, _ = import_cli(
        str(_eval_log(logs)), "--out", str(tmp_path / "runs"), "--max-member-mb", "0",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--max-member-mb" in done.stderr
