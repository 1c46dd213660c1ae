"""The dealer's errors; each subclasses a platform error, so `handles_errors` maps it to its status."""

from croupier_platform.errors import Conflict, FailedPrecondition, InvalidArgument


class InvalidDealRequest(InvalidArgument):
    pass


class RoundNotCut(FailedPrecondition):
    reason = "ROUND_NOT_CUT"

    def __init__(self, round_id: str) -> None:
        super().__init__(f"round {round_id!r} has no shoe yet; its first DealCards carries the cut (commitment, cut_seed), or CutShoe first")


class CutMismatch(FailedPrecondition):
    """The round is already cut, with another shoe, commitment or seed."""

    reason = "SHOE_MISMATCH"


class ShoeExhausted(FailedPrecondition):
    reason = "SHOE_EXHAUSTED"


class PositionMismatch(Conflict):
    """ABORTED: the caller's expected position is not where the round's shoe stands."""


class BadShoe(FailedPrecondition):
    """The shuffler sent an order that is not a whole shoe."""

    reason = "SHOE_MISMATCH"
