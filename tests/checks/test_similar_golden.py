"""`similar_to` and `golden`, through the registry as a suite writes them, on hand-built runs."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from checks.grading import fails, passes, verdict
from tamesu.checks import AssertionProblem, parse_assertion
from tamesu.checks import similar as similar_module
from tamesu.checks.base import Exchange, RunView
from tamesu.checks.golden import parse, render
from tamesu.checks.similar import NEEDS_EXTRA, lexical_similarity
from tamesu.conversation import AgentTurn, ToolCall, UserTurn
from tamesu.errors import InfraError
from tamesu.models.base import ModelRequest, ModelResponse
from tamesu.net.serve import ThreadServer
from tamesu.suite.templates import Context


def conversation(*pairs: tuple[Any, str], base_dir: Path | None = None, update_golden: bool = False,
                 models: Any = None, captured: dict[str, Any] | None = None,
                 variables: dict[str, Any] | None = None) -> RunView:
    """A finished run: (user turn or its text, agent text) per exchange."""
    exchanges = []
    for index, (user, agent) in enumerate(pairs, start=1):
        user_turn = user if isinstance(user, UserTurn) else UserTurn(text=user)
        exchanges.append(Exchange(index, user_turn, AgentTurn(text=agent)))
    captured = captured or {}
    variables = variables or {}
    return RunView(exchanges=exchanges, metrics={"turns": float(len(pairs))}, captured=captured, events=[],
                   tool_calls=[], context=Context(captured=captured, vars=variables), base_dir=base_dir or Path.cwd(),
                   vars=variables, models=models, update_golden=update_golden)


def said(*texts: str) -> RunView:
    return conversation(*((f"question {i}", text) for i, text in enumerate(texts, start=1)))


# -- lexical similarity ------------------------------------------------------------------------------------

PARAPHRASES = [
    ("Your refund of $42 will arrive in 5 business days.", "You'll receive the $42 refund within 5 business days."),
    ("Your booking has been moved to Saturday.", "I've moved your booking to Saturday."),
    ("Your order ORD-1001 was shipped yesterday and will arrive on Friday.",
     "Order ORD-1001 shipped yesterday; it should arrive Friday."),
    ("I'm sorry, I can't help with that request.", "Sorry, I cannot help with that."),
    ("The store opens at 9am and closes at 6pm on weekdays.", "On weekdays the store is open from 9am until 6pm."),
]
UNRELATED = [
    ("Your refund of $42 will arrive in 5 business days.", "The weather in Paris is sunny today."),
    ("Your booking has been moved to Saturday.", "Please enter your password to continue."),
    ("I can help you reset your password.", "Our opening hours are 9 to 5."),
]


@pytest.mark.parametrize(("a", "b"), PARAPHRASES)
def test_paraphrases_score_high(a: str, b: str) -> None:
    assert lexical_similarity(a, b) >= 0.7
    assert lexical_similarity(a, b) == lexical_similarity(b, a)


@pytest.mark.parametrize(("a", "b"), UNRELATED)
def test_unrelated_texts_score_near_zero(a: str, b: str) -> None:
    assert lexical_similarity(a, b) < 0.2


def test_lexical_similarity_edges() -> None:
    assert lexical_similarity("Refund issued.", "Refund issued.") == 1.0
    assert lexical_similarity("Can you do that?", "can you do that") == 1.0  # only function words: still compared
    assert lexical_similarity("Your booking was moved.", "Your booking was cancelled.") < 0.7
    assert lexical_similarity("", "anything") == 0.0


# -- similar_to --------------------------------------------------------------------------------------------


async def test_similar_to_passes_on_the_best_matching_turn() -> None:
    run = said("Hello! How can I help you today?", "You'll receive the $42 refund within 5 business days.",
               "Anything else?")
    result = await passes({"similar_to": "Your refund of $42 will arrive in 5 business days."}, run)
    assert result.reason.startswith("turn 2 is 0.76 similar to")
    assert result.score is not None and result.score >= 0.7
    assert result.evidence == ["You'll receive the $42 refund within 5 business days."]


async def test_similar_to_fails_on_unrelated_text_and_names_the_closest_turn() -> None:
    run = said("The weather in Paris is sunny today.", "Please enter your password to continue.")
    result = await fails({"similar_to": "Your refund of $42 will arrive in 5 business days."}, run)
    assert "the closest turn (1) is only 0.00 similar (lexical, min 0.7)" in result.reason
    assert result.score == 0.0


async def test_similar_to_on_turn_and_min() -> None:
    run = said("I've moved your booking to Saturday.", "Anything else I can do?")
    expected = "Your booking has been moved to Saturday."
    await passes({"similar_to": expected, "on_turn": 1}, run)
    await fails({"similar_to": expected, "on_turn": "last"}, run)
    await fails({"similar_to": {"value": expected, "min": 0.95}}, run)
    await passes({"similar_to": {"value": expected, "min": 0.5}}, run)


async def test_similar_to_renders_templates() -> None:
    run = conversation(("when?", "Your parcel arrives on Friday with DHL."), captured={"carrier": "DHL"})
    await passes({"similar_to": "The parcel arrives Friday with {{captured.carrier}}"}, run)
    result = await fails({"similar_to": "with {{captured.nothing}}"}, run)
    assert result.reason.startswith("cannot check:")


async def test_similar_to_fails_when_the_agent_said_nothing() -> None:
    result = await fails({"similar_to": "Hello"}, said("", ""))
    assert "it said nothing in 2 turn(s)" in result.reason


def test_similar_to_options_are_checked_when_the_suite_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssertionProblem, match="less than or equal to 1"):
        parse_assertion({"similar_to": {"value": "x", "min": 1.5}})
    with pytest.raises(AssertionProblem, match="embedding_model is for method: embedding"):
        parse_assertion({"similar_to": {"value": "x", "embedding_model": "m"}})
    monkeypatch.setattr(similar_module, "embeddings_available", lambda: False)
    with pytest.raises(AssertionProblem) as problem:
        parse_assertion({"similar_to": {"value": "x", "method": "embedding"}})
    assert problem.value.message == NEEDS_EXTRA
    assert problem.value.loc == ("similar_to", "method")


class _LetterEmbedder:
    """Stands in for a sentence-transformers model: a text's vector is its letter counts."""

    def __init__(self, name: str) -> None:
        self.name = name

    def encode(self, texts: list[str], normalize_embeddings: bool) -> list[list[float]]:
        assert normalize_embeddings
        vectors = []
        for text in texts:
            counts = [float(text.lower().count(chr(c))) for c in range(ord("a"), ord("z") + 1)]
            norm = sum(x * x for x in counts) ** 0.5 or 1.0
            vectors.append([x / norm for x in counts])
        return vectors


