"""The store's GPU lease and queue rows: taking GPUs, giving them back, and the FIFO of waiting runs.

``LeaseMethods`` is mixed into ``Store`` (it uses its ``_session``): every write is one transaction. Taking
GPUs deletes the leases the caller judged dead (``ltx_pipeline.gpus`` judges liveness; the store knows no
processes) and inserts the new ones together; the ``(host, gpu_uuid)`` unique constraint is what makes it
atomic, so two engines racing for one GPU never both get it, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from ltx_pipeline.store.models import Event, GpuLease, GpuWaiter

__all__ = ["Holder", "LeaseMethods"]

Holder = tuple[int, float, str]  # pid, its start time, host


class LeaseMethods:
    """GPU leases and waiters (mixed into ``Store``)."""

    _session: Callable[[], AbstractContextManager[Session]]  # Store's own: one session, one transaction

    def gpu_leases(self) -> list[GpuLease]:
        """Every lease, oldest first."""
        with self._session() as s:
            return list(s.exec(select(GpuLease).order_by(col(GpuLease.id))))

    def gpu_waiters(self) -> list[GpuWaiter]:
        """Every queue entry, first come first."""
        with self._session() as s:
            return list(s.exec(select(GpuWaiter).order_by(col(GpuWaiter.id))))

    def take_gpus(self, run_id: int, kind: str, gpus: Sequence[tuple[int, str]], holder: Holder,
                  stale: Sequence[int] = ()) -> bool:
        """Delete the ``stale`` leases, lease ``gpus`` (index, uuid) to ``run_id`` and drop its queue entry,
        all in one transaction. False (nothing changed) when another engine holds one of them.
        """
        pid, create_time, host = holder
        try:
            with self._session() as s:
                if stale:
                    s.exec(delete(GpuLease).where(col(GpuLease.id).in_(list(stale))))
                for index, uuid in gpus:
                    s.add(GpuLease(run_id=run_id, kind=kind, gpu_index=index, gpu_uuid=uuid, host=host, pid=pid,
                                   create_time=create_time))
                s.exec(delete(GpuWaiter).where(col(GpuWaiter.run_id) == run_id))
                s.add(Event(run_id=run_id, level="info", message=f"took GPU(s) {_names(gpus)} (pid {pid})"))
        except IntegrityError:
            return False
        return True

    def release_gpus(self, run_id: int, kind: str | None = None) -> int:
        """Give back every GPU ``run_id`` holds (of ``kind``, or all); the number released."""
        with self._session() as s:
            statement = delete(GpuLease).where(col(GpuLease.run_id) == run_id)
            if kind is not None:
                statement = statement.where(col(GpuLease.kind) == kind)
            released = s.exec(statement).rowcount
            if released:
                s.add(Event(run_id=run_id, level="info", message=f"released {released} GPU(s)"))
            return int(released)

    def release_some_gpus(self, run_id: int, uuids: Sequence[str]) -> int:
        """Give back the GPUs of ``uuids`` that ``run_id`` holds (a phase that uses fewer); the number released."""
        with self._session() as s:
            released = s.exec(delete(GpuLease).where(col(GpuLease.run_id) == run_id)
                              .where(col(GpuLease.gpu_uuid).in_(list(uuids)))).rowcount
            if released:
                s.add(Event(run_id=run_id, level="info", message=f"released {released} GPU(s) it no longer uses"))
            return int(released)

    def relabel_gpus(self, run_id: int, kind: str) -> None:
        """Say what ``run_id``'s leases are held for now (the phase using them)."""
        with self._session() as s:
            for lease in s.exec(select(GpuLease).where(GpuLease.run_id == run_id)):
                lease.kind = kind
                s.add(lease)

    def enter_queue(self, run_id: int, kind: str, gpus: Sequence[tuple[int, str]], holder: Holder,
                    need: int | None = None) -> GpuWaiter:
        """Queue ``run_id`` for ``need`` of ``gpus`` (all when None), or re-attach its existing entry (its place
        kept) to ``holder``."""
        pid, create_time, host = holder
        wanted = [{"index": index, "uuid": uuid} for index, uuid in gpus]
        with self._session() as s:
            row = s.exec(select(GpuWaiter).where(GpuWaiter.run_id == run_id)).first()
            if row is None:
                row = GpuWaiter(run_id=run_id, kind=kind, gpus=wanted, need=need, host=host, pid=pid,
                                create_time=create_time)
                message = f"entered the GPU queue for {need or len(gpus)} of GPU(s) {_names(gpus)}"
            else:
                row.gpus, row.need, row.host, row.pid, row.create_time = wanted, need, host, pid, create_time
                message = "re-attached to its place in the GPU queue"
            s.add(row)
            s.add(Event(run_id=run_id, level="info", message=message))
            s.flush()
            return row

    def leave_queue(self, run_id: int, why: str) -> bool:
        """Remove ``run_id``'s queue entry; False when it had none."""
        with self._session() as s:
            gone = s.exec(delete(GpuWaiter).where(col(GpuWaiter.run_id) == run_id)).rowcount
            if gone:
                s.add(Event(run_id=run_id, level="info", message=f"left the GPU queue: {why}"))
            return bool(gone)


def _names(gpus: Sequence[tuple[int, str]]) -> str:
    return ", ".join(str(index) for index, _ in gpus)
