"""`tamesu run --shard K/N`: split the tests over N CI jobs so that every test runs in exactly one of them.

A test's shard depends on its id alone (a hash of `suite/name`), never on the other tests or their order:
adding or removing a test moves no other test, and the same test lands in the same shard on every machine
and every run, which keeps per-shard timing history and `--baseline` comparisons meaningful. The price is
that small suites split unevenly (a shard may even be empty, which is a valid, empty run).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar


class ShardError(ValueError):
    pass


@dataclass(frozen=True)
class Shard:
    index: int
    """From 1."""
    total: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        left, sep, right = text.partition("/")
        try:
            index, total = int(left), int(right)
        except ValueError:
            raise ShardError(f"--shard takes K/N, such as 2/5 (got {text!r})") from None
        if not sep or total < 1 or not 1 <= index <= total:
            raise ShardError(f"--shard K/N needs 1 <= K <= N (got {text!r})")
        return cls(index, total)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Shard:
        """`--shard auto`: a Kubernetes Indexed Job's pod knows its index (JOB_COMPLETION_INDEX, from 0);
        the count is the Job's `completions`, which the pod is told as TAMESU_SHARD_COUNT."""
        index, total = environ.get("JOB_COMPLETION_INDEX"), environ.get("TAMESU_SHARD_COUNT")
        if index is None or total is None:
            missing = " and ".join(n for n, v in (("JOB_COMPLETION_INDEX", index), ("TAMESU_SHARD_COUNT", total))
                                   if v is None)
            raise ShardError(f"--shard auto reads JOB_COMPLETION_INDEX (set by an Indexed Job) and "
                             f"TAMESU_SHARD_COUNT (the Job's completions): {missing} not set")
        try:
            number, count = int(index), int(total)
        except ValueError:
            raise ShardError(f"--shard auto: JOB_COMPLETION_INDEX={index!r} and TAMESU_SHARD_COUNT={total!r} "
                             "must be whole numbers") from None
        if count < 1 or not 0 <= number < count:
            raise ShardError(f"--shard auto: JOB_COMPLETION_INDEX={number} is not below TAMESU_SHARD_COUNT={count}")
        return cls(number + 1, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def shard_of(test_id: str, total: int) -> int:
    """The shard (from 1) a test id belongs to among `total`; sha256 so it is the same on every platform."""
    digest = hashlib.sha256(test_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % total + 1


def selection(test_ids: Iterable[str]) -> str:
    """What a run chose before `--shard` took its share, as `COUNT:DIGEST`: every shard of one split must have
    chosen the same tests (suites, `--filter`, `--tags`), or some tests are in no shard's share."""
    ids = sorted(set(test_ids))
    return f"{len(ids)}:" + hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()[:16]


def in_shard(test_id: str, shard: Shard) -> bool:
    return shard_of(test_id, shard.total) == shard.index


_T = TypeVar("_T")


def select(tests: Iterable[_T], shard: Shard, key: str = "id") -> list[_T]:
    """The tests of one shard, in their original order; `key` names the attribute holding the test id."""
    return [t for t in tests if in_shard(getattr(t, key), shard)]
