"""Writes docs/asyncapi.json, the AsyncAPI document of Croupier's event stream, from the code.

    .venv/bin/python scripts/asyncapi.py           # (re)write docs/asyncapi.json
    .venv/bin/python scripts/asyncapi.py --check   # exit 1 when the file differs from the code

The platform builds the document (`croupier_platform.asyncapi`: topics, keys, headers, envelope); this
script is the catalogue of what each service appends, read from the services' own declarations:
payload models where a service declares one (the round's events: croupier_rules.events and the game's
RoundOpened/ShoeCommitted), and where a service builds its payload as a dict (seat, ledger, shoe
reveals), the dict's field names, read from the source (`ast`) where it builds them.
"""

import argparse
import ast
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, create_model

from croupier_platform.asyncapi import EventSpec, render

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "docs" / "asyncapi.json"


def catalogue() -> list[EventSpec]:
    return [*_round_events(), *_seat_events(), *_ledger_events(), *_shoe_events()]


def _round_events() -> list[EventSpec]:
    from croupier_game.domain import recorded
    from croupier_game.domain import round as game_round
    from croupier_rules import events as rules_events

    models: list[type[BaseModel]] = [game_round.RoundOpened, game_round.ShoeCommitted]
    models += [getattr(rules_events, name) for name in rules_events.EVENT_TYPES]
    source = "croupier_game.domain.round.new_event"
    return [
        EventSpec(game_round.STREAM_TYPE, model.__name__, recorded.SCHEMA_VERSION, model, source, "game")
        for model in models
    ]


def _seat_events() -> list[EventSpec]:
    from croupier_game.application import seats
    from croupier_game.domain import recorded, seat

    # record_seat(uow, seat_id, EVENT_TYPE, at, [causation_id], **fields): every call site's fields, by event type.
    fields: dict[str, set[str]] = {}
    for call in _calls(seats, "record_seat"):
        event_type = getattr(seat, _name(call.args[2]))
        fields.setdefault(event_type, set()).update(k.arg for k in call.keywords if k.arg and k.arg != "causation_id")
    source = "croupier_game.application.seats.record_seat"
    return [
        EventSpec(seat.SEAT_STREAM_TYPE, event_type, recorded.SCHEMA_VERSION, _fields_model(event_type, {"seat_id", *names}),
                  source, "game")
        for event_type, names in sorted(fields.items())
    ]  # fmt: skip


def _ledger_events() -> list[EventSpec]:
    from croupier_wallet.application import ledger_session as ledger

    source = "croupier_wallet.application.ledger_session.LedgerSession"
    change = _dict_keys(ledger.LedgerSession._record, lambda node: isinstance(node, ast.Assign))
    folded = _dict_keys(ledger.LedgerSession._event, lambda node: isinstance(node, ast.Assign), {"_ACCOUNT_AFTER": ledger._ACCOUNT_AFTER})
    specs = [
        EventSpec(ledger.LEDGER_STREAM_TYPE, event_type, ledger.LEDGER_SCHEMA_VERSION, _fields_model(event_type, change),
                  f"{source}._record", "wallet")
        for event_type in sorted(ledger.CHANGES)
    ]  # fmt: skip
    specs.append(EventSpec(ledger.LEDGER_STREAM_TYPE, ledger.FOLDED, ledger.LEDGER_SCHEMA_VERSION,
                           _fields_model(ledger.FOLDED, folded), f"{source}._event", "wallet"))  # fmt: skip
    return specs


def _shoe_events() -> list[EventSpec]:
    from croupier_shuffler.application import use_cases

    keys = _dict_keys(use_cases._shoe_revealed, lambda node: isinstance(node, ast.keyword) and node.arg == "payload")
    return [
        EventSpec(use_cases.SHOE_STREAM_TYPE, use_cases.SHOE_REVEALED, use_cases.SHOE_REVEALED_SCHEMA_VERSION,
                  _fields_model(use_cases.SHOE_REVEALED, keys), "croupier_shuffler.application.use_cases._shoe_revealed",
                  "shuffler")
    ]  # fmt: skip


def _fields_model(event_type: str, names: set[str]) -> type[BaseModel]:
    """A payload whose fields are known by name only (the service builds it as a dict): every one present, any JSON value."""
    fields: dict[str, Any] = {name: (Any, ...) for name in sorted(names)}
    model = create_model(f"{event_type}Payload", **fields)
    model.__doc__ = f"The fields of a {event_type} payload, as the service builds them (their types are not declared)."
    return model


def _calls(module: Any, function: str) -> list[ast.Call]:
    tree = ast.parse(inspect.getsource(module))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) == function]


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    raise ValueError(f"expected a name, found {ast.dump(node)}")


def _dict_keys(function: Callable[..., Any], holder: Callable[[ast.AST], bool], constants: dict[str, Any] | None = None) -> set[str]:
    """The keys of the dict literals the nodes `holder` picks in `function`'s source hold (an assignment's value,
    or one of its values; a keyword argument's); `**{k: ... for k in CONSTANT}` spreads CONSTANT's items, named
    in `constants`."""
    tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(function)))
    keys: set[str] = set()
    for node in ast.walk(tree):
        if not holder(node):
            continue
        value = node.value  # an assignment's or a keyword's
        for found in value.elts if isinstance(value, ast.Tuple) else [value]:
            if not isinstance(found, ast.Dict):
                continue  # the dict itself, not those nested in it (the folded event's transfers)
            for key, value in zip(found.keys, found.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    keys.add(key.value)
                elif key is None and isinstance(value, ast.DictComp) and constants:
                    source = _name(value.generators[0].iter)
                    keys.update(constants[source])
    if not keys:
        raise ValueError(f"no payload dict found in {function.__qualname__}: has the code changed shape?")
    return keys


def version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/asyncapi.json differs from the code")
    args = parser.parse_args(argv)
    text = render(catalogue(), version())
    if args.check:
        if not DOCUMENT.exists() or DOCUMENT.read_text() != text:
            print(f"{DOCUMENT.relative_to(ROOT)} differs from the code: run .venv/bin/python scripts/asyncapi.py", file=sys.stderr)
            return 1
        return 0
    DOCUMENT.write_text(text)
    print(f"wrote {DOCUMENT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
