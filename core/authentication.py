"""API authentication with the product's own tokens: ``Authorization: Token <secret>``, as
before, now checked against a stored SHA-256 digest, with an expiry."""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from core.selectors import api_token_get_by_secret
from core.services import api_token_mark_used


class ApiTokenAuthentication(TokenAuthentication):
    """DRF's header parsing and ``WWW-Authenticate: Token`` (so a call without credentials
    gets 401), with the lookup replaced: the secret is hashed and its digest looked up."""

    keyword = "Token"

    def authenticate_credentials(self, key):
        token = api_token_get_by_secret(secret=key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if token.is_expired:
            raise exceptions.AuthenticationFailed("Token expired; create a new one on your account page.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        api_token_mark_used(token=token)
        return token.user, token
