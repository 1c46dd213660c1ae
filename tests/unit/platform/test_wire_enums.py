"""Each API enum maps to the values its domain defines, both ways, and a request's string and enum agree."""

from __future__ import annotations

import pytest

from croupier.v1 import common_pb2, wallet_pb2
from croupier_game.domain.seat import SEAT_ROLES
from croupier_game.entrypoints.grpc_server import CHOICE, GAME, ROUND_PHASE, SEAT_ROLE
from croupier_platform.errors import InvalidArgument
from tests.refusals import raises_reason
from croupier_platform.wire_enums import WireEnum
from croupier_rules.round_decider import PHASES
from croupier_rules.game_registry import all_choices
from croupier_rules.table_config import GAMES
from croupier_wallet.domain.ledger import Kind, Status
from croupier_wallet.entrypoints.grpc_server import GAME as WALLET_GAME
from croupier_wallet.entrypoints.grpc_server import TRANSACTION_KIND, TRANSACTION_STATUS


@pytest.mark.parametrize(("mapping", "values", "enum"), [
    (GAME, GAMES, common_pb2.Game), (WALLET_GAME, GAMES, common_pb2.Game), (ROUND_PHASE, PHASES, common_pb2.RoundPhase), (CHOICE, all_choices(), common_pb2.Choice),
    (SEAT_ROLE, SEAT_ROLES, common_pb2.SeatRole), (TRANSACTION_KIND, [k.value for k in Kind], wallet_pb2.TransactionKind),
    (TRANSACTION_STATUS, [s.value for s in Status], wallet_pb2.TransactionStatus),
])  # fmt: skip
def test_every_domain_value_has_its_own_enum_value_and_back(mapping: WireEnum, values, enum) -> None:  # noqa: ANN001
    numbers = mapping.numbers(values)
    assert 0 not in numbers and len(set(numbers)) == len(numbers) == len(enum.keys()) - 1  # all but UNSPECIFIED
    for value, number in zip(values, numbers, strict=True):
        assert mapping.value("field", "", number) == value  # the enum alone
        assert mapping.value("field", value, number) == value  # both, agreeing
        assert mapping.value("field", value, 0) == value  # the string alone
    assert mapping.number("") == mapping.number("no-such-value") == 0


def test_names_follow_the_strings() -> None:
    assert (GAME.number("casino-war"), GAME.number("dueling-for-dollars")) == (common_pb2.GAME_CASINO_WAR, common_pb2.GAME_DUELING_FOR_DOLLARS)
    assert TRANSACTION_KIND.number("top_up") == wallet_pb2.TRANSACTION_KIND_TOP_UP


def test_a_request_whose_string_and_enum_disagree_or_whose_enum_is_unknown_is_refused() -> None:
    with raises_reason("INVALID_FIELD", InvalidArgument, match="choice 'fold' and choice_enum 'call' disagree"):
        CHOICE.value("choice", "fold", common_pb2.CHOICE_CALL)
    with raises_reason("INVALID_FIELD", InvalidArgument, match="choice_enum 42 is not a Choice value"):
        CHOICE.value("choice", "", 42)


def test_a_proto_enum_and_a_domain_that_drift_apart_fail_at_once() -> None:
    with pytest.raises(ValueError, match=r"no value for \['roulette'\]"):
        WireEnum(common_pb2.Game.DESCRIPTOR, [*GAMES, "roulette"])
    with pytest.raises(ValueError, match=r"no meaning for \['GAME_WAR_P2P'\]"):
        WireEnum(common_pb2.Game.DESCRIPTOR, [g for g in GAMES if g != "war-p2p"])
