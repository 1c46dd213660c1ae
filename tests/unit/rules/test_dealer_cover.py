"""A player-dealer's cover (docs/rules.md §2): the player's largest win plus the largest commission."""

from hypothesis import given
from hypothesis import strategies as st

from croupier_rules.games.war_p2p import dealer_cover, largest_commission, largest_covered_ante
from croupier_rules.table_config import table_for

TABLE_III = table_for("war-p2p", {"table_type": "III", "dealer": "player"})


def test_the_seeds_300_needs_310_50_of_cover():
    # $300 ante: the player wins at most $300; Ante $300 + Raise $300 = $600 at 1.75% is $10.50.
    assert largest_commission(30000, TABLE_III) == 1050
    assert dealer_cover(30000, TABLE_III) == 31050


def test_the_cap_is_the_table_maximum_for_a_rich_dealer():
    assert largest_covered_ante(10**9, TABLE_III) == 35000


@given(available=st.integers(min_value=0, max_value=10**7), table_type=st.sampled_from(["I", "II", "III"]))
def test_the_cap_is_the_largest_ante_the_dealer_covers(available: int, table_type: str):
    table = table_for("war-p2p", {"table_type": table_type, "dealer": "player"})
    cap = largest_covered_ante(available, table)
    assert 0 <= cap <= table.limits["ante"].max
    if cap:
        assert dealer_cover(cap, table) <= available
    if cap < table.limits["ante"].max:
        assert dealer_cover(cap + 1, table) > available
