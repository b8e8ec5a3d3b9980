"""The report's last section: the claims of paper B that no rule grades yet, each with the reason."""

from __future__ import annotations

from psheads.reproduction.references import NOT_TESTED
from psheads.reproduction.report.claims import Claim, Section
from psheads.reproduction.report.inputs import ReportConfig, Run


def not_tested_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("not-tested", "Claims not tested",
                      "Claims of paper B that no rule grades yet, each with the reason.")
    section.claims += [Claim(published, "—", "not tested", why) for published, why in NOT_TESTED.values()]
    return section
