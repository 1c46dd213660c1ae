"""Exact Casino Hold'em analysis (docs/rules.md section 3), checked independently.

* class counters of specific situations == brute force over all 1081 x 990
  continuations (in C, and once in Python from the native ranker + rank_reference);
* every counter family sums to the number of deals;
* house edge of the Ante with best strategy ~ 2.16 %, AA Bonus ~ 6.4 %;
* the paytable is a parameter: a better flush pay calls more and lowers the edge, and under
  an unusual table (any pair qualifies, Call = 3 Antes, other pays) holdem_situation agrees
  with the analysis' class counters and decisions; holdem_odds passes the table's values.
The full analysis runs once per module and table (~5-15 s each on 2 cores).
"""

from __future__ import annotations

import random
from array import array
from fractions import Fraction
from itertools import combinations

import pytest

from croupier_rules import _native
from croupier_rules.hand_eval import rank_reference
from croupier_rules.odds import holdem as holdem_odds_module
from croupier_rules.table_config import table_for

pytestmark = pytest.mark.slow

RANKS = "23456789TJQKA"
SUITS = "cdhs"
ANTE_PAY = (1, 2, 3, 10, 20, 100)  # tiers: <= straight, flush, full house, quads, SF, royal
AA_PAY = (25, 7, -1)
QUALIFY = (1 << 20) | (2 << 16)
CONTINUATIONS = 1081 * 990
DEALS = 1326 * 19600 * 1081 * 990


def cards(text: str) -> tuple[int, ...]:
    return tuple(RANKS.index(t[0]) * 4 + SUITS.index(t[1]) for t in text.split())


def swap_suits(hand, perm):
    return tuple((c & ~3) | perm[c & 3] for c in hand)


SITUATIONS = [
    cards("Ah Kh Qh 7h 2c"),  # nut flush draw
    cards("9s 8s 7s 6d 2s"),  # straight-flush draw, suits interact
    cards("2c 7d Ks 9h 4c"),  # trash: a fold
    cards("4c 4d 9h 7s 2c"),  # small pair
    cards("Ac Ad Ah As 2c"),  # quads
    cards("5d 5h 5c 9d 9h"),  # full house on the flop
    cards("Jc Tc 9c 8c 7c"),  # made straight flush, royal draws impossible
    cards("Qs Js Ks Ts 3d"),  # royal draw
    cards("3c 2d 6h 8s Td"),  # four suits
]
# the same classes seen under other suit labellings
SITUATIONS += [swap_suits(s, (2, 0, 3, 1)) for s in SITUATIONS[:3]]
RELABELLED = len(SITUATIONS) - 3
# and random ones (seeded), to cover classes of every symmetry
_rng = random.Random(2024)
SITUATIONS += [tuple(_rng.sample(range(52), 5)) for _ in range(24)]


@pytest.fixture(scope="module")
def analysis():
    return _native.holdem_analysis(threads=2, situations=SITUATIONS)


def counters(d):
    return [*d["nq"], *d["win"], d["tie"], d["lose"]]


def call_net(d, ante_pay=ANTE_PAY, call_multiple=2):
    """Net of calling, in ante units, summed over the deals the counters cover."""
    return (
        sum(n * p for n, p in zip(d["nq"], ante_pay))
        + sum(n * (p + call_multiple) for n, p in zip(d["win"], ante_pay))  # Call pays 1:1
        - (1 + call_multiple) * d["lose"]
    )


def tier(v: int) -> int:
    cat = v >> 20
    if cat <= 4:
        return 0
    if cat < 8:
        return cat - 4
    return 5 if (v >> 16) & 15 == 12 else 4


def aa_outcome(v5: int) -> int:
    cat = v5 >> 20
    if cat >= 5:
        return 0
    if cat >= 2 or (cat == 1 and (v5 >> 16) & 15 == 12):
        return 1
    return 2


