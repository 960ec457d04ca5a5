"""Annotators can flag an item as broken and say they are unsure (issue 31, part 5), and
switching "critical failures identified" back to "no critical failures" is never a trap."""

from __future__ import annotations

import pytest

from annotate.models import Annotation
from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.testing import annotator_start, read_everything, study_make

pytestmark = pytest.mark.django_db

EMPTY_FAILURE = {"description": "", "L1_steps": [], "L2_steps": []}


@pytest.fixture
def ready():
    study = study_make(n_items=3)
    p = annotator_start(study, "pid-flags")
    a = assignment_next(participation=p)
    read_everything(p, a)
    return study, p, a


def test_switching_to_no_failures_drops_the_empty_failure_the_page_added(ready):
    study, p, a = ready
    answer = {"has_failure": False, "failures": [EMPTY_FAILURE], "comments": ""}
    result = annotation_submit(participation=p, public_id=a.public_id, answer=answer)
    assert result.created and result.annotation.has_failure is False
    assert result.annotation.failures == [] and result.annotation.answer["failures"] == []


def test_switching_to_no_failures_with_a_described_failure_is_still_refused(ready):
    from annotate.errors import SubmissionRejected

    study, p, a = ready
    answer = {"has_failure": False, "failures": [EMPTY_FAILURE, {"description": "typed", "L1_steps": [], "L2_steps": []}]}
    with pytest.raises(SubmissionRejected) as info:
        annotation_submit(participation=p, public_id=a.public_id, answer=answer)
    assert "failures" in {e.field for e in info.value.errors}
    assert not Annotation.objects.exists()
