"""``--executor ray`` before any cluster is involved: ray stays an optional import, and every
setting that cannot work is refused up front, saying what to do, with nothing written."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.ray_executor import parse_resources, task_options
from driftdesk.reruns.simulated_endpoint import SIM_MODEL

# `driftdesk` with ray made unimportable, as on an install without the extra.
WITHOUT_RAY = textwrap.dedent(
    """
    import sys
    sys.modules["ray"] = None  # import ray -> ImportError
    from driftdesk.cli.main import main
    sys.exit(main(sys.argv[1:]))
    """
)


def _driftdesk_without_ray(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_RAY, *args], capture_output=True, text=True, timeout=60
    )


def test_the_cli_parser_and_help_do_not_import_ray() -> None:
    code = textwrap.dedent(
        """
        import contextlib, io, sys
        from driftdesk.cli.main import build_parser
        parser = build_parser()
        for args in (["--help"], ["run", "--help"], ["resume", "--help"]):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                try:
                    parser.parse_args(args)
                except SystemExit:
                    pass
        assert "--executor" in out.getvalue()
        print("ray" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_probe_sees_ray_when_it_is_imported() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys, ray; print('ray' in sys.modules)"],
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "True"


def _profile(home: Any) -> None:
    ProfileStore().save(
        Profile(
            name="local",
            protocol="openai",
            base_url="http://127.0.0.1:9/v1",
            model=SIM_MODEL,
            no_key=True,
        )
    )


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ([], "pip install 'driftdesk[ray]'"),
        (["--ray-resources", "{CPU: 2}"], "--ray-resources is not JSON"),
        (["--ray-resources", '{"CPU": -1}'], "numbers >= 0"),
        (["--ray-address", "somewhere"], "use auto, ray://HOST:PORT or HOST:PORT"),
        # A client preset runs on Ray (the nodes are asked for the client once connected):
        # here only the missing extra stops it.
        (["--agent", "codex"], "pip install 'driftdesk[ray]'"),
    ],
)
def test_a_ray_run_that_cannot_work_is_refused_before_anything_is_written(
    home: Any, tmp_path: Path, extra: list[str], says: str
) -> None:
    _profile(home)
    out = tmp_path / "runs"
    done = _driftdesk_without_ray(
        "run", "--profile", "local", "--suite", "basic", "--repeat", "1", "--no-probe",
        "--out", str(out), "--executor", "ray", *extra,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists() or not any(out.iterdir())


def test_inspect_on_ray_is_refused_saying_why(home: Any, tmp_path: Path) -> None:
    _profile(home)
    task_file = tmp_path / "task.py"
    task_file.write_text(
        "from inspect_ai import Task, task\n"
        "from inspect_ai.dataset import Sample\n\n\n"
        "@task\n"
        "def one():\n"
        "    return Task(dataset=[Sample(input='1+1?', target='2')])\n"
    )
    out = tmp_path / "runs"
    done = _driftdesk_without_ray(
        "run", "--profile", "local", "--suite", str(task_file), "--agent", "inspect",
        "--repeat", "1", "--no-probe", "--out", str(out), "--executor", "ray",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--agent inspect runs one inspect process for the whole run" in done.stderr
    assert "--executor local" in done.stderr
    assert not out.exists() or not any(out.iterdir())


def test_without_the_extra_a_local_run_still_works(home: Any, tmp_path: Path) -> None:
    from driftdesk.reruns.simulated_endpoint import SandboxServer

    with SandboxServer(seed=1) as sandbox:
        ProfileStore().save(
            Profile(
                name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL,
                no_key=True,
            )
        )  # fmt: skip
        done = _driftdesk_without_ray(
            "run", "--profile", "sim", "--suite", "basic", "--tasks", "arith-01,arith-02",
            "--repeat", "2", "--no-probe", "--out", str(tmp_path / "runs"),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("completed:")


def test_resources_map_to_ray_task_options() -> None:
    assert parse_resources('{"CPU": 2, "GPU": 1, "memory": 1e9, "big_disk": 1}') == {
        "CPU": 2.0,
        "GPU": 1.0,
        "memory": 1e9,
        "big_disk": 1.0,
    }
    options = task_options(parse_resources('{"CPU": 2, "GPU": 1, "big_disk": 1}'))
    # Ray never retries an attempt on its own: that could call the model twice for one slot.
    assert options == {
        "max_retries": 0,
        "retry_exceptions": False,
        "num_cpus": 2.0,
        "num_gpus": 1.0,
        "resources": {"big_disk": 1.0},
    }
    assert task_options({})["num_cpus"] == 1.0


def test_what_a_node_sends_back_lands_only_inside_its_folder(tmp_path: Path) -> None:
    import io
    import os
    import tarfile

    from driftdesk.reruns.ray_worker import pack_folder, unpack_folder

    home = tmp_path / "client-home"
    home.mkdir()
    (home / "session.jsonl").write_text("{}\n")
    os.symlink("/etc/passwd", home / "out-link")  # a link out of the folder
    os.symlink("session.jsonl", home / "in-link")  # a link inside it
    data = pack_folder(home)
    landed = tmp_path / "landed"
    unpack_folder(data, landed, from_a_node=True)
    assert sorted(p.name for p in landed.iterdir()) == ["in-link", "session.jsonl"]
    # A member that climbs out ("../x") never lands, whoever packed it.
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        member = tarfile.TarInfo("../escaped.txt")
        member.size = 2
        tar.addfile(member, io.BytesIO(b"hi"))
    unpack_folder(buffer.getvalue(), tmp_path / "second", from_a_node=True)
    assert not (tmp_path / "escaped.txt").exists()
    # Our own workspace keeps its links as they were on the way out.
    kept = tmp_path / "kept"
    unpack_folder(data, kept)
    assert os.readlink(kept / "out-link") == "/etc/passwd"
