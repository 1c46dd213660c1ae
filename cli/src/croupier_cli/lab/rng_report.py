"""The randomness report: shoes from the shuffler's Fisher–Yates, the cut, and the raw generator's battery.

Every sample has its own seed, derived from one master seed (printed; ``--seed`` repeats the run), and the
pass rule below is fixed before any number is seen.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .rng_battery import Battery, run_dieharder
from .rng_sampling import byte_source, shoe_batches
from .rng_statistics import ShoeTally, Statistic, cut_offsets

ALPHA = 0.01
PASS_RULE = (
    f"Fixed before the run. Family-wise α = {ALPHA} (99% confidence, as the codified criteria ask). With k statistics "
    f"that have a p-value, each passes when p ≥ α/k (Bonferroni); the report passes when every one does and dieharder "
    "reports no FAILED test (dieharder re-tests a WEAK one itself on fresh data, -Y 1). Chi-square statistics are upper-tail; "
    "correlations are two-sided z-tests. A statistic whose chi-square has a cell expected below 5 is listed as 'too few "
    "samples' and not judged. A failing statistic is re-run on a fresh seed before anything is concluded."
)


@dataclass
class Sample:
    name: str
    seed: str | None  # hex; None when the bytes came from the OS CSPRNG directly
    statistics: list[Statistic]
    seconds: float


@dataclass
class RngReport:
    shoes: int
    decks: tuple[int, ...]
    master_seed: str | None
    source: str
    samples: list[Sample] = field(default_factory=list)
    battery: Battery | None = None
    seconds: float = 0.0

    @property
    def judged(self) -> list[Statistic]:
        return [s for sample in self.samples for s in sample.statistics if s.p_value is not None]

    @property
    def threshold(self) -> float:
        return ALPHA / max(len(self.judged), 1)

    def verdict(self, statistic: Statistic) -> str:
        if statistic.p_value is None:
            return "too few samples"
        return "pass" if statistic.p_value >= self.threshold else "FAIL"

    @property
    def passed(self) -> bool:
        battery_ok = self.battery is None or self.battery.passed is not False
        return battery_ok and all(self.verdict(s) == "pass" for s in self.judged)

    def as_json(self) -> dict:
        return {
            "shoes_per_deck_count": self.shoes,
            "decks": list(self.decks),
            "source": self.source,
            "master_seed": self.master_seed,
            "pass_rule": PASS_RULE,
            "threshold": self.threshold,
            "passed": self.passed,
            "seconds": round(self.seconds, 1),
            "machine": f"{platform.node()} · {platform.machine()} · {os.cpu_count()} cpu(s)",
            "samples": [
                {
                    "name": s.name,
                    "seed": s.seed,
                    "seconds": round(s.seconds, 1),
                    "statistics": [{**st.as_json(), "verdict": self.verdict(st)} for st in s.statistics],
                }
                for s in self.samples
            ],
            "battery": self.battery.as_json() if self.battery else None,
        }


def sample_seed(master: bytes, name: str) -> bytes:
    return hashlib.sha256(master + b":" + name.encode()).digest()


def run_report(
    shoes: int,
    decks: tuple[int, ...],
    master_seed: bytes | None = None,
    from_urandom: bool = False,
    battery_tests: tuple[int, ...] = (),
    cut_samples: int | None = None,
    progress=None,
) -> RngReport:
    """Sample every deck count's shoes and cuts while dieharder runs ``battery_tests`` (none when empty) beside
    them: dieharder is another process, so on two cores the two take the wall time of the longer."""
    started = time.monotonic()
    background = ThreadPoolExecutor(max_workers=1)
    battery = background.submit(run_dieharder, battery_tests) if battery_tests else None
    master = None if from_urandom else (master_seed or os.urandom(32))
    report = RngReport(
        shoes=shoes, decks=decks, master_seed=master.hex() if master else None,
        source="os.urandom (not repeatable)" if from_urandom else "ChaCha20 of each sample's seed (repeatable)",
    )

    def seeded(name: str) -> tuple[str | None, object]:
        seed = sample_seed(master, name) if master else None
        return (seed.hex() if seed else None), byte_source(seed)

    for count in decks:
        name = f"shoes, {count} deck(s)"
        began = time.monotonic()
        seed, source = seeded(name)
        tally = ShoeTally(count)
        for batch in shoe_batches(source, shoes, count):  # type: ignore[arg-type]
            tally.add(batch)
            if progress:
                progress(len(batch))
        report.samples.append(Sample(name, seed, tally.statistics(), time.monotonic() - began))
        name = f"cut offsets, {count} deck(s)"
        began = time.monotonic()
        seed, source = seeded(name)
        statistic = cut_offsets(source, cut_samples or shoes, 52 * count)  # type: ignore[arg-type]
        report.samples.append(Sample(name, seed, [statistic], time.monotonic() - began))
    if battery is not None:
        report.battery = battery.result()
    background.shutdown()
    report.seconds = time.monotonic() - started
    return report


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def markdown(data: dict) -> str:
    """The report as Markdown, from its JSON (so a stored report can be printed again)."""
    battery = data["battery"]
    judged_battery = bool(battery) and battery["passed"] is not None
    lines = [
        "# Croupier — randomness report",
        "",
        f"- Shoes per deck count: {data['shoes_per_deck_count']:,}; deck counts: {', '.join(map(str, data['decks']))}",
        f"- Shuffle: the shuffler's Fisher–Yates (Durstenfeld) with its rejection-sampling scaler, vectorised; bytes: {data['source']}",
        f"- Master seed: `{data['master_seed']}`" if data["master_seed"] else "- Master seed: none (OS CSPRNG read directly)",
        f"- Runtime: {data['seconds']:.1f} s on {data['machine']}",
        f"- **Result: {'PASS' if data['passed'] else 'FAIL'}** (threshold p ≥ {data['threshold']:.3g})"
        + ("" if judged_battery else "; the raw-stream battery is not part of this result (see its section)"),
        "",
        "## Pass rule",
        "",
        data["pass_rule"],
        "",
    ]
    for sample in data["samples"]:
        lines += [f"## {sample['name']}", "", f"Seed `{sample['seed']}` · {sample['seconds']} s", "",
                  "| statistic | what | value | df | p-value | verdict |", "|---|---|---|---|---|---|"]
        for st in sample["statistics"]:
            lines.append(f"| {st['name']} | {st['what']} | {st['statistic']:.6g} | {st['df'] or ''} | {_p(st['p_value'])} | {st['verdict']} |")
        lines.append("")
    lines += ["## Raw generator: dieharder on the OS CSPRNG", ""]
    if battery is None:
        lines.append("Not run (--battery none): the raw stream is judged by a separate run.")
        return "\n".join(lines) + "\n"
    if battery["error"]:
        lines += [f"Not judged: {battery['error']}", ""]
    if battery["results"]:
        verdict = "" if battery["error"] else f" · {'no FAILED test' if battery['passed'] else 'FAILED tests'}"
        lines += [f"`{battery['command']}` · {battery['seconds']} s{verdict}", "",
                  "| test | ntup | tsamples | psamples | p-value | assessment |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['test']} | {r['ntup']} | {r['tsamples']} | {r['psamples']} | {r['p_value']:.8f} | {r['assessment']} |"
                  for r in battery["results"]]
    return "\n".join(lines) + "\n"


def write_report(report: RngReport, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = directory / "rng-report.json", directory / "rng-report.md"
    json_path.write_text(json.dumps(report.as_json(), indent=1), encoding="utf-8")
    md_path.write_text(markdown(report.as_json()), encoding="utf-8")
    return [md_path, json_path]
