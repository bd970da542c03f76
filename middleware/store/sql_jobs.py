"""The failed-run queue's rows (`jobs.JobStore`) in SQL written once: submit, claim, renew and finish a job.

A claim is one statement, so the pick and the claim cannot be split by another
writer; on PostgreSQL the pick skips rows another worker holds (``FOR UPDATE
SKIP LOCKED``), so workers never wait on one another and never claim the same
job. Leases use the dialect's clock (the database's on PostgreSQL), so the
machines' clocks need not agree.
"""

from __future__ import annotations

from typing import Generic

from .dialect import JOB_LOCKS, C, Dialect, upsert
from .ids import stored_id
from .jobs import JOB_COLUMNS, Job, job_row, next_submission
from .redact import redact_text

_JOB_SELECT = f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs"
# Jobs whose leases ran out `max_attempts` times in a row of claims are given up (a run that kills every worker).
_GIVE_UP = (
    "UPDATE jobs SET state = 'error', finished_at = ?, runs = runs + 1, lease_until = NULL, lost = lost + 1,"
    " error = 'gave up after ' || attempts || ' attempts: the lease of ' || worker || ' ran out ' || (lost + 1) || ' time(s)'"
    " WHERE trace_id IN (SELECT trace_id FROM jobs WHERE state = 'running' AND lease_until < ? AND lost + 1 >= ?{skip_locked})"
)
_CLAIM = (
    "UPDATE jobs SET state = 'running', worker = ?, attempts = attempts + 1,"
    " lost = lost + CASE WHEN state = 'running' THEN 1 ELSE 0 END, lease_until = ?, started_at = ?"
    " WHERE trace_id = (SELECT trace_id FROM jobs WHERE (state = 'queued' AND not_before <= ?)"
    " OR (state = 'running' AND lease_until < ?) ORDER BY queued_at, trace_id LIMIT 1{skip_locked})"
    f" RETURNING {', '.join(JOB_COLUMNS)}"
)
# The holder of a job is named by its worker and its claim (attempts: the fencing token).
_HELD = "trace_id = ? AND state = 'running' AND worker = ? AND attempts = ?"


class JobsSQL(Generic[C]):
    _d: Dialect[C]

    def get_job(self, trace_id: str) -> Job | None:
        with self._d.read() as conn:
            row = self._d.execute(conn, _JOB_SELECT + " WHERE trace_id = ?", [stored_id(trace_id)]).fetchone()
        return None if row is None else Job.from_row(row)

    def job_counts(self) -> dict[str, int]:
        with self._d.read() as conn:
            return dict(self._d.execute(conn, "SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())

    def submit_job(self, trace_id: str, *, hold: bool = False, again: bool = False, max_queued: int | None = None, drop_reason: str | None = None) -> Job:
        sid = stored_id(trace_id)
        with self._d.write() as conn:
            self._d.lock(conn, JOB_LOCKS, sid)
            row = self._d.execute(conn, _JOB_SELECT + " WHERE trace_id = ?", [sid]).fetchone()
            current = None if row is None else Job.from_row(row)
            queued = self._d.execute(conn, "SELECT COUNT(*) FROM jobs WHERE state = 'queued'").fetchone()[0] if max_queued is not None else 0
            job = next_submission(current, sid, self._d.now(conn), hold=hold, queued=queued, max_queued=max_queued, drop_reason=drop_reason, again=again)
            if job is None:
                assert current is not None
                return current
            upsert(self._d, conn, "jobs", job_row(job), ("trace_id",))
            return job

    def claim_job(self, worker: str, *, lease: float, max_attempts: int) -> Job | None:
        skip = {"skip_locked": self._d.skip_locked}
        with self._d.write() as conn:
            now = self._d.now(conn)
            self._d.execute(conn, _GIVE_UP.format(**skip), [now, now, max_attempts])
            rows = self._d.execute(conn, _CLAIM.format(**skip), [worker, now + lease, now, now, now]).fetchall()
        return Job.from_row(rows[0]) if rows else None

    def renew_job(self, job: Job, *, lease: float) -> bool:
        with self._d.write() as conn:
            return self._held(conn, job, "lease_until = ?", [self._d.now(conn) + lease])

    def finish_job(self, job: Job, *, error: str | None = None, retry_in: float | None = None) -> bool:
        state = "done" if error is None else ("queued" if retry_in is not None else "error")
        with self._d.write() as conn:
            now = self._d.now(conn)
            return self._held(conn, job, "state = ?, error = ?, runs = runs + 1, lease_until = NULL, finished_at = ?, not_before = ?",
                              [state, None if error is None else redact_text(error), now, now + (retry_in or 0.0)])

    def _held(self, conn: C, job: Job, assignments: str, values: list[object]) -> bool:
        """Set columns of `job`'s row if `job` still holds it (False: its lease was lost to another claim)."""
        rows = self._d.execute(conn, f"UPDATE jobs SET {assignments} WHERE {_HELD} RETURNING trace_id",
                               [*values, stored_id(job.trace_id), job.worker, job.attempts]).fetchall()
        return len(rows) == 1
