"""Mutation testing of the modules where a silent bug costs most, with mutmut.

    python tests/mutants/run_mutants.py [--minutes 40] [--children 1] [--only MODULE…] [--resume]

What is mutated (``SCOPE``): the key's redaction (``driftdesk.secrets``, the proxy's
``KeyScrubber`` and the paths its bytes take), the proxy's attribution of calls to attempts,
the report's metrics, the CI gate and compare. Each mutant is run against the fast tests that
cover it (``TESTS``); mutmut runs only those that reach the mutated function.

mutmut names a mutant by the module its file path gives, and the tests import ``driftdesk.*``:
the repository's top-level folders (``reruns/``, ``analysis/``…) install as sub-packages of
``driftdesk`` (pyproject's package-dir). So the run happens in a stage folder laid out as
installed (``driftdesk/reruns/…``) with a copy of the tests; the repository is never touched.
Not part of ./run tests: it takes minutes, and the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Module (as imported) -> the functions mutated there; None: every function of the module.
SCOPE: dict[str, list[str] | None] = {
    "driftdesk.secrets": None,
    "driftdesk.reruns.key_scrub": None,  # the key's redaction in what the proxy forwards
    "driftdesk.reruns.proxy": [
        "_scrubbed_error_headers", "MeteringProxy._scrub_error_body",
        # attribution: which attempt a call belongs to, and what its calls say
        "MeteringProxy.open_attempt", "MeteringProxy.attribute", "MeteringProxy.attempt_calls",
        "MeteringProxy.close_attempt", "MeteringProxy._next_call_index",
    ],
    # what an attempt's calls say: a broken link, its figures, a failed call's kind
    "driftdesk.reruns.call_verdicts": None,
    "driftdesk.analysis.metrics": None,
    "driftdesk.analysis.gate": None,
    "driftdesk.analysis.compare": None,
    "driftdesk.analysis.paired": None,
}  # fmt: skip

# The tests that cover them, run in-process (mutmut follows calls only within its process).
TESTS = [
    "tests/test_secrets.py",
    "tests/test_secrets_encodings.py",  # redact's encoded shapes
    "tests/reruns/test_proxy.py",
    "tests/reruns/test_proxy_hardening.py",
    "tests/reruns/test_proxy_escaped_keys.py",
    "tests/reruns/test_proxy_scrub_edges.py",
    "tests/reruns/test_proxy_decoded_values.py",  # the scrubber before the meter decodes
    "tests/reruns/test_stream_scrub.py",  # the key across SSE events
    "tests/reruns/test_proxy_attribution.py",
    "tests/analysis/test_analysis_published_metrics.py",
    "tests/analysis/test_analysis_check.py",
    "tests/analysis/test_analysis_compare.py",
    "tests/analysis/test_gate_edges.py",
    "tests/analysis/test_metrics_edges.py",
    "tests/analysis/test_paired_edges.py",
    "tests/analysis/test_paired_convolution.py",  # _dense, _convolve, _fixed_point, _product
    "tests/analysis/test_compare_edges.py",
    "tests/reruns/test_proxy_link_failure_edges.py",
    "tests/reruns/test_proxy_attribution_edges.py",  # reaches MeteringProxy.attribute
]


def _package_dirs() -> dict[str, str]:
    """``driftdesk.reruns`` -> ``reruns``: where each installed package's files are."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(pyproject["tool"]["setuptools"]["package-dir"])


