import os
import socket

from celery import shared_task


@shared_task(name="core.ping")
def ping() -> dict:
    """Answer from a worker process: proves that the broker and a worker are alive."""
    return {"pid": os.getpid(), "hostname": socket.gethostname()}