def test_layout(analysis):
    assert analysis["deals_total"] == DEALS == 27_813_810_024_000
    assert analysis["situations_total"] == 1326 * 19600
    assert analysis["boards_canonical"] == 134_459
    for key in ("ante_only", "with_aa_bonus"):
        s = analysis[key]
        assert len(s["nq"]) == 6 and len(s["win"]) == 6
        assert set(s["aa"]) == {"flush_or_better", "aces_to_straight", "lost"}
        assert all(isinstance(v, int) for v in counters(s))


@pytest.mark.parametrize("index", range(len(SITUATIONS)))
def test_situation_class_equals_brute_force(analysis, index):
    entry = analysis["situations"][index]
    p0, p1, f0, f1, f2 = SITUATIONS[index]
    brute = _native.holdem_situation(p0, p1, f0, f1, f2)
    assert entry["cards"] == SITUATIONS[index]
    assert counters(entry) == counters(brute)
    assert sum(counters(brute)) == CONTINUATIONS
    # the decision follows from the counters
    net = call_net(brute)
    aa = AA_PAY[aa_outcome(rank_reference(SITUATIONS[index]))]
    assert entry["called"]["ante_only"] == (net > -CONTINUATIONS)
    assert entry["called"]["with_aa_bonus"] == (net + aa * CONTINUATIONS > -2 * CONTINUATIONS)


def test_suit_relabelled_situations_share_a_class(analysis):
    sits = analysis["situations"]
    for i in range(3):
        assert sits[i]["class_id"] == sits[RELABELLED + i]["class_id"]
        assert counters(sits[i]) == counters(sits[RELABELLED + i])
    assert sits[2]["called"]["ante_only"] is False  # 2-7 offsuit, no draw
    assert sits[4]["called"]["ante_only"] is True


def test_brute_force_in_python_for_a_flush_draw():
    """Outcome logic rebuilt in Python: player by rank_reference, dealer by rank_batch."""
    p, f = cards("Ah Kh"), cards("Qh 7h 2c")
    rest = [c for c in range(52) if c not in p + f]
    expected = [0] * 14
    for tr in combinations(rest, 2):
        vp = rank_reference(p + f + tr)
        t = tier(vp)
        dealer = [d for d in combinations(rest, 2) if d[0] not in tr and d[1] not in tr]
        flat = bytes(c for d in dealer for c in f + tr + d)
        out = array("I", bytes(4 * len(dealer)))
        _native.rank_batch(flat, 7, out, threads=1)
        for vd in out:
            if vd < QUALIFY:
                expected[t] += 1
            elif vp > vd:
                expected[6 + t] += 1
            elif vp == vd:
                expected[12] += 1
            else:
                expected[13] += 1
    assert counters(_native.holdem_situation(*p, *f)) == expected


@pytest.mark.parametrize("key", ["ante_only", "with_aa_bonus"])
def test_totals_add_up(analysis, key):
    s = analysis[key]
    assert s["situations_called"] + s["situations_folded"] == 1326 * 19600
    assert s["classes_called"] + s["classes_folded"] == analysis["classes"]
    assert s["fold"] == s["situations_folded"] * CONTINUATIONS
    called = sum(counters(s))
    assert called == s["situations_called"] * CONTINUATIONS
    assert called + s["fold"] == analysis["deals_total"]
    assert sum(s["aa"].values()) == called


def test_strategies_relate(analysis):
    ante, aa = analysis["ante_only"], analysis["with_aa_bonus"]
    # an AA Bonus hand that pays makes calling right; otherwise nothing changes
    assert aa["situations_called"] > ante["situations_called"]
    assert aa["aa"]["lost"] == ante["aa"]["lost"]
    assert aa["aa"]["flush_or_better"] == ante["aa"]["flush_or_better"]
    five = analysis["aa_bonus_five_card"]
    # with the bonus every paying situation is called; a five-card hand is 10 (hole pair,
    # flop) situations of 1081 x 990 deals each
    per_five = 1081 * 990 * 10
    assert aa["aa"]["flush_or_better"] == five["flush_or_better"] * per_five
    assert aa["aa"]["aces_to_straight"] == five["aces_to_straight"] * per_five