def _stage(stage: Path) -> None:
    """The package laid out as installed, the tests, and mutmut's configuration."""
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "mutants", "benchmarks")
    for package, folder in _package_dirs().items():
        shutil.copytree(ROOT / folder, stage / package.replace(".", "/"), ignore=ignore)
    shutil.copytree(ROOT / "tests", stage / "tests", ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", stage / "pyproject.toml")  # pytest's settings
    shutil.copy2(ROOT / "tests" / "mutants" / "fresh_caches.py", stage / "conftest.py")
    only = "\n    ".join(f"{module.replace('.', '/')}.py" for module in SCOPE)
    # -n 0: mutmut forks a worker per mutant itself. --timeout: a mutant that hangs a test is
    # killed by mutmut's own limit first; this is the backstop.
    (stage / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths = driftdesk\n"
        "also_copy =\n    conftest.py\n"
        f"only_mutate =\n    {only}\n"
        f"pytest_add_cli_args_test_selection =\n    {chr(10).join('    ' + t for t in TESTS).strip()}\n"
        "pytest_add_cli_args =\n    -p no:cacheprovider\n    -p no:xdist\n    --timeout=120\n"
    )


def _mutant_globs() -> list[str]:
    """mutmut's names: ``module.x_function__mutmut_3``, ``module.xǁClassǁmethod__mutmut_3``."""
    globs = []
    for module, names in SCOPE.items():
        if names is None:
            globs.append(f"{module}.*")
            continue
        for name in names:
            cls, _, method = name.partition(".")
            if method:
                globs.append(f"{module}.xǁ{cls}ǁ{method}__mutmut_*")
            elif name.lstrip("_")[0].isupper():  # a class (a private one too): all its methods
                globs.append(f"{module}.xǁ{name}ǁ*")
            else:
                globs.append(f"{module}.x_{name}__mutmut_*")
    return globs


def _results(stage: Path) -> dict[str, str]:
    """Every mutant of the run and its status (killed, survived, no tests, timeout…)."""
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=stage, capture_output=True, text=True,
    )  # fmt: skip
    statuses = {}
    for line in done.stdout.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            statuses[name] = status.strip()
    return statuses


def _in_scope(name: str) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(name, glob) for glob in _mutant_globs())


def _narrow(functions: list[str]) -> None:
    """Keep only ``functions`` in SCOPE (a module mutated whole keeps the ones it names)."""
    for module, names in list(SCOPE.items()):
        kept = [f for f in functions if names is None or f in names]
        if kept:
            SCOPE[module] = kept
        else:
            del SCOPE[module]
    if not SCOPE:
        raise SystemExit(f"no module in scope has {', '.join(functions)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=40, help="stop the run after this")
    parser.add_argument("--children", type=int, default=1, help="mutants tested at once")
    parser.add_argument("--stage", type=Path, default=Path(tempfile.gettempdir()) / "dd-mutants")
    parser.add_argument("--only", nargs="+", choices=list(SCOPE), help="these modules alone")
    parser.add_argument(
        "--functions", nargs="+", metavar="NAME",
        help="these functions alone (as SCOPE names them: _hex, MeteringProxy.attribute…)",
    )  # fmt: skip
    parser.add_argument(
        "--resume", action="store_true", help="go on with the stage's last run (not restaged)"
    )
    args = parser.parse_args()
    if args.only:
        for module in set(SCOPE) - set(args.only):
            del SCOPE[module]
    if args.functions:
        _narrow(args.functions)
    if not (args.resume and (args.stage / "mutants").is_dir()):
        _stage(args.stage)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    print(f"mutmut in {args.stage}, at most {args.minutes:g} min", flush=True)
    try:
        subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.children),
             *_mutant_globs()],
            cwd=args.stage, env=env, timeout=args.minutes * 60,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        print(f"stopped after {args.minutes:g} min: the figures below are for what ran")
    statuses = {k: v for k, v in _results(args.stage).items() if _in_scope(k)}
    if not statuses:
        print("no mutant results: see mutmut's output above")
        return 1
    by_module: dict[str, Counter[str]] = {}
    for name, status in statuses.items():
        module = re.sub(r"\.x[_ǁ].*$", "", name)
        by_module.setdefault(module, Counter())[status] += 1
    print("\nmutation score (killed / tested; 'no tests': no selected test reaches it)")
    for module, counts in sorted(by_module.items()):
        tested = sum(n for status, n in counts.items() if status not in ("no tests", "not checked"))
        killed = counts["killed"] + counts["timeout"] + counts["segfault"]  # a crash is a kill
        detail = ", ".join(f"{status} {n}" for status, n in sorted(counts.items()))
        print(f"  {module:32} {killed:4} / {tested:<4} ({detail})")
    survivors = sorted(n for n, s in statuses.items() if s == "survived")
    print(f"\n{len(survivors)} survived; see each with: (cd {args.stage} && mutmut show NAME)")
    for name in survivors:
        print("  " + name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
