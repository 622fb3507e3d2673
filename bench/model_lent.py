"""What one lent model client costs (`models/_lease.py`: one per model call in flight, so up to 1000 at 1000
conversations at once): the time to make one, best of 7 rounds of 500, and the memory 1000 of them hold
(tracemalloc), for each provider; and whether making them imported a provider SDK.

    python bench/model_lent.py            (PYTHONPATH=<another checkout's src> for that commit's figures)
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from tamesu.models.anthropic import AnthropicProvider
from tamesu.models.openai import OpenAIProvider


def best(make: Callable[[], Any], count: int = 500, rounds: int = 7) -> float:
    fastest = float("inf")
    for _ in range(rounds):
        made = []
        started = time.perf_counter()
        for _ in range(count):
            made.append(make())
        fastest = min(fastest, (time.perf_counter() - started) / count)
    return fastest


def main() -> None:
    for kind in (OpenAIProvider, AnthropicProvider):
        make = kind("m", api_key="bench-key", base_url="http://127.0.0.1:9/v1")._thin._make
        seconds = best(make)
        gc.collect()
        tracemalloc.start()
        kept = [make() for _ in range(1000)]
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"{kind.__name__}: a lent client {seconds * 1e6:.0f} us, 1000 of them hold {held / 2**20:.2f} MiB"
              f" ({len(kept)} made)")
    print("provider SDKs imported:", [name for name in ("openai", "anthropic") if name in sys.modules] or "none")


if __name__ == "__main__":
    main()