def test_aa_bonus_five_card(analysis):
    assert analysis["aa_bonus_five_card"] == {
        "flush_or_better": 9516,
        "aces_to_straight": 273144,
        "lost": 2598960 - 9516 - 273144,
        "total": 2598960,
    }
    five = analysis["aa_bonus_five_card"]
    edge = -Fraction(25 * five["flush_or_better"] + 7 * five["aces_to_straight"] - five["lost"], five["total"])
    assert abs(float(edge) - 0.0640) < 0.0005


def test_house_edge(analysis):
    s = analysis["ante_only"]
    net = call_net(s) - s["fold"]
    edge = -Fraction(net, analysis["deals_total"])
    assert abs(float(edge) * 100 - 2.16) < 0.01
    assert 0.81 < s["situations_called"] / analysis["situations_total"] < 0.83


# ------------------------------------------------------------------ configurable paytable

# the standard table with the flush paying 3:1 instead of 2:1: calling only gets better
BETTER_FLUSH = {"ante_pays": (1, 3, 3, 10, 20, 100)}
# an unusual table: any pair qualifies, the Call is 3 Antes, other Ante and AA Bonus pays
ODD_TABLE = {"ante_pays": (1, 4, 5, 15, 40, 250), "aa_pays": (30, 5), "qualify_pair_rank": 0, "call_multiple": 3}
FLIPS = [cards("5s 4s Jc 7s 2h"), cards("3s Td 2c 8s 5s")]  # backdoor flush draws, fold at 2:1, call at 3:1


@pytest.fixture(scope="module")
def better_flush():
    return _native.holdem_analysis(threads=2, situations=SITUATIONS + FLIPS, **BETTER_FLUSH)


@pytest.fixture(scope="module")
def odd_table():
    return _native.holdem_analysis(threads=2, situations=SITUATIONS, **ODD_TABLE)


def edge(s, deals, ante_pay=ANTE_PAY, call_multiple=2):
    return -Fraction(call_net(s, ante_pay, call_multiple) - s["fold"], deals)


def test_default_keywords_are_the_standard_table():
    sit = SITUATIONS[0]
    explicit = _native.holdem_situation(
        *sit, ante_pays=[1, 2, 3, 10, 20, 100], aa_pays=[25, 7], qualify_pair_rank=2, call_multiple=2
    )
    assert explicit == _native.holdem_situation(*sit)
    assert explicit["call_net"] == call_net(explicit)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ante_pays": (1, 2, 3, 10, 20)}, "ante_pays needs exactly 6 pays"),
        ({"ante_pays": (1, 2, 3, 10, 20, -5)}, r"ante_pays\[5\] must be in 0\.\.1000000"),
        ({"aa_pays": (25,)}, "aa_pays needs exactly 2 pays"),
        ({"aa_pays": (25, 10**40)}, r"aa_pays\[1\] must be in"),
        ({"qualify_pair_rank": 13}, "qualify_pair_rank .* must be in 0..12"),
        ({"qualify_pair_rank": -1}, "qualify_pair_rank .* must be in 0..12"),
        ({"call_multiple": 0}, "call_multiple must be in 1.."),
    ],
)
def test_bad_table_parameters_are_value_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _native.holdem_situation(*SITUATIONS[0], **kwargs)
    with pytest.raises(ValueError, match=message):  # refused before any work is done
        _native.holdem_analysis(threads=1, **kwargs)


@pytest.mark.parametrize("kwargs", [{"call_multiple": 2.0}, {"call_multiple": True}, {"ante_pays": "123456"}])
def test_non_int_table_parameters_are_type_errors(kwargs):
    with pytest.raises(TypeError):
        _native.holdem_situation(*SITUATIONS[0], **kwargs)