async def test_embedding_method_uses_the_optional_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = _LetterEmbedder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    monkeypatch.setattr(similar_module, "embeddings_available", lambda: True)
    monkeypatch.setattr(similar_module, "_loaded", {})
    run = said("zzz", "Your booking has been moved to Saturday!")
    result = await passes({"similar_to": {"value": "your booking has been moved to saturday", "method": "embedding",
                                          "min": 0.99}}, run)
    assert "turn 2" in result.reason and "embedding" in result.reason
    assert similar_module._loaded["all-MiniLM-L6-v2"].name == "all-MiniLM-L6-v2"


async def test_an_embedding_model_that_cannot_load_is_the_tests_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the agent's failure: the check could not be made (before, a failed assertion blamed on the agent)."""
    def broken(name: str) -> None:
        raise OSError(f"{name} is not downloaded")

    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = broken  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    monkeypatch.setattr(similar_module, "embeddings_available", lambda: True)
    monkeypatch.setattr(similar_module, "_loaded", {})
    entry = {"similar_to": {"value": "x", "method": "embedding", "embedding_model": "./models/m"}}
    with pytest.raises(InfraError) as error:
        await verdict(entry, said("hello"))
    assert str(error.value) == ("the embedding model ./models/m failed: OSError: ./models/m is not "
                                "downloaded")
    monkeypatch.setattr(similar_module, "embeddings_available", lambda: False)
    with pytest.raises(InfraError) as error:
        await verdict(entry, said("hello"))
    assert str(error.value).startswith("./models/m is not a model under models:, and embedding "
                                       "similarity needs embedding_model naming a model under models:")


