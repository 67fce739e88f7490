"""The scheduler: every LLM request of every query goes through one of these.

``Scheduler`` (in process) and the sidecar client both implement ``SchedulerClient``.
"""

from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.seu import SEU, SchedulerClient, Served, SEUResult

__all__ = ["SEU", "SEUResult", "Scheduler", "SchedulerClient", "Served"]