def test_better_flush_pay_calls_more_and_lowers_the_edge(analysis, better_flush):
    deals = analysis["deals_total"]
    for key in ("ante_only", "with_aa_bonus"):
        std, new = analysis[key], better_flush[key]
        assert new["situations_called"] > std["situations_called"]
        assert new["classes_called"] > std["classes_called"]
    assert edge(better_flush["ante_only"], deals, BETTER_FLUSH["ante_pays"]) < edge(analysis["ante_only"], deals) - Fraction(1, 1000)
    # same qualifying rule, so the same counters; every situation called before is still called
    for old, new in zip(analysis["situations"], better_flush["situations"]):
        assert counters(old) == counters(new)
        assert new["called"]["ante_only"] >= old["called"]["ante_only"]
        assert new["called"]["with_aa_bonus"] >= old["called"]["with_aa_bonus"]
    for entry, sit in zip(better_flush["situations"][len(SITUATIONS) :], FLIPS):
        assert not _native.holdem_situation(*sit)["called"]["ante_only"]
        assert entry["called"] == {"ante_only": True, "with_aa_bonus": True}
        assert _native.holdem_situation(*sit, **BETTER_FLUSH)["called"] == entry["called"]


@pytest.mark.parametrize("index", [0, 1, 2, 3, 5, 7, 12, 20])
def test_odd_table_situation_equals_analysis(odd_table, index):
    entry = odd_table["situations"][index]
    brute = _native.holdem_situation(*SITUATIONS[index], **ODD_TABLE)
    assert counters(entry) == counters(brute)
    assert sum(counters(brute)) == CONTINUATIONS
    assert entry["called"] == brute["called"]
    # the decision follows from the counters with this table's pays and a 3-Ante Call
    net = call_net(brute, ODD_TABLE["ante_pays"], 3)
    assert brute["call_net"] == net
    aa = (*ODD_TABLE["aa_pays"], -1)[aa_outcome(rank_reference(SITUATIONS[index]))]
    assert brute["called"]["ante_only"] == (net > -CONTINUATIONS)
    assert brute["called"]["with_aa_bonus"] == (net + aa * CONTINUATIONS > -2 * CONTINUATIONS)


def test_odd_table_qualifying_rule_changes_the_counters(analysis, odd_table):
    # any pair qualifies: only dealer high-card hands fail to qualify
    for std, odd in zip(analysis["situations"], odd_table["situations"]):
        assert sum(odd["nq"]) <= sum(std["nq"])
        assert sum(counters(odd)) == sum(counters(std))
    assert sum(sum(e["nq"]) for e in odd_table["situations"]) < sum(sum(e["nq"]) for e in analysis["situations"])
    for key in ("ante_only", "with_aa_bonus"):
        s = odd_table[key]
        assert s["situations_called"] + s["situations_folded"] == analysis["situations_total"]
        assert sum(counters(s)) + s["fold"] == analysis["deals_total"]
    assert odd_table["aa_bonus_five_card"] == analysis["aa_bonus_five_card"]


def test_holdem_odds_uses_the_table(monkeypatch, odd_table):
    table = table_for(
        "casino-holdem",
        {
            "ante_pays": {
                "royal flush": 250,
                "straight flush": 40,
                "four of a kind": 15,
                "full house": 5,
                "flush": 4,
                "straight or less": 1,
            },
            "aa_bonus_pays": {"flush or better": 30, "pair of aces to straight": 5},
            "qualify_pair_rank": 0,
            "call_multiple": 3,
        },
    )
    assert holdem_odds_module.native_table_args(table) == ODD_TABLE
    assert holdem_odds_module.native_table_args(table_for("casino-holdem")) == {
        "ante_pays": ANTE_PAY,
        "aa_pays": AA_PAY[:2],
        "qualify_pair_rank": 2,
        "call_multiple": 2,
    }
    seen = {}

    def fake(threads, **kwargs):
        seen.update(kwargs)
        return odd_table

    monkeypatch.setattr(holdem_odds_module._native, "holdem_analysis", fake)
    report = holdem_odds_module.holdem_odds(table=table)
    assert seen == ODD_TABLE
    ante = report.bets[0]
    s = odd_table["ante_only"]
    assert ante.house_edge == edge(s, odd_table["deals_total"], ODD_TABLE["ante_pays"], 3)
    nets = {o.event: o.net for o in ante.outcomes}
    assert nets["dealer wins"] == -4 and nets["win; flush"] == 4 + 3