# -- golden: files -----------------------------------------------------------------------------------------


def booking_run(tmp_path: Path, last: str = "Done: your booking is now on Saturday.\nAnything else?",
                **options: Any) -> RunView:
    return conversation(("Hi, I booked a room for Friday", "Hello! What is your booking number?"),
                        (UserTurn(text="It is", data={"booking": "B-17"}), last), base_dir=tmp_path, **options)


GOLDEN_TEXT = """user: Hi, I booked a room for Friday
agent: Hello! What is your booking number?
user: It is
  {"booking": "B-17"}
agent: Done: your booking is now on Saturday.
  Anything else?
"""


async def _booked(request: Request) -> JSONResponse:
    return JSONResponse({"text": "Done: your booking is now on Saturday."})


def test_a_missing_golden_file_is_the_suites_to_fix_never_the_agents_failure(
        tmp_path: Path, tamesu: Any, serve: Callable[[Any], ThreadServer]) -> None:
    agent = serve(Starlette(routes=[Route("/chat", _booked, methods=["POST"])])).url
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{agent}/chat" }}
tests:
  - name: booking
    scenario: {{ script: [ {{ say: move my booking }} ] }}
    assert: [ {{ golden: golden/booking.txt }} ]
""")
    where = "suite.yaml:6:25: tests[0].assert[0].golden: no golden file golden/booking.txt"
    checked = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert where in checked.stdout + checked.stderr, checked.stdout + checked.stderr
    result = tamesu(["run", "suite.yaml", "--out", "out", "--report", "junit:j.xml"], cwd=tmp_path)
    # the suite's to fix: exit 2 and `fault: suite` (it was exit 3 and `fault: environment`, the infrastructure's)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "fault: suite" in result.stdout, result.stdout
    assert 'type="suite"' in (tmp_path / "j.xml").read_text()
    [directory] = list((tmp_path / "out").iterdir())
    [line] = [json.loads(x) for x in (directory / "results.jsonl").read_text().splitlines()]
    [run] = line["runs"]
    assert (run["status"], run["fault"]) == ("error", "suite"), line
    assert run["error"] == "golden: no golden file golden/booking.txt: run with --update-golden to write it"
    written = tamesu(["run", "suite.yaml", "--out", "out", "--update-golden"], cwd=tmp_path)
    assert written.returncode == 0 and (tmp_path / "golden" / "booking.txt").is_file(), written.stdout
    # the run that writes the file was told "until then the test is an error" as it wrote it: said for either run
    assert f"warning: {where} yet (relative to the suite's folder): a run with --update-golden writes it, a run " \
           "without it is an error" in written.stdout + written.stderr, written.stdout + written.stderr
    assert tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path).returncode == 0


async def test_update_golden_writes_the_file_then_the_next_run_passes(tmp_path: Path) -> None:
    written = await passes({"golden": "golden/nested/booking.txt"}, booking_run(tmp_path, update_golden=True))
    assert written.reason.startswith("golden file written: golden/nested/booking.txt")
    path = tmp_path / "golden" / "nested" / "booking.txt"
    assert path.read_text(encoding="utf-8") == GOLDEN_TEXT
    again = await passes({"golden": "golden/nested/booking.txt"}, booking_run(tmp_path))
    assert again.reason == "the transcript matches golden file golden/nested/booking.txt (6 lines)"
    # a later update overwrites what the agent says now
    await passes({"golden": "golden/nested/booking.txt"}, booking_run(tmp_path, last="Sorry.", update_golden=True))
    assert path.read_text(encoding="utf-8").endswith("agent: Sorry.\n")


async def test_a_golden_file_written_masked_matches_the_next_run(tmp_path: Path) -> None:
    # before: the file held "***", the next run's transcript the secret: "expected "user: hello ***", found
    # "user: hello ***"" (both sides masked in the message), a failure blamed on the agent, forever
    from dataclasses import replace

    from tamesu.suite.secrets import Redactor

    redactor = Redactor()
    redactor.add("sk-live-0123456789")
    run = conversation(("hello sk-live-0123456789", "Hi! Your key ends in 6789."), base_dir=tmp_path)
    await passes({"golden": "g.txt"}, replace(run, update_golden=True, redactor=redactor))
    assert "sk-live" not in (tmp_path / "g.txt").read_text()
    again = await passes({"golden": "g.txt"}, replace(run, redactor=redactor))
    assert again.reason == "the transcript matches golden file g.txt (2 lines)"


async def test_exact_ignores_line_endings_and_trailing_space(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_bytes(GOLDEN_TEXT.replace("\n", "  \r\n").encode() + b"\r\n\r\n")
    await passes({"golden": {"file": "b.txt", "mode": "exact"}}, booking_run(tmp_path))


async def test_exact_names_the_first_differing_line(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text(GOLDEN_TEXT, encoding="utf-8")
    result = await fails({"golden": "b.txt"}, booking_run(tmp_path, last="Done: your booking is now on Sunday."))
    assert result.reason == ('the transcript differs from golden file b.txt at line 5: expected '
                             '"agent: Done: your booking is now on Saturday.", found '
                             '"agent: Done: your booking is now on Sunday."')
    assert "-agent: Done: your booking is now on Saturday." in result.evidence[0]
    assert "+agent: Done: your booking is now on Sunday." in result.evidence[0]
    shorter = await fails({"golden": "b.txt"}, conversation(("Hi, I booked a room for Friday",
                                                             "Hello! What is your booking number?"),
                                                            base_dir=tmp_path))
    assert "at line 3: expected \"user: It is\", found the end of the transcript" in shorter.reason


async def test_golden_file_names_are_templates_and_on_turn_narrows(tmp_path: Path) -> None:
    run = booking_run(tmp_path, update_golden=True, variables={"lang": "en"})
    await passes({"golden": "golden/{{vars.lang}}.txt", "on_turn": 1}, run)
    assert (tmp_path / "golden" / "en.txt").read_text(encoding="utf-8") == (
        "user: Hi, I booked a room for Friday\nagent: Hello! What is your booking number?\n")
    await passes({"golden": "golden/{{vars.lang}}.txt", "on_turn": 1},
                 booking_run(tmp_path, variables={"lang": "en"}))
    await fails({"golden": "golden/{{vars.lang}}.txt", "on_turn": "last"},
                booking_run(tmp_path, variables={"lang": "en"}))


def test_render_and_parse_round_trip() -> None:
    lines = [("user", "one\n\ntwo"), ("agent", ""), ("agent", "user: quoted\n  indented")]
    assert parse(render(lines)) == lines
    assert render([("agent", "")]) == "agent:\n"


# -- golden: similar ---------------------------------------------------------------------------------------

SIMILAR_GOLDEN = """user: I want to move my booking
agent: Sure, what is your booking number?
user: B-17
agent: Your booking has been moved to Saturday.
"""


async def test_similar_passes_on_reworded_agent_turns(tmp_path: Path) -> None:
    (tmp_path / "g.txt").write_text(SIMILAR_GOLDEN, encoding="utf-8")
    run = conversation(("Could you move my reservation?", "Sure, what's your booking number?"),
                       ("It's B-17", "I've moved your booking to Saturday."), base_dir=tmp_path)
    result = await passes({"golden": {"file": "g.txt", "mode": "similar"}}, run)
    assert result.reason.startswith("the agent turns are 0.9")
    assert "(min 0.8)" in result.reason


async def test_similar_fails_on_a_different_answer_and_names_it(tmp_path: Path) -> None:
    (tmp_path / "g.txt").write_text(SIMILAR_GOLDEN, encoding="utf-8")
    run = conversation(("move my booking", "Sure, what is your booking number?"),
                       ("B-17", "Please enter your password to continue."), base_dir=tmp_path)
    result = await fails({"golden": {"file": "g.txt", "mode": "similar"}}, run)
    assert "only 0.50 similar to golden file g.txt (min 0.8)" in result.reason
    assert "least similar: turn 2 (0.00)" in result.reason
    # what the reason says of its least similar turn, which JUnit and the HTML report then do not say again
    assert result.evidence == ['expected "Your booking has been moved to Saturday.", found '
                               '"Please enter your password to continue."']


async def test_similar_counts_a_missing_turn_as_zero(tmp_path: Path) -> None:
    (tmp_path / "g.txt").write_text(SIMILAR_GOLDEN, encoding="utf-8")
    run = conversation(("move my booking", "Sure, what is your booking number?"), base_dir=tmp_path)
    result = await verdict({"golden": {"file": "g.txt", "mode": "similar", "min": 0.4}}, run)
    assert result.passed and result.score == 0.5
    assert "the golden file has 2 agent turns, the run 1" in result.reason


def test_golden_options_belong_to_their_mode() -> None:
    with pytest.raises(AssertionProblem, match="min is for mode: similar"):
        parse_assertion({"golden": {"file": "g.txt", "min": 0.5}})
    with pytest.raises(AssertionProblem, match="rubric is for mode: judge"):
        parse_assertion({"golden": {"file": "g.txt", "mode": "similar", "rubric": "x"}})
    with pytest.raises(AssertionProblem, match="not a golden option"):
        parse_assertion({"golden": {"file": "g.txt", "diff": True}})


# -- golden: judge -----------------------------------------------------------------------------------------


class ScriptedJudge:
    """A judge model with one rule: pass when the golden context and the transcript both mention Saturday."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        said = " ".join(line["text"] for line in request.context["transcript"])
        same = "Saturday" in said and "Saturday" in (request.context["context"] or "")
        answer = {"pass": same, "reason": "both move the booking to Saturday" if same else "the dates differ",
                  "evidence": [request.context["transcript"][-1]["text"]]}
        return ModelResponse(text=json.dumps(answer), provider="scripted", model="judge-1")


