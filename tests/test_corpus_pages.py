"""Corpus pages: who sees them, the per-topic chart, the seeded sample, the search, the
admins' upload page with its report, and the split report pages."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from mining.corpus_services import corpus_import
from mining.models import Corpus, CorpusImport, Document, Topic
from tests.files import jsonl_bytes, write_records

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(tmp_path):
    records = [
        {
            "id": f"doc-{i:03d}",
            "text": f"Document number {i}. " + ("Knead the dough." if i % 3 == 0 else "Tighten the bolt."),
            "url": f"https://example.org/{i}",
            "topic": "Food & Dining" if i % 3 == 0 else "Industrial",
        }
        for i in range(60)
    ] + [{"id": "loose", "text": "A document without a topic."}]
    corpus_import(name="web", path=write_records(tmp_path, "docs", records, "jsonl"))
    return Corpus.objects.get(name="web")


def test_anonymous_users_are_sent_to_login(client, corpus):
    for url in (reverse("corpus_list"), reverse("corpus_detail", args=[corpus.pk]), reverse("corpus_upload")):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_a_user_without_a_role_is_refused(corpus, django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user("nobody", password="x-Password-1"))
    assert client.get(reverse("corpus_list")).status_code == 403
    assert client.get(reverse("corpus_detail", args=[corpus.pk])).status_code == 403


def test_researchers_see_corpora_but_cannot_upload(researcher_client, corpus):
    page = researcher_client.get(reverse("corpus_list"))
    assert page.status_code == 200 and b"web" in page.content and b'href="/corpora/"' in page.content
    assert b"Upload a corpus" not in page.content
    assert researcher_client.get(reverse("corpus_upload")).status_code == 403
    assert researcher_client.post(reverse("corpus_upload"), {}).status_code == 403


def test_corpus_page_shows_documents_per_topic_with_a_chart(researcher_client, corpus):
    page = researcher_client.get(reverse("corpus_detail", args=[corpus.pk])).content.decode()
    assert "/static/vendor/plotly.min.js" in page and 'id="documents-per-topic"' in page
    assert 'Food &amp; Dining</a></td><td class="num">20</td>' in page
    assert 'Industrial</a></td><td class="num">40</td>' in page
    assert '(no topic)</a></td><td class="num">1</td>' in page


def _sample_ids(client, corpus, **params) -> list[str]:
    response = client.get(reverse("corpus_detail", args=[corpus.pk]), params)
    return [d.doc_id for d in response.context["sample"]]


def test_the_sample_is_seeded(researcher_client, corpus):
    first = _sample_ids(researcher_client, corpus, n=8, seed=3)
    assert len(first) == len(set(first)) == 8
    assert _sample_ids(researcher_client, corpus, n=8, seed=3) == first
    assert _sample_ids(researcher_client, corpus, n=8, seed=4) != first
    food = _sample_ids(researcher_client, corpus, n=5, seed=1, topic="food-dining")
    assert all(int(doc_id.split("-")[1]) % 3 == 0 for doc_id in food)


def test_search_by_id_url_and_text_is_paginated(researcher_client, corpus):
    url = reverse("corpus_detail", args=[corpus.pk])
    assert researcher_client.get(url, {"q": "doc-007"}).context["page"].paginator.count == 1
    assert researcher_client.get(url, {"q": "example.org/59"}).context["page"].paginator.count == 1
    knead = researcher_client.get(url, {"q": "knead the"})
    assert knead.context["page"].paginator.count == 20 and b"Page 1 of 1" not in knead.content
    bolts = researcher_client.get(url, {"q": "bolt"})
    assert bolts.context["page"].paginator.count == 40 and b"Page 1 of 2" in bolts.content
    second = researcher_client.get(url, {"q": "bolt", "page": 2})
    assert len(second.context["page"]) == 15 and "q=bolt" in second.context["query"]


def test_document_page_shows_the_whole_text(researcher_client, corpus):
    document = Document.objects.get(doc_id="doc-003")
    page = researcher_client.get(reverse("document_detail", args=[corpus.pk, document.pk]))
    assert page.status_code == 200 and document.text.encode() in page.content
    other = Corpus.objects.create(name="other")
    assert researcher_client.get(reverse("document_detail", args=[other.pk, document.pk])).status_code == 404


def _upload(client, data: bytes, name: str, **extra):
    fields = {
        "name": "uploaded",
        "id_field": "id",
        "text_field": "text",
        "url_field": "url",
        "topic_field": "topic",
        "file": SimpleUploadedFile(name, data),
        **extra,
    }
    return client.post(reverse("corpus_upload"), fields)


def test_admin_uploads_a_corpus_and_sees_the_report(admin_client_):
    assert admin_client_.get(reverse("corpus_upload")).status_code == 200
    records = [{"id": "a", "text": "one", "topic": "Health"}, {"id": "a", "text": "again"}, {"id": "b", "text": "two"}]
    response = _upload(admin_client_, jsonl_bytes(records), "docs.jsonl")
    job = CorpusImport.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("corpus_import_detail", args=[job.pk])
    page = admin_client_.get(response["Location"]).content.decode()
    assert "Done" in page and "2 documents created, 1 duplicate ids skipped" in page
    assert "docs.jsonl, line 2: id &#x27;a&#x27; (earlier in this import)" in page
    assert Corpus.objects.get(name="uploaded").n_documents == 2
    assert job.created_by == "ada"


def test_an_upload_with_bad_rows_imports_nothing_unless_asked(admin_client_):
    records = [{"id": "a", "text": "fine"}, {"id": "b", "text": ""}, {"id": "c", "text": "x", "topic": "Nope"}]
    response = _upload(admin_client_, jsonl_bytes(records), "bad.jsonl")
    page = admin_client_.get(response["Location"]).content.decode()
    assert "Failed" in page and "Nothing was imported" in page
    assert "bad.jsonl, line 2, field &#x27;text&#x27;: empty text" in page
    assert "bad.jsonl, line 3, field &#x27;topic&#x27;: unknown topic &#x27;Nope&#x27;" in page
    assert not Document.objects.exists() and not Corpus.objects.exists()
    response = _upload(admin_client_, jsonl_bytes(records), "bad.jsonl", skip_bad="on")
    page = admin_client_.get(response["Location"]).content.decode()
    assert "Done" in page and "1 documents created" in page and "2 bad rows skipped" in page
    assert list(Document.objects.values_list("doc_id", flat=True)) == ["a"]


def test_an_upload_of_an_unknown_file_type_is_refused_on_the_form(admin_client_):
    response = _upload(admin_client_, b"hello", "notes.txt")
    assert response.status_code == 400 and b"unknown file type" in response.content
    assert not CorpusImport.objects.exists()


def test_split_pages_show_the_report(researcher_client, monkeypatch):
    import numpy as np

    from mining.models import Procedure
    from mining.split_services import procedure_split

    health = Topic.objects.get(name="Health")
    for n in range(4):
        Procedure.objects.create(topic=health, goal=f"goal {n}", steps=["a", "b"], source_example_id=str(n))
    monkeypatch.setattr(
        "mining.split_services.embed_texts", lambda texts, model=None: np.eye(8, dtype=np.float32)[: len(list(texts))]
    )
    report = procedure_split(per_topic=2, seed=0)
    assert researcher_client.get(reverse("split_list")).status_code == 200
    page = researcher_client.get(reverse("split_detail", args=[report.pk])).content.decode()
    assert "Health" in page and "2 How2Bench, 2 How2Train of 4" in page
