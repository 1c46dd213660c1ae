"""The shuffler's errors and their statuses, in one place. Its refusals are platform error kinds already
(domain/errors.py), each with its status; a round's shoe drawn twice by a race is resolved in the use case
(the stored one is returned), so nothing else is left to translate."""

from __future__ import annotations

from croupier_platform.error_mapping import ErrorMapping

handles_errors = ErrorMapping({})