class JudgeModels:
    def __init__(self, judge: ScriptedJudge) -> None:
        self.judge = judge
        self.asked: list[tuple[str, Any]] = []

    def client(self, role: str, override: Any = None) -> ScriptedJudge:
        self.asked.append((role, override))
        return self.judge


async def test_judge_mode_asks_the_judge_with_the_golden_transcript(tmp_path: Path) -> None:
    (tmp_path / "g.txt").write_text(SIMILAR_GOLDEN, encoding="utf-8")
    judge = ScriptedJudge()
    models = JudgeModels(judge)
    run = conversation(("move it", "Which booking?"), ("B-17", "It is now on Saturday."), base_dir=tmp_path,
                       models=models)
    run.tool_calls.append(ToolCall(name="move_booking", args={"day": "saturday"}, turn=2))
    result = await passes({"golden": {"file": "g.txt", "mode": "judge", "rubric": "Dates must match.",
                                      "model": "strict"}}, run)
    assert result.reason == "both move the booking to Saturday"
    assert result.model == "scripted:judge-1" and result.prompt_version == "golden.v1+judge.v1"
    assert models.asked == [("judge", "strict")]
    context = judge.requests[0].context
    assert judge.requests[0].purpose == "judge"
    assert context["rubric"].startswith("The transcript says the same things as the golden transcript")
    assert context["rubric"].endswith("Dates must match.")
    assert "agent: Your booking has been moved to Saturday." in context["context"]
    assert context["transcript"][-1] == {"role": "agent", "text": "It is now on Saturday.", "turn": 2}
    assert context["tool_calls"][0]["name"] == "move_booking"
    different = conversation(("move it", "Which booking?"), ("B-17", "It is now on Sunday."), base_dir=tmp_path,
                             models=models)
    assert (await fails({"golden": {"file": "g.txt", "mode": "judge"}}, different)).reason == "the dates differ"


async def test_judge_mode_without_models_is_an_infra_error(tmp_path: Path) -> None:
    (tmp_path / "g.txt").write_text(SIMILAR_GOLDEN, encoding="utf-8")
    with pytest.raises(InfraError, match="needs a judge model"):
        await verdict({"golden": {"file": "g.txt", "mode": "judge"}}, conversation(("a", "b"), base_dir=tmp_path))


async def test_similar_to_on_one_turn_names_it_as_a_turn() -> None:
    # it said "turn (1) is only 0.00 similar", the parenthesis of "the closest turn (1)" left on a turn alone
    result = await fails({"similar_to": "Your refund of $42 will arrive in 5 business days."},
                         said("The weather in Paris is sunny today."))
    assert "; turn 1 is only 0.00 similar (lexical, min 0.7): " in result.reason, result.reason
