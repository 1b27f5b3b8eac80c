"""A PromQL instant query's answer, as ``/prometheus/<org>/api/v1/query`` gives it
(Prometheus' shape): ``{"status", "data": {"resultType", "result": [...]}}``."""

from __future__ import annotations

from bodega.model.answer import Answer


class Sample(Answer):
    """One series of a vector: its labels and its value (``[unix time, "text"]``)."""

    metric: dict[str, str] = {}
    value: tuple[float, str] | None = None

    def number(self) -> float | None:
        if self.value is None:
            return None
        try:
            return float(self.value[1])
        except ValueError:
            return None


class QueryData(Answer):
    resultType: str = ""
    result: list[Sample] = []


class QueryAnswer(Answer):
    status: str = ""
    data: QueryData = QueryData()
    error: str | None = None


def query_path(org: str) -> str:
    return f"/prometheus/{org}/api/v1/query"
