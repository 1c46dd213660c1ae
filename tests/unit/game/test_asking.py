"""What a round asks of a client that comes back (issue 25, resume): the decision's deadline in the
round and at the seat, what each allowed choice adds to the stake, and the keeper's steps labelled
with who decided and why."""

from __future__ import annotations

from datetime import timedelta

from croupier_game.domain.asking import rfc3339

from .conftest import ALICE
from .test_keeper import GRACE_S, HOLDEM_DECIDING, Service, present, seat_of, svc, watched  # noqa: F401 - the fixtures

__all__ = ["present", "svc"]


def test_a_pending_decision_has_its_deadline_and_the_cost_of_each_choice(svc: Service) -> None:  # noqa: F811
    asked = svc.clock.now
    round_id = svc.open_round("casino-holdem-usd", {"ante": 1000, "aa_bonus": 500}, HOLDEM_DECIDING)
    view = svc.view(round_id)
    deadline = rfc3339(asked + timedelta(seconds=30))
    assert view.phase == "deciding" and view.decision_deadline == deadline == "2025-01-01T00:00:30.000Z"
    assert view.option_costs == {"call": 2000, "fold": 0}, "a call is twice the ante; a fold adds nothing"
    seat = svc.run(svc.seats.join_table(ALICE, "casino-holdem-usd"))[0]
    assert svc.run(svc.seats.seat_status(ALICE, seat.seat_id)).decision_deadline == deadline
    assert all(step.caused_by == "" for step in view.steps)


def test_a_war_costs_the_ante_again_and_a_surrender_nothing(svc: Service) -> None:  # noqa: F811
    view = svc.view(svc.open_round("casino-war-usd", {"ante": 1000}, ["Kc", "Kd"]))
    assert view.option_costs == {choice: (0 if choice == "surrender" else 1000) for choice in view.options}
    assert "surrender" in view.options and len(view.options) == 2


def test_the_keepers_default_is_labelled_with_who_and_why_and_the_deadline_is_gone(svc: Service) -> None:  # noqa: F811
    round_id = svc.open_round("casino-holdem-usd", {"ante": 1000}, HOLDEM_DECIDING)
    seat = svc.run(svc.seats.join_table(ALICE, "casino-holdem-usd"))[0]
    svc.clock.advance(30.5)
    assert svc.keep().decided
    view = svc.view(round_id)
    assert view.phase == "settled" and view.decision_deadline == "" and view.option_costs == {}
    kept = [(s.event_type, s.caused_by, s.caused_by_reason) for s in view.steps if s.caused_by]
    reason = "no decision within 30 s: the table's default (fold) was taken by the keeper"
    assert kept == [("DecisionMade", "keeper", reason), ("RoundSettled", "keeper", reason)]
    assert all(s.caused_by_reason == "" for s in view.steps if not s.caused_by)
    assert svc.run(svc.seats.seat_status(ALICE, seat.seat_id)).decision_deadline == ""


def test_a_players_own_decision_is_not_the_keepers(svc: Service) -> None:  # noqa: F811
    round_id = svc.open_round("casino-war-usd", {"ante": 1000}, ["Kc", "Kd"])
    view = svc.run(svc.play.decide(ALICE, round_id, "surrender", ""))
    assert view.phase == "settled" and [s.caused_by for s in view.steps] == [""] * len(view.steps)


def test_a_void_by_the_keeper_gives_its_reason(svc: Service) -> None:  # noqa: F811
    round_id = svc.open_round("casino-war-usd", {"ante": 1000}, [], deal=False)
    svc.clock.advance(301)
    assert svc.keep().voided == [round_id]
    voided = svc.view(round_id).steps[-1]
    assert (voided.event_type, voided.caused_by) == ("RoundVoided", "keeper")
    assert voided.caused_by_reason.startswith("unable to finish: no progress for 301 s")


def test_a_default_after_a_lost_connection_says_so(present: Service) -> None:  # noqa: F811
    round_id = present.open_round("casino-holdem-usd", {"ante": 1000}, HOLDEM_DECIDING)
    watched(present, seat_of(present, round_id))
    present.clock.advance(GRACE_S + 0.5)  # the stream dropped, long before the 30 s decision timeout
    assert present.keep().decided
    reasons = {s.caused_by_reason for s in present.view(round_id).steps if s.caused_by}
    assert reasons == {"the player's connection dropped while asked: the table's default (fold) was taken by the keeper"}
