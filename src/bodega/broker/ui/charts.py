"""An app's or a machine's charts, asked of the org's PromQL API with the visitor's token.

The dashboard reads metrics as every client does: ``/prometheus/<org>/api/v1/query_range``
on the broker's own public listener (``calls.py``), so an app token sees its org's
series only, and a cluster with no metrics store says so in the charts' place.
"""

from __future__ import annotations

import asyncio
import time

from bodega.broker.ui.core.charts import SPAN, SPECS, Chart, chart, chart_queries, step
from bodega.broker.ui.gatekeeper import Visitor
from bodega.broker.ui.parts import Parts
from bodega.model.errors import BodegaError
from bodega.wire.public.prometheus import RangeAnswer, range_path


async def charts_of(parts: Parts, visitor: Visitor, app: str, machine: str | None = None
                    ) -> tuple[list[Chart], str | None]:
    """The charts, and why there are none (None: there are)."""
    api = parts.api.of(visitor.token)
    end = time.time()
    start = end - SPAN
    try:
        org = (await api.app(app)).organization.slug or "personal"
        asked = chart_queries(app, machine)

        async def one(key: str) -> RangeAnswer:
            return await api.answer(RangeAnswer, "GET", range_path(org), params={
                "query": asked[key], "start": f"{start:.3f}", "end": f"{end:.3f}",
                "step": f"{step():g}s"})

        answers = await asyncio.gather(*(one(spec.key) for spec in SPECS))
    except BodegaError as exc:
        return [], exc.message
    charts = []
    for spec, answer in zip(SPECS, answers, strict=True):
        samples = [(t, value) for series in answer.data.result[:1]
                   for t, value in series.numbers()]
        charts.append(chart(spec, samples, start, end))
    return charts, None
