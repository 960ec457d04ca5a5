"""The local runner behind `make run`: migrate, demo data, admin account, then the web
server, one Celery worker and the Celery scheduler (beat) side by side until Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from core.services import local_admin_ensure
from core.workers import queues_by_name

STOP_GRACE_SECONDS = 15


class Command(BaseCommand):
    help = "Prepare the database and run the web server with one Celery worker and the scheduler (Ctrl-C stops all)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"))
        parser.add_argument("--concurrency", type=int, default=int(os.environ.get("WORKER_CONCURRENCY", "2")))
        parser.add_argument("--no-demo", action="store_true", help="do not load the demo data")

    @staticmethod
    def address_export(options: dict) -> None:
        """HOST and PORT as given on the command line, for what builds this server's address
        (annotate.links.default_base_url: the demo's annotator link, and a Prolific draft made
        by the worker or scheduler without PROLIFIC_SITE_URL); the children inherit them."""
        os.environ["HOST"] = str(options["host"])
        os.environ["PORT"] = str(options["port"])

    def handle(self, *args, **options) -> None:
        self.address_export(options)
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database is up to date.")
        if not options["no_demo"]:
            call_command("load_demo", stdout=self.stdout)
        if not settings.DEBUG:
            call_command("collectstatic", interactive=False, verbosity=0)
        self._announce_admin()

        address = f"{options['host']}:{options['port']}"
        children = {name: subprocess.Popen(command) for name, command in self.commands(options).items()}
        self.stdout.write(
            self.style.SUCCESS(f"Serving http://{address}/ (Ctrl-C stops the server, the worker and the scheduler)")
        )
        exit_code = self._supervise(children)
        sys.exit(exit_code)

    @staticmethod
    def commands(options: dict) -> dict[str, list[str]]:
        """The processes `serve` runs side by side: the web server, one Celery worker, and the
        scheduler (celery beat: the periodic tasks of CELERY_BEAT_SCHEDULE, such as the Prolific
        sync, with its state file under var/)."""
        manage = str(settings.BASE_DIR / "manage.py")
        schedule = settings.VAR_DIR / "celery" / "beat-schedule"
        schedule.parent.mkdir(parents=True, exist_ok=True)
        return {
            "web": [sys.executable, manage, "runserver", f"{options['host']}:{options['port']}", "--noreload"],
            "worker": [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                str(options["concurrency"]),
                "--hostname",
                f"local-{os.getpid()}@%h",
                "--queues",
                ",".join(queues_by_name()),  # every kind of work, whatever its queue is called
            ],
            "beat": [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                str(schedule),
            ],
        }

    def _announce_admin(self) -> None:
        created = local_admin_ensure()
        if created.password:
            bar = "=" * 64
            self.stdout.write(
                f"{bar}\nLocal admin account created.\n  username: {created.username}\n"
                f"  password: {created.password}\nIt is printed only this once; "
                f"change it with `python manage.py changepassword {created.username}`.\n{bar}"
            )
        else:
            self.stdout.write(
                f"Admin account {created.username!r} exists (its password was printed when it was "
                f"created; reset it with `python manage.py changepassword {created.username}`)."
            )

    def _supervise(self, children: dict[str, subprocess.Popen]) -> int:
        stopping = {"requested": False}

        def request_stop(signum, frame) -> None:
            stopping["requested"] = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        exit_code = 0
        while not stopping["requested"]:
            for name, child in children.items():
                if child.poll() is not None:
                    self.stderr.write(f"The {name} process exited with code {child.returncode}; stopping.")
                    exit_code = child.returncode or 1
                    stopping["requested"] = True
                    break
            time.sleep(0.5)
        self.stdout.write("Stopping the web server, the worker and the scheduler ...")
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in children.values():
            remaining = max(0.1, deadline - time.monotonic())
            try:
                child.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self.stdout.write("Stopped.")
        return exit_code
