"""An xdist scheduler that keeps the lanes (the real-time xdist groups) on a fixed number of workers.

Under `--dist loadgroup` every worker takes the next work unit in turn, so with four workers four lanes ran at
once: two cores shared by four real-time lanes (audio calls against an agent's clock, a bot that must keep up
with the caller's speech), and each of two fresh-clone runs failed a test on load. Three workers kept the lanes
safe but left a third of the two cores idle while the lanes waited on real time. Here at most `lanes` workers
(the first ones: gw0, gw1, ...) ever run a lane, one lane each at a time, as three workers did; any worker beyond
them runs only ungrouped tests, niced (conftest's BACKGROUND_NICE), in the time the lanes leave free. A lane
worker takes ungrouped tests too once every lane has been handed out.

xdist hands a worker its next unit when two of its tests are left (a worker starts a test only once it knows
the one after it), so a lane whose last two tests are long took the next lane minutes before it could start it:
in a run at load 25, the lines lane's worker was handed the clock lane with its two longest tests (418 s of
them) still to run, while another lane worker came free first. A lane worker is handed its next unit when its
last test is left, the latest moment that keeps it busy, while a lane is still to be handed out."""

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
        self.lanes_queued = True

    def _may_run_lanes(self, node: WorkerController) -> bool:
        # the alive workers in the order xdist numbered them: a lane worker that died is replaced by the next
        alive = sorted(self.assigned_work, key=lambda n: int(n.gateway.id.removeprefix("gw")))
        return node in alive[:self.lane_workers]

    def _lane_queued(self) -> bool:
        # once every lane is handed out none comes back: the queue is not looked through again
        self.lanes_queued = self.lanes_queued and any(scope in self.lanes for scope in self.workqueue)
        return self.lanes_queued

    def _reschedule(self, node: WorkerController) -> None:
        if (self._may_run_lanes(node) and self._pending_of(self.assigned_work[node]) > 1
                and self._lane_queued()):
            return  # its next test is not its last: a lane may still go to a lane worker free sooner
        super()._reschedule(node)

    def _assign_work_unit(self, node: WorkerController) -> None:
        if not self._may_run_lanes(node):
            scope = next((scope for scope in self.workqueue if scope not in self.lanes), None)
            if scope is None:
                return  # only lanes are left: this worker's part is done
            self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)
