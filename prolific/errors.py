"""The Prolific workflows' refusals, in the application's error family (``core.app_errors``):
``ProlificInvalid`` (a value refused, naming its field: 400), ``ProlificConflict`` (the study is
not in a state for this: 409) and ``ProlificNotReady`` (a setting of the study or of this server
to fill first: 409). Prolific's own failures are ``prolific.client.ProlificError``."""

from __future__ import annotations

from core.app_errors import Conflict, InvalidInput


class ProlificInvalid(InvalidInput):
    """A value the product refuses; ``field`` names it, ``problem`` says what is wrong (400)."""

    def __init__(self, field: str, problem: str):
        super().__init__(fields={field: problem})
        self.field = field
        self.problem = problem


class ProlificConflict(Conflict):
    """The study is not in a state for this (not published, already paid, ...): a 409."""

    code = "prolific_state"


class ProlificNotReady(ProlificInvalid):
    """A well-formed request that the state of the study or of this server refuses (no main
    items, no payment per item yet, no public https address for webhooks): a 409 naming the
    setting to change first."""

    status = 409
    code = "prolific_not_ready"
