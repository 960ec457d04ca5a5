from django.apps import AppConfig
from django.db.models.signals import post_migrate


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core: roles, page frame, local runner"

    def ready(self) -> None:
        from core.roles import roles_ensure

        post_migrate.connect(_ensure_roles, sender=self, dispatch_uid="core.roles_ensure")
        self._roles_ensure = roles_ensure


def _ensure_roles(sender, **kwargs) -> None:
    from core.roles import roles_ensure

    roles_ensure()
