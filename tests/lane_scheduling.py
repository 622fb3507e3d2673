"""An xdist scheduler that keeps the lanes (the real-time xdist groups) on a fixed number of workers.

Under `--dist loadgroup` every worker takes the next work unit in turn, so with four workers four lanes ran at
once: two cores shared by four real-time lanes (audio calls against an agent's clock, a bot that must keep up
with the caller's speech), and each of two fresh-clone runs failed a test on load. Three workers kept the lanes
safe but left a third of the two cores idle while the lanes waited on real time. Here at most `lanes` workers
(the first ones: gw0, gw1, ...) ever run a lane, one lane each at a time, as three workers did; any worker beyond
them runs only ungrouped tests, niced (conftest's BACKGROUND_NICE), in the time the lanes leave free. A lane
worker takes ungrouped tests too once every lane has been handed out."""

from __future__ import annotations

from collections.abc import Collection

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController


class LaneScheduling(LoadGroupScheduling):
    def __init__(self, config: pytest.Config, log: Producer | None, *, lanes: Collection[str],
                 lane_workers: int) -> None:
        super().__init__(config, log)
        self.lanes = frozenset(lanes)
        self.lane_workers = lane_workers

    def _may_run_lanes(self, node: WorkerController) -> bool:
        # the alive workers in the order xdist numbered them: a lane worker that died is replaced by the next
        alive = sorted(self.assigned_work, key=lambda n: int(n.gateway.id.removeprefix("gw")))
        return node in alive[:self.lane_workers]

    def _assign_work_unit(self, node: WorkerController) -> None:
        if not self._may_run_lanes(node):
            scope = next((scope for scope in self.workqueue if scope not in self.lanes), None)
            if scope is None:
                return  # only lanes are left: this worker's part is done
            self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)
