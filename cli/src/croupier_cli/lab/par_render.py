"""A PAR sheet written as HTML (self-contained: charts embedded), PDF (matplotlib pages) or JSON.

Both documents are made from the same sections (titled tables and charts), so they never disagree.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from . import par_charts
from .par_figures import BAND_ROUNDS, BetFigures, ParSheet

FORMATS = ("html", "pdf", "json")


@dataclass
class Section:
    title: str
    headers: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = field(default_factory=list)
    text: str = ""
    figure: Any = None  # a matplotlib figure
    data: tuple[str, Any] | None = None  # (key, value) the JSON sheet carries for this section


def _pct(value: Fraction | float | None, places: int = 4) -> str:
    return "—" if value is None else f"{float(value) * 100:.{places}f}%"


def _num(value: Fraction | float | None, places: int = 4) -> str:
    return "—" if value is None else f"{float(value):.{places}f}"


def _net(value: Fraction) -> str:
    return f"{float(value):+g}" if value.denominator in (1, 2, 4) else f"{value} ({float(value):+.4f})"


def _summary(sheet: ParSheet) -> Section:
    rows = []
    for bet in sheet.bets:
        vi = bet.volatility_index() or {}
        rows.append(
            (
                bet.bet, bet.strategy, str(bet.return_to_player), _pct(bet.return_to_player), _pct(bet.house_edge),
                _pct(bet.hit_frequency, 2), _pct(bet.push_frequency, 2), _num(bet.standard_deviation),
                " / ".join(_num(vi.get(level), 3) for level in ("90%", "95%", "99%")) if vi else "—",
                "—" if bet.largest_win is None else _net(bet.largest_win),
                "—" if bet.largest_loss is None else _net(bet.largest_loss),
                "—" if bet.exposure_at_table_max() is None else f"{bet.exposure_at_table_max():,}",
            )
        )
    return Section(
        "Summary per bet and strategy (exact)",
        ("bet", "strategy", "RTP (exact)", "RTP", "house edge", "hit freq.", "push freq.", "σ / initial unit",
         "VI 90/95/99%", "largest win", "largest loss", "win at table max (minor units)"),
        rows,
        text="σ is the standard deviation of a round's net result per unit of initial stake; VI = z·σ (z = 1.645, 1.960, 2.576). "
        "Hit frequency is the share of rounds the bet ends ahead. Net results are in units of the initial stake.",
    )


def _published(sheet: ParSheet) -> Section | None:
    rows = []
    for figure in sheet.published:
        ours = [b for b in sheet.bets if b.bet == figure.bet]
        if figure.house_edge is not None and ours:
            mine = ours[0]
            gap = float(mine.house_edge) - figure.house_edge
            if figure.approximate:
                check = f"the seed's rough figure; ours is exact ({abs(gap) * 100:.2f} points apart)"
            else:
                check = "agrees" if abs(gap) <= figure.tolerance else "DIFFERS"
            edge = _pct(-mine.house_edge) if figure.house_edge < 0 else _pct(mine.house_edge)
            rows.append((figure.bet, figure.what, figure.value, edge, check))
        else:
            rows.append((figure.bet, figure.what, figure.value, "", "stated"))
        if figure.combinations and ours:
            mine_counts = {line.event: line.combinations for line in ours[0].outcomes}
            same = mine_counts == figure.combinations
            rows.append((figure.bet, "combinations", ", ".join(f"{e} {c:,}" for e, c in figure.combinations.items()),
                         ", ".join(f"{e} {c:,}" for e, c in mine_counts.items()), "agrees" if same else "DIFFERS"))
    if not rows:
        return None
    return Section("The seed's published figures beside ours", ("bet", "figure", "seed", "ours", "check"), rows)


def _bet_sections(bet: BetFigures) -> list[Section]:
    heading = f"{bet.bet} · {bet.strategy}"
    if not bet.outcomes:
        return [Section(heading, text=f"{bet.note or ''} House edge {_pct(bet.house_edge)} (exact {bet.house_edge}).")]
    outcome_rows = [
        (line.event, _net(line.net), f"{line.combinations:,}", f"{float(line.probability):.8f}", f"{float(line.contribution):+.8f}")
        for line in bet.outcomes
    ]
    outcome_rows.append(("total", "", f"{bet.combinations:,}", "1.00000000", f"{float(-bet.house_edge):+.8f}"))
    net_rows = [(_net(net), str(p), f"{float(p):.8f}") for net, p in bet.net_distribution.items()]
    band = dict(bet.return_band() or [])
    band_rows = [
        (f"{n:,}", _pct(float(bet.return_to_player) - band[n], 3), _pct(float(bet.return_to_player) + band[n], 3), f"±{band[n] * 100:.3f}%")
        for n in BAND_ROUNDS
    ]
    return [
        Section(f"{heading} — outcomes", ("event", "net", "combinations", "probability", "contribution"), outcome_rows,
                text=bet.note or ""),
        Section(f"{heading} — probability of each net result", ("net", "probability (exact)", "probability"), net_rows),
        Section(f"{heading} — 95% band of the realised RTP after N rounds", ("rounds", "low", "high", "half-width"), band_rows),
    ]


def sections(sheet: ParSheet, simulate_rounds: int, seed: int, draw: bool = True) -> list[Section]:
    """The sheet's sections; ``draw`` False leaves the charts out (their data stays, for JSON)."""
    parts = [
        Section(
            f"PAR sheet · {sheet.game} · {sheet.decks} deck(s)",
            text="Every figure is computed from the exact odds (croupier odds: every deal enumerated through the game's own "
            "decider); nothing below is simulated except the convergence chart, which checks a simulation against them. "
            "The shoe is reshuffled every round.",
        ),
        _summary(sheet),
    ]
    if published := _published(sheet):
        parts.append(published)
    for bet in sheet.bets:
        parts.extend(_bet_sections(bet))
    if charted := [bet for bet in sheet.bets if bet.outcomes]:
        parts.append(Section("Distribution of a round's net result", figure=par_charts.distribution_figure(sheet.game, charted) if draw else None))
    if simulate_rounds:
        run = par_charts.convergence(sheet, simulate_rounds, seed)
        parts.append(Section(
            "Simulated return inside its confidence band",
            text=f"{run.rounds[-1]:,} rounds through the deciders (seed {run.seed}): return {run.running_return[-1] * 100:.4f}% "
            f"against the exact {run.exact_return * 100:.4f}% ± {run.half_width(run.rounds[-1]) * 100:.4f}% (95%) — "
            f"{'inside' if run.final_inside_band else 'OUTSIDE'} the band.",
            figure=par_charts.convergence_figure(sheet.game, run) if draw else None,
            data=("convergence", run.as_json()),
        ))
    if sheet.game == "war-p2p":
        from croupier_rules.table_config import table_for

        rows = par_charts.commission_sweep(sheet.decks)
        table_rate = table_for("war-p2p").commission_rate  # type: ignore[attr-defined]
        parts.append(Section(
            "war-p2p · the dealer seat across commission rates (exact, player always raising)",
            ("commission", "player's house edge", "dealer seat's edge (exact)", "dealer seat's edge"),
            [(_pct(rate, 2), _pct(player), str(dealer), _pct(dealer)) for rate, player, dealer in rows],
            text=f"The table charges {float(table_rate) * 100:g}%.",
            figure=par_charts.commission_figure(rows, table_rate) if draw else None,
            data=("commission_sweep", [
                {"commission_rate": str(r), "player_house_edge": float(p), "dealer_seat_edge_exact": str(d), "dealer_seat_edge": float(d)}
                for r, p, d in rows
            ]),
        ))
    return parts


