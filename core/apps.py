from django.apps import AppConfig
from django.core.signals import setting_changed
from django.db.models.signals import post_migrate


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core: roles, page frame, local runner"

    def ready(self) -> None:
        from core.roles import roles_ensure

        post_migrate.connect(_ensure_roles, sender=self, dispatch_uid="core.roles_ensure")
        setting_changed.connect(_forget_known_secrets, dispatch_uid="core.known_secrets")
        self._roles_ensure = roles_ensure


def _ensure_roles(sender, **kwargs) -> None:
    from core.roles import roles_ensure

    roles_ensure()


def _forget_known_secrets(**kwargs) -> None:
    """Secret values are collected once per process; a changed setting (tests) recollects them."""
    from core.error_reports import known_secrets

    known_secrets.cache_clear()
