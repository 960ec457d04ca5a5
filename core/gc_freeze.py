"""Long-lived processes keep what they loaded at start out of the garbage collector's sight.

A web worker holds about 200,000 objects once config.wsgi has loaded Django, the apps, the URL
configuration and the LLM client, and CPython's full (generation 2) collection walks all of
them: 73–86 ms on the machine of docs/benchmarks.md, during which every thread of the process waits
(the reward endpoint's requests, the judge loop). Full collections come every few tens of
thousands of surviving objects, so they land on requests as tail latency. ``gc.freeze()``
moves every object alive at that point to a permanent generation that collections skip; the
process's later objects are collected as before. Called once a process has loaded what it
keeps for its life: a gunicorn worker after loading the application (config/gunicorn.conf.py,
``post_worker_init``), a Celery worker after loading
the LLM executors (config/celery.py, before its pool forks, which also keeps the children from
touching those pages). What is garbage at that moment is collected first; an object alive
then and dropped later is never freed (a one-time cost bounded by what start-up loaded).

Pure: no Django."""

from __future__ import annotations

import gc


def freeze_loaded_objects() -> int:
    """Collect what is garbage now, then freeze every object left; returns how many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