def _html(sheet: ParSheet, parts: list[Section]) -> str:
    out = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>PAR sheet · {html.escape(sheet.game)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px;text-align:right}td:first-child,th:first-child{text-align:left}"
        "h2{font-size:15px;margin-top:1.5em}p{font-size:13px}</style></head><body>",
    ]
    for index, part in enumerate(parts):
        out.append(f"<h{1 if index == 0 else 2}>{html.escape(part.title)}</h{1 if index == 0 else 2}>")
        if part.text:
            out.append(f"<p>{html.escape(part.text)}</p>")
        if part.headers:
            out.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in part.headers) + "</tr>")
            for row in part.rows:
                out.append("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>")
            out.append("</table>")
        if part.figure is not None:
            encoded = base64.b64encode(par_charts.png_of(part.figure)).decode()
            out.append(f"<img alt='{html.escape(part.title)}' src='data:image/png;base64,{encoded}'>")
    out.append("</body></html>")
    return "\n".join(out)


def _text_lines(part: Section) -> list[str]:
    lines = [part.title, ""]
    if part.text:
        import textwrap

        lines += textwrap.wrap(part.text, 150) + [""]
    if part.headers:
        widths = [max(len(h), *(len(row[i]) for row in part.rows)) for i, h in enumerate(part.headers)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(part.headers, widths)))
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in part.rows]
        lines.append("")
    return lines


