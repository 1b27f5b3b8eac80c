"""A pytest plugin for ``make fuzz``: prints how many cases ran and how many failed."""

from __future__ import annotations

import pytest

from tests.integration.broker.fuzz_kit import TALLY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.write_line(
        f"fuzz: {TALLY.cases} cases, {TALLY.failures} failures")
