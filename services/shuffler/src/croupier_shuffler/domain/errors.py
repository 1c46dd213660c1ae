"""The shuffler's errors; each subclasses a platform error, so `handles_errors` maps it to its status."""

from croupier_platform.errors import FailedPrecondition, InvalidArgument, NotFound


class InvalidShoeRequest(InvalidArgument):
    pass


class ShoeNotFound(NotFound):
    def __init__(self, shoe_id: str) -> None:
        super().__init__(f"no shoe {shoe_id}; ask NewShoe for one", metadata={"shoe_id": shoe_id})


class ShoeNotRevealed(FailedPrecondition):
    reason = "SHOE_NOT_REVEALED"

    def __init__(self) -> None:
        super().__init__("the shoe is revealed when its round is over")


class RoundHasAnotherShoe(FailedPrecondition):
    reason = "SHOE_MISMATCH"

    def __init__(self, round_id: str, decks: int) -> None:
        super().__init__(f"round {round_id!r} already has a {decks}-deck shoe; one shoe per round")
