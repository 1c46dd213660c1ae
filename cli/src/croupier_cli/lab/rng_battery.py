"""The raw generator through a standard battery: Debian's dieharder reading the OS CSPRNG.

The shuffler's bytes are os.urandom's (getrandom(2)); /dev/urandom is the same kernel generator, so
dieharder reads it directly as raw input (``-g 200``, stdin). ``-Y 1`` makes dieharder resolve a WEAK
result itself by re-running that test on fresh data, as labs do. Without dieharder installed the report
says so (``apt-get install -y dieharder``) and judges the rest.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass

# Diehard's tests dieharder rates "Good", and NIST STS monobit, runs and serial: the battery a lab runs first.
STANDARD_TESTS = (0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 15, 16, 17, 100, 101, 102)
QUICK_TESTS = (0,)
RESULT_LINE = re.compile(r"^\s*(\S+)\|\s*(\d+)\|\s*(\d+)\|\s*(\d+)\|\s*([0-9.eE+-]+)\|\s*(PASSED|WEAK|FAILED)\s*$")


@dataclass(frozen=True)
class BatteryResult:
    test: str
    ntup: int
    tsamples: int
    psamples: int
    p_value: float
    assessment: str

    def as_json(self) -> dict:
        return self.__dict__.copy()


@dataclass(frozen=True)
class Battery:
    installed: bool
    command: str
    results: tuple[BatteryResult, ...] = ()
    seconds: float = 0.0
    error: str | None = None

    @property
    def passed(self) -> bool | None:
        if not self.installed or self.error:
            return None
        return all(r.assessment != "FAILED" for r in self.results)

    def as_json(self) -> dict:
        return {
            "tool": "dieharder",
            "installed": self.installed,
            "command": self.command,
            "seconds": round(self.seconds, 1),
            "error": self.error,
            "passed": self.passed,
            "results": [r.as_json() for r in self.results],
        }


def parse(output: str) -> tuple[BatteryResult, ...]:
    """dieharder's result table: one line per (test, ntup); a resolved WEAK shows its final line last."""
    found: dict[tuple[str, int], BatteryResult] = {}
    for line in output.splitlines():
        if match := RESULT_LINE.match(line):
            name, ntup, tsamples, psamples, p_value, assessment = match.groups()
            found[(name, int(ntup))] = BatteryResult(name, int(ntup), int(tsamples), int(psamples), float(p_value), assessment)
    return tuple(found.values())


def run_dieharder(tests: tuple[int, ...], source: str = "/dev/urandom") -> Battery:
    executable = shutil.which("dieharder")
    shown = " ; ".join(f"dieharder -g 200 -d {t} -Y 1 < {source}" for t in tests)
    if executable is None:
        return Battery(installed=False, command=shown, error="dieharder is not installed (Debian: apt-get install -y dieharder)")
    started = time.monotonic()
    results: list[BatteryResult] = []
    for test in tests:
        with open(source, "rb") as stream:
            done = subprocess.run([executable, "-g", "200", "-d", str(test), "-Y", "1"], stdin=stream, capture_output=True, text=True)
        if done.returncode != 0:
            return Battery(True, shown, tuple(results), time.monotonic() - started, f"dieharder -d {test}: {done.stderr.strip()[:300]}")
        results.extend(parse(done.stdout))
    return Battery(True, shown, tuple(results), time.monotonic() - started)
