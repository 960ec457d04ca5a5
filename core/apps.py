from django.apps import AppConfig
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.core.signals import setting_changed
from django.db.models.signals import post_migrate, pre_save


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core: roles, page frame, local runner"

    def ready(self) -> None:
        from core.login_throttle import login_failure_count
        from core.roles import roles_ensure

        post_migrate.connect(_ensure_roles, sender=self, dispatch_uid="core.roles_ensure")
        setting_changed.connect(_forget_known_secrets, dispatch_uid="core.known_secrets")
        user_login_failed.connect(login_failure_count, dispatch_uid="core.login_address")
        pre_save.connect(_revoke_tokens_on_new_password, sender=settings.AUTH_USER_MODEL, dispatch_uid="core.tokens")
        self._roles_ensure = roles_ensure


def _ensure_roles(sender, **kwargs) -> None:
    from core.roles import roles_ensure

    roles_ensure()


def _forget_known_secrets(**kwargs) -> None:
    """Secret values are collected once per process; a changed setting (tests) recollects them."""
    from core.error_reports import known_secrets

    known_secrets.cache_clear()


def _revoke_tokens_on_new_password(sender, instance, raw=False, update_fields=None, **kwargs) -> None:
    """A changed password (admin form, ``changepassword``, any save) revokes the user's API
    tokens, as it ends their other sessions: whoever held the old password may have made one."""
    if raw or instance.pk is None or (update_fields is not None and "password" not in update_fields):
        return
    from core.services import api_tokens_revoke_all

    stored = sender._default_manager.filter(pk=instance.pk).values_list("password", flat=True).first()
    if stored is not None and stored != instance.password:
        api_tokens_revoke_all(user=instance)
