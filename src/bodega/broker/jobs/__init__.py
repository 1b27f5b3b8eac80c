"""The broker's ``/sched`` API (docs/jobs.md): it finds each job's home and hands it the call.

``desk`` (submit, where a job lives, status, cancel), ``claims`` (claim mode),
``assignment`` (assignment mode), ``index`` (the view's jobs, pure), ``routes``.
Imports placing, auth and the view.
"""

from bodega.broker.jobs.assignment import Assignment
from bodega.broker.jobs.claims import Claims
from bodega.broker.jobs.core.index import JobIndex
from bodega.broker.jobs.desk import JobDesk
from bodega.broker.jobs.routes import jobs_routes

__all__ = ["Assignment", "Claims", "JobDesk", "JobIndex", "jobs_routes"]
