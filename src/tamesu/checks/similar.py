"""`similar_to`: the agent said something close in meaning to an expected text, worded however it likes.

`similar_to: "Your refund arrives in 5 business days"` or `{value, min: 0.7, method: lexical|embedding}`.
The value is a template (`{{captured.eta}}`). The agent turns in scope are each compared with it and the
best-scoring turn decides: an agent says the thing once, in one turn, and the turns around it (greetings,
follow-up questions) should not dilute it. `on_turn` narrows the comparison to one turn.

`lexical` (the default, no dependency) is the cosine similarity of two bags of words:
- lowercased, split on anything that is not a letter or digit, `n't`/`cannot` read as `not`, so "can't" and
  "cannot" are one word and a negation is never lost;
- common English function words dropped (the, you, is, to...; never `not`, `no` or `never`), because they
  make any two English sentences look alike: unrelated answers score near 0 instead of 0.3;
- a crude suffix fold (`-ing`, `-ed`, `-es`, `-s`, `-e`), so refund/refunds/refunded count as one word;
- each word counts 1 and each pair of adjacent words counts 0.5: shared phrasing is rewarded, but a
  paraphrase that reorders a sentence is not punished as hard as an edit distance (difflib) would.
Close paraphrases score about 0.7 to 1, unrelated texts about 0. Lexical similarity cannot see that "was
moved" and "could not be moved" disagree (about 0.8): for facts use `contains` or `judge`.

`embedding` compares embeddings instead (cosine). `embedding_model` names a model under `models:` whose provider
has an embeddings API (openai, azure; the fake provider's vectors count shared words), asked through the replay
cache, retries and ledger as every model call; or a sentence-transformers model name or local path, run here
(the optional extra `tamesu[embeddings]`). An embedding model that cannot answer is the test's error, not a
failure of the agent.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import itertools
import math
import re
import threading
from collections.abc import Hashable, Sequence
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tamesu.checks._compare import template_failed
from tamesu.checks._quote import quote
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.errors import InfraError, TemplateError
from tamesu.matching import number_text, shown
from tamesu.models.base import EmbeddingModels, ModelError
from tamesu.plugins import register
from tamesu.suite.schema import Strict
from tamesu.types import YamlFloat

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
NEEDS_EXTRA = ("embedding similarity needs embedding_model naming a model under models: (an openai, azure or fake "
               "one), or the optional extra tamesu[embeddings] for a sentence-transformers model")

_WORD = re.compile(r"[^\W_]+(?:[.,]\d+)*")  # letters or digits; 4.50 and 1,000 stay one word
_NOT = (re.compile(r"\bcannot\b"), re.compile(r"n't\b"))
_CLITICS = {"s", "ll", "re", "ve", "d", "m", "t"}  # what is left of you'll, I'm, it's once split
_SUFFIXES = ("ing", "ed", "es", "s", "e")
_BIGRAM_WEIGHT = 0.5

_FUNCTION_WORDS = """
a an the and or but if then so of to in on at by for with within from as into onto about over until
i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
is am are was were be been being do does did have has had will would shall should can could may might must
this that these those there here which who whom what
just also very really please ok okay
"""
STOPWORDS = frozenset(_FUNCTION_WORDS.split())


def _fold(word: str) -> str:
    if any(ch.isdigit() for ch in word):
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not (suffix == "s" and word.endswith("ss")):
            return word[: -len(suffix)]
    return word


def words(text: str, *, drop_stopwords: bool = True) -> list[str]:
    """The words lexical similarity compares, in order."""
    lowered = text.lower().replace("\u2019", "'")
    lowered = _NOT[1].sub(" not", _NOT[0].sub("can not", lowered))
    found = [w for w in _WORD.findall(lowered) if w not in _CLITICS]
    if drop_stopwords:
        found = [w for w in found if w not in STOPWORDS]
    return [_fold(w) for w in found]


def _bag(tokens: list[str]) -> dict[Hashable, float]:
    bag: dict[Hashable, float] = {}
    for token in tokens:
        bag[token] = bag.get(token, 0.0) + 1.0
    for pair in itertools.pairwise(tokens):
        bag[pair] = bag.get(pair, 0.0) + _BIGRAM_WEIGHT
    return bag


def _cosine(a: dict[Hashable, float], b: dict[Hashable, float]) -> float:
    dot = sum(weight * b.get(key, 0.0) for key, weight in a.items())
    norm = math.sqrt(sum(w * w for w in a.values())) * math.sqrt(sum(w * w for w in b.values()))
    return dot / norm if norm else 0.0


def lexical_similarity(a: str, b: str) -> float:
    """0..1: how much two texts share their words and word pairs (see the module docstring)."""
    left, right = words(a), words(b)
    if not left or not right:
        # "Can you do that?" is all function words: then compare them rather than nothing.
        left, right = words(a, drop_stopwords=False), words(b, drop_stopwords=False)
    if not left and not right:
        return 1.0 if a.strip() == b.strip() else 0.0
    return round(min(1.0, _cosine(_bag(left), _bag(right))), 4)


# ---------------------------------------------------------------- embeddings (optional)


def embeddings_available() -> bool:
    """Whether the optional extra is installed; looked up without importing it (it pulls in torch)."""
    return importlib.util.find_spec("sentence_transformers") is not None


_loaded: dict[str, object] = {}
_loading = threading.Lock()


def _embedder(name: str) -> Any:
    with _loading:  # two checks in two threads must not load the same model twice
        if name not in _loaded:
            module = importlib.import_module("sentence_transformers")
            _loaded[name] = module.SentenceTransformer(name)
        return _loaded[name]


def _embedding_scores(model_name: str, expected: str, texts: Sequence[str]) -> list[float]:
    model = _embedder(model_name)
    vectors = model.encode([expected, *texts], normalize_embeddings=True)
    reference = [float(x) for x in vectors[0]]
    return [round(max(0.0, min(1.0, sum(r * float(x) for r, x in zip(reference, vec, strict=True)))), 4)
            for vec in vectors[1:]]


async def embedding_similarity(model_name: str, expected: str, texts: Sequence[str]) -> list[float]:
    """0..1 cosine of `expected` with each text; the model runs in a thread so the run's loop keeps going."""
    return await asyncio.to_thread(_embedding_scores, model_name, expected, list(texts))


