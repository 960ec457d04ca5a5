from django.core.management.base import BaseCommand

from core.demo import demo_loaders


class Command(BaseCommand):
    help = "Load the demo data drawn from the papers' own examples (idempotent)."

    def handle(self, *args, **options) -> None:
        for label, loader in demo_loaders():
            summary = loader()
            self.stdout.write(f"demo [{label}]: {summary}")
