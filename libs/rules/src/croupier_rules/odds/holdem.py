"""Exact Casino Hold'em odds: the AA Bonus over every five-card hand, and the Ante under the
best call/fold decision for every (hole cards, flop) situation, by full enumeration in the
native kernel (suit symmetry makes it about a minute of work on two cores)."""

from __future__ import annotations

from fractions import Fraction

from .. import _native
from ..errors import InvalidInput
from ..table_config import CasinoHoldemTable, table_for
from .report import BetAnalysis, OddsReport, Outcome

# Ante-table tiers in the native kernel's order (tier index = position), named as in CasinoHoldemTable.ante_pays.
TIERS = ("straight or less", "flush", "full house", "four of a kind", "straight flush", "royal flush")
# AA Bonus lines in the native kernel's order: (native key, name in CasinoHoldemTable.aa_bonus_pays).
AA_LINES = (("flush_or_better", "flush or better"), ("aces_to_straight", "pair of aces to straight"))


def native_table_args(table: CasinoHoldemTable) -> dict:
    """The table's paytable as the keyword arguments of _native.holdem_analysis / holdem_situation."""
    return {
        "ante_pays": tuple(table.ante_pays[name] for name in TIERS),
        "aa_pays": tuple(table.aa_bonus_pays[name] for _, name in AA_LINES),
        "qualify_pair_rank": table.qualify_pair_rank,
        "call_multiple": table.call_multiple,
    }


def _ante_outcomes(strategy: dict, table: CasinoHoldemTable) -> tuple[Outcome, ...]:
    rows = [Outcome(event="fold", net=Fraction(-1), combinations=strategy["fold"])]
    for tier, name in enumerate(TIERS):
        pays = table.ante_pays[name]
        rows.append(Outcome(event=f"dealer does not qualify; {name}", net=Fraction(pays), combinations=strategy["nq"][tier]))
        rows.append(
            Outcome(event=f"win; {name}", net=Fraction(pays + table.call_multiple), combinations=strategy["win"][tier])
        )
    rows.append(Outcome(event="tie (push)", net=Fraction(0), combinations=strategy["tie"]))
    rows.append(Outcome(event="dealer wins", net=Fraction(-1 - table.call_multiple), combinations=strategy["lose"]))
    return tuple(sorted((r for r in rows if r.combinations), key=lambda o: -o.net))


def _aa_outcomes(counts: dict, table: CasinoHoldemTable, folded: int = 0) -> tuple[Outcome, ...]:
    rows = [Outcome(event=name, net=Fraction(table.aa_bonus_pays[name]), combinations=counts[key]) for key, name in AA_LINES]
    rows.append(Outcome(event="no aces or better", net=Fraction(-1), combinations=counts["lost"]))
    if folded:
        rows.append(Outcome(event="fold (AA Bonus lost)", net=Fraction(-1), combinations=folded))
    return tuple(rows)


def holdem_odds(decks: int | None = None, threads: int = 2, table: CasinoHoldemTable | None = None) -> OddsReport:
    """Exact odds for ``table`` (default: the standard table, ``table_for("casino-holdem")``); the call/fold
    strategy is the best one for that table's paytable, qualifying pair and call multiple."""
    if decks not in (None, 1):
        raise InvalidInput("Casino Hold'em is dealt from one deck")
    if table is None:
        table = table_for("casino-holdem")  # type: ignore[assignment]
    data = _native.holdem_analysis(threads, **native_table_args(table))
    ante_only, with_aa = data["ante_only"], data["with_aa_bonus"]
    called_share = Fraction(ante_only["situations_called"], data["situations_total"])
    bets = [
        BetAnalysis(
            bet="ante",
            strategy="best call/fold play for an Ante-only player",
            outcomes=_ante_outcomes(ante_only, table),
            note=(
                f"calls {float(called_share) * 100:.2f}% of (hole cards, flop) situations; "
                f"net in Ante units, Call = {table.call_multiple} Antes"
            ),
        ),
        BetAnalysis(
            bet="aa_bonus",
            strategy="alone, the player always calling",
            outcomes=_aa_outcomes(data["aa_bonus_five_card"], table),
            note="over all 2,598,960 five-card hands (hole cards + flop)",
        ),
        BetAnalysis(
            bet="ante",
            strategy="best play for a player who also bets an AA Bonus equal to the Ante",
            outcomes=_ante_outcomes(with_aa, table),
            note=f"calls {float(Fraction(with_aa['situations_called'], data['situations_total'])) * 100:.2f}% of situations",
        ),
        BetAnalysis(
            bet="aa_bonus",
            strategy="with the best play for Ante + AA Bonus (folding loses it)",
            outcomes=_aa_outcomes(with_aa["aa"], table, folded=with_aa["fold"]),
        ),
    ]
    combined = (bets[2].house_edge + bets[3].house_edge) / 2
    bets.append(
        BetAnalysis(
            bet="ante+aa_bonus",
            strategy="best play for Ante + AA Bonus, per unit of the two initial stakes",
            outcomes=(),
            fixed_house_edge=combined,
            note="the two rows above together; outcomes are listed there",
        )
    )
    return OddsReport(game="casino-holdem", decks=1, bets=tuple(bets))
