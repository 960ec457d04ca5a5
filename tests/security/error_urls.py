"""Views that fail on purpose, for the error-page tests (test_settings_hardening.py) only:
pulled in with ``@pytest.mark.urls``, never part of the product's URLs."""

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.urls import path

from config.urls import handler400  # noqa: F401  (Django looks the handlers up on this module)
from config.urls import urlpatterns as product_urlpatterns


@login_not_required
def broker_down(request):
    broker_url = settings.CELERY_BROKER_URL  # a local variable the technical page lists
    llm_endpoint = settings.LLM_DEFAULT_ENDPOINT["base_url"]
    raise RuntimeError(f"could not reach {broker_url} (results: {settings.CELERY_RESULT_BACKEND}, llm: {llm_endpoint})")


@login_not_required
def bad_value(request):
    raise BadRequest("steps: expected a list of at most 15 steps")


@login_not_required
def suspicious(request):
    raise SuspiciousOperation("internal detail: the session store at /srv/private/sessions")


urlpatterns = [
    path("boom/", broker_down),
    path("bad/", bad_value),
    path("suspicious/", suspicious),
    *product_urlpatterns,  # the page frame links to the product's pages
]