def _pdf(sheet: ParSheet, parts: list[Section], path: Path) -> None:
    plt = par_charts._pyplot()
    from matplotlib.backends.backend_pdf import PdfPages

    lines_per_page = 70
    with PdfPages(path, metadata={"Title": f"PAR sheet {sheet.game}", "Creator": "croupier par"}) as pdf:
        pending: list[str] = []

        def flush() -> None:
            if not pending:
                return
            page = plt.figure(figsize=(11.69, 8.27))  # A4 landscape: 842 × 595 pt
            # A monospace character is ~0.6 em wide: shrink the type until the widest line fits the page.
            size = min(6.2, 0.94 * 842 / (0.6 * max(len(line) for line in pending)))
            page.text(0.03, 0.97, "\n".join(pending), family="monospace", fontsize=size, va="top")
            pdf.savefig(page)
            plt.close(page)
            pending.clear()

        for part in parts:
            lines = _text_lines(part)
            if len(pending) + len(lines) > lines_per_page:
                flush()
            pending.extend(lines)
            if part.figure is not None:
                flush()
                pdf.savefig(part.figure)
        flush()


def par_path(directory: Path, sheet: ParSheet, fmt: str) -> Path:
    return directory / f"par-{sheet.game}-{sheet.decks}deck.{fmt}"


def write_par(sheet: ParSheet, formats: tuple[str, ...], directory: Path, simulate_rounds: int = 20_000, seed: int = 1) -> list[Path]:
    """Write ``sheet`` in each of ``formats`` under ``directory``; the simulation and the sweep run once for all."""
    directory.mkdir(parents=True, exist_ok=True)
    parts = sections(sheet, simulate_rounds, seed, draw=any(fmt != "json" for fmt in formats))
    written = []
    try:
        for fmt in formats:
            path = par_path(directory, sheet, fmt)
            if fmt == "json":
                path.write_text(json.dumps(_json(sheet, parts), indent=1), encoding="utf-8")
            elif fmt == "html":
                path.write_text(_html(sheet, parts), encoding="utf-8")
            elif fmt == "pdf":
                _pdf(sheet, parts, path)
            else:
                raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
            written.append(path)
    finally:
        for part in parts:
            if part.figure is not None:
                par_charts.close(part.figure)
    return written


def _json(sheet: ParSheet, parts: list[Section]) -> dict[str, Any]:
    data: dict[str, Any] = sheet.as_json()
    for part in parts:
        if part.data is not None:
            data[part.data[0]] = part.data[1]
    return data
