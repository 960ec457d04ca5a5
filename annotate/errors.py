"""The errors of the annotation app's services, members of the application's error family
(core/app_errors.py): each carries a message for the person who caused it, the field problems,
and the HTTP status it is answered with (the views' ``annotate_errors`` decorator and the API's
exception handler turn them into responses)."""

from __future__ import annotations

from annotate.kinds.base import FieldError
from core.app_errors import AppError
from core.strict_json import StrictJSONError


class AnnotateError(AppError):
    """An error with a message meant for the person who caused it; ``errors``: the field
    problems, in order."""

    status = 400
    code = "invalid_input"

    def __init__(self, message: str, errors: list[FieldError] | None = None):
        self.errors = errors or []
        fields: dict[str, list[str]] = {}
        for error in self.errors:
            fields.setdefault(error.field, []).append(error.message)
        super().__init__(message, fields)


class StudyInvalid(AnnotateError):
    code = "study_invalid"


class EntryRefused(AnnotateError):
    code = "entry_refused"


class EntryLimited(EntryRefused):
    """Too many new participants from one client address in one study (HTTP 429)."""

    status = 429
    code = "entry_limited"


class StudyFull(EntryRefused):
    """No main-pool item is left that the participant could be given (every one has its k
    counted annotations or live reservations covering it): the annotator's pages answer with
    the "study full" page (HTTP 409), which asks them to return the study on Prolific; nothing
    is recorded for them (docs/annotation.md, "A full study")."""

    status = 409
    code = "study_full"


class NotYours(AnnotateError):
    """The assignment does not exist or belongs to someone else (answered as 404)."""

    status = 404
    code = "not_found"


class SubmissionRejected(AnnotateError):
    status = 400
    code = "submission_refused"


class DraftRejected(AnnotateError):
    status = 409
    code = "draft_conflict"


class SaveInvalid(DraftRejected):
    """A save whose values are malformed (a bad request, not a conflict): 400 naming the field."""

    status = 400
    code = "invalid_input"


def field_errors(exc: StrictJSONError) -> list[FieldError]:
    return [FieldError(exc.field or "body", exc.message)]


class StepRefused(AnnotateError):
    status = 409
    code = "step_refused"


class ReleaseRefused(AnnotateError):
    """Releasing a participant's slots does not apply in their state (already returned, or
    finished with nothing reserved): answered as 409, nothing changed."""

    status = 409
    code = "release_refused"
