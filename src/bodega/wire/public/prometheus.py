"""PromQL answers as ``/prometheus/<org>/api/v1/query`` and ``query_range`` give them
(Prometheus' shape): ``{"status", "data": {"resultType", "result": [...]}}``, a vector of
samples or a matrix of series."""

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


class Series(Answer):
    """One series of a matrix: its labels and its values (``[[unix time, "text"], ...]``)."""

    metric: dict[str, str] = {}
    values: list[tuple[float, str]] = []

    def numbers(self) -> list[tuple[float, float]]:
        found = []
        for at, text in self.values:
            try:
                found.append((at, float(text)))
            except ValueError:
                continue
        return found


class RangeData(Answer):
    resultType: str = ""  # Prometheus' own key
    result: list[Series] = []


class RangeAnswer(Answer):
    status: str = ""
    data: RangeData = RangeData()
    error: str | None = None


def query_path(org: str) -> str:
    return f"/prometheus/{org}/api/v1/query"


def range_path(org: str) -> str:
    return f"/prometheus/{org}/api/v1/query_range"