# ---------------------------------------------------------------- the check


class SimilarSpec(Strict):
    value: str = Field(min_length=1)
    """The expected text, a template."""
    min: YamlFloat = Field(0.7, ge=0, le=1)
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    """method: embedding only: a model under `models:` with an embeddings API (openai, azure, fake), or a
    sentence-transformers model name or local path (the optional extra tamesu[embeddings])."""
    method: Literal["lexical", "embedding"] = "lexical"

    @field_validator("method")
    @classmethod
    def _runnable(cls, method: str, info: ValidationInfo) -> str:
        # the default model is sentence-transformers': without the extra, nothing could run it (a model under
        # models: is checked where the suite's models are known)
        if method == "embedding" and info.data.get("embedding_model") == DEFAULT_EMBEDDING_MODEL \
                and not embeddings_available():
            raise ValueError(NEEDS_EXTRA)
        return method

    @model_validator(mode="after")
    def _coherent(self) -> SimilarSpec:
        if "embedding_model" in self.model_fields_set and self.method != "embedding":
            raise ValueError("embedding_model is for method: embedding")
        return self


@register("checks", "similar_to")
class SimilarTo(Check[SimilarSpec]):
    """The best agent turn in scope is at least `min` similar to the expected text."""

    key = "similar_to"
    Spec = SimilarSpec
    shorthand = "value"
    spec: SimilarSpec

    async def evaluate(self, run: RunView) -> Verdict:
        try:
            expected = run.context.render_text(self.spec.value)
        except TemplateError as exc:
            return template_failed(exc)
        turns = [(e.index, e.agent.text) for e in run.exchanges if e.agent.text.strip()]
        if not turns:
            return Verdict(passed=False, reason=f"expected the agent to say something like {shown(expected)}; "
                                                f"it said nothing in {len(run.exchanges)} turn(s)")
        texts = [text for _, text in turns]
        how = f"{self.spec.method}, min {number_text(self.spec.min)}"
        if self.spec.method == "embedding":
            scores = await self._embedding_scores(run, expected, texts)
            how = f"embedding by {self.spec.embedding_model}, min {number_text(self.spec.min)}"
        else:
            scores = [lexical_similarity(expected, text) for text in texts]
        best = max(range(len(turns)), key=lambda i: scores[i])
        index, text = turns[best]
        score = scores[best]
        if score >= self.spec.min:
            return Verdict(passed=True, score=score, evidence=[text],
                           reason=f"turn {index} is {score:.2f} similar to {shown(expected)} ({how})")
        # one turn is "turn 1", not "turn (1)"; "the answer" when the failure's label names the turn
        closest = f"the closest turn ({index})" if len(turns) > 1 else \
            "the answer" if run.turn_labelled else f"turn {index}"
        return Verdict(passed=False, score=score, evidence=[text],
                       reason=f"expected the agent to say something like {shown(expected)}; {closest} "
                       f"is only {score:.2f} similar ({how}): {quote(text, 120)}")

    async def _embedding_scores(self, run: RunView, expected: str, texts: list[str]) -> list[float]:
        name = self.spec.embedding_model
        embedder = run.models.embedder(name) if isinstance(run.models, EmbeddingModels) else None
        if embedder is not None:
            try:
                found = await embedder.embed([expected, *texts])
            except ModelError as exc:
                raise InfraError(f"the embedding model {name} did not answer: {exc}") from None
            reference, *others = found.vectors
            return [round(max(0.0, min(1.0, _vector_cosine(reference, vector))), 4) for vector in others]
        if not embeddings_available():
            raise InfraError(f"{name} is not a model under models:, and {NEEDS_EXTRA}")
        try:
            return await embedding_similarity(name, expected, texts)
        except Exception as exc:  # a missing model file, no network for a first download...
            raise InfraError(f"the embedding model {name} failed: {type(exc).__name__}: {exc}") from None


def _vector_cosine(left: Sequence[float], right: Sequence[float]) -> float:
    if len(left) != len(right):
        raise InfraError(f"the embedding model gave vectors of {len(left)} and {len(right)} numbers")
    norms = math.sqrt(sum(x * x for x in left)) * math.sqrt(sum(y * y for y in right))
    return sum(x * y for x, y in zip(left, right, strict=True)) / norms if norms else 0.0
