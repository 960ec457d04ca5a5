"""Models of the core app: API tokens.

A token's secret is shown once, when it is created, and never stored: the row keeps its
SHA-256 digest (to find it) and its first characters (to tell tokens apart on the account page
and in the admin). A token expires, and can be revoked (its row deleted)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

API_TOKEN_LABEL_MAX_LENGTH = 100


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    label = models.CharField(
        max_length=API_TOKEN_LABEL_MAX_LENGTH, blank=True, help_text="What the token is for, e.g. a script's name."
    )
    prefix = models.CharField(max_length=16, db_index=True, help_text="The secret's first characters, to recognise it.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the secret, in hex.")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()
