"""What tamesu's own model calls spent: dollars and tokens by purpose, per run, against the run's budget.

One `Ledger` per `tamesu run`; the engine opens a `scope()` per test run so each run can report its own
`llm_cost_usd` and `llm_tokens`, while every charge also counts toward the whole run's budget.
Charges come from many conversations at once (asyncio tasks, and the odd thread), so totals sit behind a lock;
nothing inside the lock awaits.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tamesu.errors import BudgetExceeded
from tamesu.models.base import ModelResponse
from tamesu.models.spec import BudgetSpec


@dataclass
class Totals:
    usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    """Calls answered by a provider (each one spent something)."""
    cached_calls: int = 0
    """Calls answered from the replay cache (free)."""
    fake_calls: int = 0
    """Of `calls`, those the fake provider answered by its rules (no model, nothing spent)."""
    retries: int = 0
    """Calls made again after a retryable failure (rate limit, 5xx, timeout)."""
    timeouts: int = 0
    """Calls that got no answer within the model's timeout (retried or not)."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, response: ModelResponse) -> None:
        if response.cached:
            self.cached_calls += 1
            return
        self.calls += 1
        self.fake_calls += int(response.fake)
        self.usd += response.cost_usd
        self.input_tokens += response.usage.input_tokens
        self.output_tokens += response.usage.output_tokens


@dataclass
class _State:
    total: Totals = field(default_factory=Totals)
    by_purpose: dict[str, Totals] = field(default_factory=dict)


class Ledger:
    """Totals of model spending. `charge` raises BudgetExceeded once the budget is passed."""

    def __init__(self, budget: BudgetSpec | None = None, *, parent: Ledger | None = None) -> None:
        self.budget = budget or BudgetSpec()
        self._parent = parent
        self._lock = threading.Lock()
        self._state = _State()
        self._exceeded: str | None = None

    # ---- reading -------------------------------------------------------------------------------------

    @property
    def exceeded(self) -> bool:
        """Whether this ledger's own budget has been passed (not a sub-ledger's)."""
        with self._lock:
            return self._exceeded is not None

    @property
    def usd(self) -> float:
        with self._lock:
            return self._state.total.usd

    @property
    def tokens(self) -> int:
        with self._lock:
            return self._state.total.tokens

    def totals(self) -> Totals:
        """A copy of the totals over every purpose."""
        with self._lock:
            return Totals(**vars(self._state.total))

    def by_purpose(self) -> dict[str, Totals]:
        """A copy of the totals per purpose (`simulator`, `judge`, `extract`, `target`...)."""
        with self._lock:
            return {purpose: Totals(**vars(t)) for purpose, t in self._state.by_purpose.items()}

    # ---- spending ------------------------------------------------------------------------------------

    def scope(self) -> Ledger:
        """A sub-ledger (one test run) with its own totals; what it is charged is charged here too, and this
        ledger's budget decides. A scope has no budget of its own."""
        return Ledger(parent=self)

    def charge(self, response: ModelResponse, purpose: str = "unknown") -> None:
        """Count one answer. Cached answers count as calls but cost nothing. Raises BudgetExceeded when the
        total (here or in a parent) is now over budget; the answer is counted all the same, since it was paid."""
        with self._lock:
            self._state.total.add(response)
            self._state.by_purpose.setdefault(purpose, Totals()).add(response)
            if not response.cached and self._exceeded is None:
                self._exceeded = self._over()
            # what was spent by now, calls that were out when the budget was passed included (said as it was
            # at the first call past it, a run that spent twice its budget said less)
            exceeded = self._over() if self._exceeded is not None else None
        if self._parent is not None:
            self._parent.charge(response, purpose)
        if exceeded and not response.cached:
            raise BudgetExceeded(exceeded)

    def note(self, *, retry: bool = False, timeout: bool = False) -> None:
        """Count a retry or a timeout of a model call, here and in every parent."""
        ledger: Ledger | None = self
        while ledger is not None:
            with ledger._lock:
                ledger._state.total.retries += int(retry)
                ledger._state.total.timeouts += int(timeout)
            ledger = ledger._parent

    def ensure_open(self) -> None:
        """Raise BudgetExceeded if the budget is already spent, before paying for another call."""
        ledger: Ledger | None = self
        while ledger is not None:
            # `_exceeded` is set once and never unset: while it is None (every call of a run within its budget)
            # the lock is not taken, twice a model call and ledger
            if ledger._exceeded is not None:
                with ledger._lock:
                    exceeded = ledger._over()
                if exceeded:
                    raise BudgetExceeded(exceeded)
            ledger = ledger._parent

    def _over(self) -> str | None:
        total = self._state.total
        if self.budget.usd is not None and total.usd > self.budget.usd:
            return f"budget of ${self.budget.usd:g} exceeded: spent ${dollars(total.usd)}"
        if self.budget.tokens is not None and total.tokens > self.budget.tokens:
            return f"budget of {self.budget.tokens} tokens exceeded: spent {total.tokens} tokens"
        return None


def dollars(usd: float) -> str:
    """A sum as people read it, without the `$`."""
    # cents for ordinary sums, the digits that matter of the tiny sums of small models and tests, no trailing
    # zeros either way ($0.012 and $0.0033, not $0.0120 and $0.003300)
    text = f"{usd:.4f}" if usd >= 0.01 else f"{usd:.6f}"
    whole, _, cents = text.partition(".")
    return f"{whole}.{cents.rstrip('0').ljust(2, '0')}"
