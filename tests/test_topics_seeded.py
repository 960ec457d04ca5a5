"""The 14 topics are reference data: an emptied database gets them back, so a test (or a site)
that runs after a flush finds them as a fresh migration leaves them."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from mining.constants import TOPICS
from mining.models import Topic


@pytest.mark.django_db(transaction=True)
def test_the_topics_come_back_after_the_database_is_flushed():
    Topic.objects.filter(name=TOPICS[0]).update(position=99)
    call_command("flush", interactive=False, verbosity=0)
    names = list(Topic.objects.order_by("position").values_list("name", flat=True))
    assert names == list(TOPICS)
    assert len(names) == 14
