"""The feeder's view of a Celery broker: a queue's live length, and publishing jobs to it.

One connection and one channel for both, with publisher confirms: RabbitMQ answers a
passive declare on a channel after the messages published before it on that channel, so
a length read right after a publish counts them, and the cap holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from celery import Celery

from trawl.celery.binding import EXECUTOR, celery_name

MESSAGE_ID = "trawl-{job}-{attempt}"  # the Celery task id: one per attempt of a job


class CeleryBroker:
    executor = EXECUTOR

    def __init__(self, celery_app: Celery) -> None:
        self.celery = celery_app
        self._connection: Any = None
        self._channel: Any = None
        self._declared: set[str] = set()

    def length(self, queue: str) -> int:
        """Messages ready in *queue* (declared with Celery's settings if missing)."""
        with self._reopened_after_error():
            channel = self._open()
            self._declare(queue, channel)
            _, count, _ = channel.queue_declare(queue=queue, passive=True)
            return int(count)

    def publish(self, queue: str, task: str, jobs: Sequence[tuple[int, int]]) -> None:
        with self._reopened_after_error():
            channel = self._open()
            self._declare(queue, channel)
            producer = self.celery.amqp.Producer(channel)
            for job_id, attempt in jobs:
                self.celery.send_task(
                    celery_name(task),
                    args=(job_id, attempt),
                    task_id=MESSAGE_ID.format(job=job_id, attempt=attempt),
                    queue=queue,
                    producer=producer,
                )

    @contextlib.contextmanager
    def _reopened_after_error(self) -> Iterator[None]:
        """A failed call may leave the channel broken: the next one opens a new connection."""
        try:
            yield
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(Exception):  # a broken connection may fail to close
                self._connection.release()
        self._connection = self._channel = None
        self._declared.clear()

    def _open(self) -> Any:
        if self._channel is None:
            try:
                self._connection = self.celery.connection_for_write(
                    transport_options={"confirm_publish": True}
                )
                self._connection.ensure_connection(max_retries=1)
                self._channel = self._connection.default_channel
            except Exception:
                self.close()
                raise
        return self._channel

    def _declare(self, queue: str, channel: Any) -> None:
        if queue not in self._declared:
            self.celery.amqp.queues.select_add(queue)
            self.celery.amqp.queues[queue](channel).declare()
            self._declared.add(queue)
