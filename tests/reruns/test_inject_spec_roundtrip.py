"""--inject: what the parser accepts is exactly what the manifest can give back.

A spec is written into the run's manifest as its canonical text and read back from there (the
run itself, ``resume``, ``run --only-failed``): a value accepted but written in a form the parser
refuses (``1e-05%``, ``1.23457e+07s``) stopped the run after its dir was made. Shares have a
resolution of 0.0001 % (one call in a million) and durations one of 1 ms, up to an hour; the
property below is checked over many generated specs (hypothesis is not among the test
dependencies: a seeded generator stands in for it, reproducible by its seed)."""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.injection import (
    MAX_DURATION_S,
    InjectionSpec,
    InjectSpecError,
    parse_inject,
)
from driftdesk.reruns.run_spec import RunSetupError, RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

KINDS = ("429", "500", "503", "timeout", "drop", "truncate", "slow")


def _number(rng: random.Random) -> str:
    """A decimal number as a user might type it: whole, with a few or many decimals, tiny,
    huge, with a leading or trailing point."""
    shape = rng.randrange(7)
    if shape == 0:
        return str(rng.randrange(0, 120))
    if shape == 1:
        return f"{rng.uniform(0, 100):.{rng.randrange(1, 10)}f}"
    if shape == 2:
        return f"0.{'0' * rng.randrange(0, 9)}{rng.randrange(1, 1000)}"
    if shape == 3:
        return f"{rng.randrange(0, 10**9)}"
    if shape == 4:
        return f".{rng.randrange(0, 10 ** rng.randrange(1, 8))}"
    if shape == 5:
        return f"{rng.randrange(0, 100)}."
    return f"{rng.uniform(0, 1):.{rng.randrange(1, 8)}f}"


def _random_spec(rng: random.Random) -> str:
    items = []
    for kind in rng.sample(KINDS, rng.randrange(1, 4)):
        share = _number(rng) + rng.choice(("%", "%", ""))
        item = f"{kind}={share}"
        if kind in ("429", "slow") and rng.random() < 0.7:
            item += ":" + _number(rng) + rng.choice(("s", "ms", ""))
        items.append(item)
    return ",".join(items)


def _assert_round_trip(text: str) -> bool:
    """Whether ``text`` was accepted; accepted, it must read back as itself."""
    try:
        spec = parse_inject(text)
    except InjectSpecError as exc:
        assert "\n" not in str(exc)
        return False
    assert spec is not None
    canonical = spec.text()
    assert "e" not in canonical.replace("timeout", "").replace("truncate", ""), canonical
    assert parse_inject(canonical) == spec, (text, canonical)
    assert parse_inject(canonical).text() == canonical  # type: ignore[union-attr]
    # Through the manifest as the run writes it (JSON), as resume reads it.
    manifest = json.loads(json.dumps({"injection": spec.to_manifest()}))
    assert InjectionSpec.from_manifest(manifest) == spec
    return True


@pytest.mark.parametrize(
    "text",
    [
        "429=5%",
        "429=0.0001%",
        "429=0.000001",
        "429=100%",
        "500=33.3333%,503=33.3333%,drop=33.3334%",
        "429=1%:3600s",
        "429=1%:0.001s",
        "429=1%:1ms",
        "slow=5%:3600000ms",
        "slow=5%:0s",
        "429=12.3456%:1234.567s,slow=1%:0.5",
        "429=0%",
    ],
)
def test_edge_specs_round_trip(text: str) -> None:
    assert _assert_round_trip(text)


def test_every_accepted_spec_reads_back_as_itself() -> None:
    rng = random.Random(46)
    accepted = 0
    for _ in range(20_000):
        accepted += _assert_round_trip(_random_spec(rng))
    assert accepted > 2_000  # the generator reaches accepted specs, not only refusals


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("429=0.0000001", "smallest share is 0.0001%"),
        ("429=0.00001%", "smallest share is 0.0001%"),
        ("429=5.00001%", "resolution of 0.0001%"),
        ("429=1%:12345678s", f"at most {MAX_DURATION_S:g}s"),
        ("slow=1%:3600001ms", f"at most {MAX_DURATION_S:g}s"),
        ("slow=1%:0.5ms", "resolution of 1 ms"),
        ("429=1%:1.0001s", "resolution of 1 ms"),
    ],
)
def test_shares_and_durations_out_of_bounds_are_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(InjectSpecError) as caught:
        parse_inject(text)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_issues_specs_are_refused() -> None:
    for text in ("429=0.0000001", "429=1%:12345678s"):
        with pytest.raises(InjectSpecError):
            parse_inject(text)


def test_canonical_text_of_old_style_values() -> None:
    spec = parse_inject("500=2%, 429=0.05:250ms, slow=.5:1.5")
    assert spec is not None
    assert spec.text() == "429=5%:0.25s,500=2%,slow=50%:1.5s"


def _nothing_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


@pytest.mark.parametrize("spec", ["429=0.0000001", "429=1%:12345678s"])
async def test_a_refused_spec_leaves_no_run_dir(tmp_path: Path, spec: str) -> None:
    out = tmp_path / "runs" / "deeper"
    with SandboxServer(seed=3) as server:
        profile = Profile(name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL)
        with pytest.raises(RunSetupError):
            await execute_run(
                RunSpec(
                    profile=profile,
                    suite="basic",
                    repeat=1,
                    out_dir=out,
                    api_key="sk-test-roundtrip-0123456789",
                    probe=False,
                    inject=spec,
                )
            )
    assert not (tmp_path / "runs").exists(), _nothing_under(tmp_path)


def _save_keyless_sim(url: str) -> None:
    ProfileStore().save(
        Profile(name="sim", protocol="openai", base_url=url, model=SIM_MODEL, no_key=True)
    )


def test_the_cli_refuses_the_spec_before_anything_is_written(home: object, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with SandboxServer(seed=3) as server:
        _save_keyless_sim(server.base_url)
        for spec in ("429=0.0000001", "429=1%:12345678s"):
            done = subprocess.run(
                [sys.executable, "-m", "driftdesk", "run", "--profile", "sim", "--suite",
                 "basic", "--repeat", "1", "--no-probe", "--out", str(out), "--inject", spec],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 2, done.stderr
            assert "--inject" in done.stderr and done.stderr.count("\n") == 1, done.stderr
            assert not out.exists(), _nothing_under(out)


def _limit_file_size() -> None:
    # Files of at most 16 KiB: the run's 64 KiB manifest reserve cannot be written (EFBIG;
    # Python ignores SIGXFSZ), as on a full disk.
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, 16 * 1024))


def test_a_run_refused_after_its_dir_was_made_removes_it(home: object, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with SandboxServer(seed=3) as server:
        _save_keyless_sim(server.base_url)
        done = subprocess.run(
            [sys.executable, "-m", "driftdesk", "run", "--profile", "sim", "--suite", "basic",
             "--repeat", "1", "--no-probe", "--out", str(out)],
            capture_output=True, text=True, timeout=120, preexec_fn=_limit_file_size,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cannot write" in done.stderr or "could not" in done.stderr, done.stderr
    assert not out.exists(), _nothing_under(out)
