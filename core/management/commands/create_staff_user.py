from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError

from core.roles import ROLES
from core.services import user_create


class Command(BaseCommand):
    help = "Create a staff account (admin or researcher) and print its random password once."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=ROLES, required=True)
        parser.add_argument("--email", default="")

    def handle(self, *args, **options) -> None:
        try:
            created = user_create(username=options["username"], role=options["role"], email=options["email"])
        except IntegrityError as exc:
            raise CommandError(f"user {options['username']!r} already exists") from exc
        self.stdout.write(
            f"Created {options['role']} {created.username!r} with password: {created.password}\n"
            "It is shown only now; change it with `python manage.py changepassword`."
        )
