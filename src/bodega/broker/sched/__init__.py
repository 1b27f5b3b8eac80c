"""The broker's ``/sched`` API (docs/jobs.md): it finds each job's home and hands it the call.

``desk`` (submit, where a job lives, status, cancel), ``claims`` (claim mode),
``assignment`` (assignment mode), ``job_index`` (the view's jobs, pure),
``routes``.
"""

from bodega.broker.sched.assignment import Assignment
from bodega.broker.sched.claims import Claims
from bodega.broker.sched.desk import JobDesk
from bodega.broker.sched.job_index import JobIndex
from bodega.broker.sched.routes import sched_routes

__all__ = ["Assignment", "Claims", "JobDesk", "JobIndex", "sched_routes"]
