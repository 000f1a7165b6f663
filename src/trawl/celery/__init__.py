"""Celery as trawl's executor: ``bind(app, celery_app)`` in the module that defines both, then
``trawl feed celery APP --max-queue N`` keeps the queues filled (docs/executors.md).

Needs the ``celery`` extra: ``pip install 'trawl[celery]'``.
"""

from trawl.celery.binding import bind, celery_name

__all__ = ["bind", "celery_name"]
