"""Benchmark: `driftdesk key NAME`, the command Claude Code's apiKeyHelper and Codex's
auth.command run on every key refresh.

Side by side, in interleaved rounds (each a fresh process):

- ``floor``: ``python -c pass`` (the interpreter's own start-up, nothing of ours);
- ``driftdesk key``: the installed console script, reading the key from the Secret Service;
- ``keyring.get_password``: the keyring library's own read in a bare interpreter (what the
  command cost before it read the Secret Service directly).

Target: ``driftdesk key`` median ≤ 100 ms. Runs in a private, throwaway keyring (it re-runs
itself under ``dbus-run-session`` and ``tests/with-keyring.sh``), never the user's.

    .venv-test/bin/python tests/benchmarks/bench_key.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import interleave, load, rerun_in_private_keyring, table, timed_child, verdict

SERVICE = "driftdesk-bench-key"


def compile_bytecode() -> None:
    """Byte-compile what ``driftdesk key`` imports, as ``pip install`` does for a wheel: these
    machines set PYTHONDONTWRITEBYTECODE, so without this every start would compile driftdesk's
    sources again (~30 ms) and measure something no installed user runs."""
    import compileall
    import importlib.util

    for name in ("driftdesk", "driftdesk.cli", "driftdesk.providers", "jeepney", "keyring"):
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(folder, quiet=1)
    print("bytecode compiled for driftdesk, jeepney and keyring (as pip install does)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args, _ = parser.parse_known_args()
    code = rerun_in_private_keyring(__file__, ["--rounds", str(args.rounds)])
    if code is not None:
        return code

    env = dict(os.environ, DRIFTDESK_KEYRING_SERVICE=SERVICE)
    env.pop("PYTHON_KEYRING_BACKEND", None)
    compile_bytecode()
    key = "sk-bench-" + os.urandom(12).hex()
    import keyring

    keyring.set_password(SERVICE, "bench", key)
    script = Path(sys.executable).with_name("driftdesk")
    try:
        check = subprocess.run(
            [str(script), "key", "bench"], env=env, capture_output=True, text=True, check=False
        )
        if check.stdout.strip() != key:
            print(f"driftdesk key did not print the key: {check.stderr}")
            return 1
        runners = {
            "floor (python -c pass)": lambda: timed_child([sys.executable, "-c", "pass"], env=env),
            "driftdesk key": lambda: timed_child([str(script), "key", "bench"], env=env),
            "keyring.get_password": lambda: timed_child(
                [
                    sys.executable,
                    "-c",
                    f"import keyring; print(keyring.get_password({SERVICE!r}, 'bench'))",
                ],
                env=env,
            ),
        }
        print(f"driftdesk key, {args.rounds} interleaved rounds ({load()})")
        results = interleave(runners, args.rounds, quiet=True)
    finally:
        keyring.delete_password(SERVICE, "bench")
    table(results)
    floor = results["floor (python -c pass)"].wall
    key_s = results["driftdesk key"].wall
    print(
        f"\ndriftdesk key {key_s * 1000:.0f} ms vs floor {floor * 1000:.0f} ms "
        f"({key_s / floor:.2f}× the floor, {(key_s - floor) * 1000:.0f} ms above it); "
        f"keyring library read {results['keyring.get_password'].wall * 1000:.0f} ms"
    )
    ok = verdict("driftdesk key median", key_s * 1000, 100, " ms")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
