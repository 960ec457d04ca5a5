"""The metric-agreement report is kept in Django's cache under the digest of its inputs: a
report asked again is read (the same numbers as computed), and new data (an annotation, a
verdict, an edited item) or other settings is a new key, never a stale report."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache

pytestmark = pytest.mark.django_db


@pytest.fixture
def computed(monkeypatch):
    """Counts the reports actually computed (not read from the cache)."""
    from annotate.reports import metric_selectors

    calls = []
    real = metric_selectors.metric_agreement_report

    def counting(**kwargs):
        calls.append(kwargs["bootstrap"])
        return real(**kwargs)

    monkeypatch.setattr(metric_selectors, "metric_agreement_report", counting)
    return calls


def _report(study, **kwargs):
    from annotate.reports.metric_selectors import study_metric_agreement_report

    return study_metric_agreement_report(study, **kwargs)


def _fresh(study, **kwargs):
    """The report computed from scratch, as before any cache (the inputs' own report)."""
    from annotate.reports.metric_selectors import study_metric_inputs

    return study_metric_inputs(study).report(**kwargs)


def test_a_warm_report_is_read_from_the_cache_and_equals_the_cold_one(crafted, computed):
    cold = _report(crafted, bootstrap=100)
    warm = _report(crafted, bootstrap=100)
    assert computed == [100]  # the second was read, not recomputed
    assert json.dumps(warm, sort_keys=True) == json.dumps(cold, sort_keys=True)
    assert json.dumps(warm, sort_keys=True) == json.dumps(_fresh(crafted, bootstrap=100), sort_keys=True)
    cache.clear()
    assert json.dumps(_report(crafted, bootstrap=100), sort_keys=True) == json.dumps(cold, sort_keys=True)


def test_other_settings_are_another_report(crafted, computed):
    a = _report(crafted, bootstrap=50, seed=0)
    b = _report(crafted, bootstrap=50, seed=1)
    _report(crafted, bootstrap=0)
    assert computed == [50, 50, 0]
    assert a["bootstrap"]["seed"] == 0 and b["bootstrap"]["seed"] == 1


def test_a_new_annotation_changes_the_report(crafted, computed):
    from annotate.participation.reservations import assignment_next
    from annotate.participation.submissions import annotation_submit
    from annotate.testing import NO_FAILURE, ONE_FAILURE, annotator_start, read_everything

    before = _report(crafted, bootstrap=0)
    oracle_before = next(s for s in before["signals"] if s["key"] == "judge:oracle")
    assert oracle_before["auc"] == 1.0
    # A fourth annotator disagrees with the majority of the first item served to them, which in
    # the crafted study stands 2-1 (human-3 flipped it): now a 2-2 tie, out of the report.
    crafted.annotators_per_item = 4
    crafted.save(update_fields=["annotators_per_item"])
    participation = annotator_start(crafted, "human-4")
    assignment = assignment_next(participation=participation)
    assert assignment is not None
    majority = _majority_of(crafted, assignment.item.item_id)
    read_everything(participation, assignment)
    annotation_submit(
        participation=participation,
        public_id=assignment.public_id,
        answer=NO_FAILURE if majority else ONE_FAILURE,
        submission_id="t-4",
    )
    after = _report(crafted, bootstrap=0)
    assert computed == [0, 0]  # recomputed, not the cached report
    assert after["n_items"] == before["n_items"] - 1 and after["n_ties"] == before["n_ties"] + 1
    assert json.dumps(after, sort_keys=True) == json.dumps(_fresh(crafted, bootstrap=0), sort_keys=True)


def _majority_of(study, item_id: str) -> bool:
    from annotate.reports.selectors import study_human_majority

    return bool(study_human_majority(study).label(item_id))


def test_a_new_verdict_and_an_edited_item_change_the_report(crafted, computed):
    from annotate.models import StudyItem
    from judging.models import Generation, Judgment

    before = _report(crafted, bootstrap=0)
    item = StudyItem.objects.filter(study=crafted).order_by("item_id").first()
    assert item is not None
    Judgment.objects.create(
        generation=Generation.objects.get(pk=item.source["generation_id"]), judge="late", has_failure=True
    )
    with_late = _report(crafted, bootstrap=0)
    assert "judge:late" in {s["key"] for s in with_late["signals"]} and "judge:late" not in {
        s["key"] for s in before["signals"]
    }
    StudyItem.objects.filter(pk=item.pk).update(candidate_steps=["Do something else entirely.", "Then stop."])
    edited = _report(crafted, bootstrap=0)
    assert computed == [0, 0, 0]
    assert json.dumps(edited, sort_keys=True) != json.dumps(with_late, sort_keys=True)
    assert json.dumps(edited, sort_keys=True) == json.dumps(_fresh(crafted, bootstrap=0), sort_keys=True)


def test_a_changed_annotation_label_changes_the_report(crafted, computed):
    """An annotation edited in place (no new row): its label is part of what the cached
    report is found by, so the report is computed again."""
    from annotate.models import Annotation

    before = _report(crafted, bootstrap=0)
    assert _report(crafted, bootstrap=0) == before and computed == [0]  # found by its rows' fingerprint
    from annotate.testing import ONE_FAILURE

    first = Annotation.objects.filter(study=crafted).order_by("pk").first()
    assert first is not None
    flipped = not _majority_of(crafted, first.item.item_id)
    # Every label of the item flips (with its failures, so the rows stay valid): its majority flips.
    Annotation.objects.filter(item=first.item).update(
        has_failure=flipped, failures=ONE_FAILURE["failures"] if flipped else []
    )
    after = _report(crafted, bootstrap=0)
    assert computed == [0, 0]
    assert json.dumps(after, sort_keys=True) != json.dumps(before, sort_keys=True)
    assert json.dumps(after, sort_keys=True) == json.dumps(_fresh(crafted, bootstrap=0), sort_keys=True)


def test_a_report_with_stored_components_is_still_cached_by_its_inputs(crafted, computed):
    from judging.models import ComponentsRun, GenerationRun, RunStatus

    run = GenerationRun.objects.get(name="craft-model-a")
    ComponentsRun.objects.create(
        name="craft-components",
        generation_run=run,
        extractor="llm:x@0123456789ab",
        prompt_file="extract_components.txt",
        prompt_hash="0123456789ab",
        status=RunStatus.DONE,
    )
    first = _report(crafted, bootstrap=0)
    assert _report(crafted, bootstrap=0) == first and computed == [0]  # the full digest still finds it
