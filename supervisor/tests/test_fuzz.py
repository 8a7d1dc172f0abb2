"""A seeded fuzzer of what reads untrusted text in the keeper's process: the answer's parsers (formats.py, answers.py),
the rules of names (names.refusal) and the page's Markdown (report.py). Random and adversarial input (whitespace
runs, many newlines, nested fences, unclosed tags, lone surrogates, NUL, huge lines, deeply nested JSON) must raise
nothing but the parsers' own ValueError, and take at most SECONDS_PER_100KB for each 100 KB. The default run takes a
few seconds; the soak (marked soak, skipped unless asked for: -m soak) runs many more cases.
"""
import random
import time

import pytest

from conftest import load_keeper

formats, answers, names, report = (load_keeper(name) for name in ("formats", "answers", "names", "report"))

SECONDS_PER_100KB = 2.0  # the parsers take a few hundredths of this, the page a second on a busy machine
PIECES = [" ", "\t", "\n", "\r\n", " \n", "\n\n", "```", "```py\n", "```\n", '<file path="a.py">', "<file path='b.md'>",
          "</file>", "<file ", "{", "}", "[", "]", '"', "'", "\\", ":", ",", '{"tasks": [', '"files": [', '{"path": ',
          '"content": "', '{"tasks"', '{"path":', "- ", "* ", "1. ", "Done: 1, 2", "done:", "\ud800", "\udfff", "\x00",
          "\u034f", "\u200b", "\u202e", "é", "日本", "...", "# ... existing code", "rest of the file unchanged", "**",
          "__", "*", "_", "`", "[x](http://a)", "[", "](", "# ", "#", "a.py", "tests/test_a.py", "x = 1", "/", ".",
          "..", ".git", ".env", "x" * 1000]
SHAPES = {  # 100 KB of one adversarial shape
    "whitespace-only lines": " \n", "newlines": "\n", "tabs and spaces": " \t", "fences never closed": "```a\n",
    "fence pairs": "a.py\n```\nx\n```\n", "file tags never closed": '<file path="a.py">\n', "JSON openings": '{"path":',
    "answer openings": '{"tasks":[', "arrays": "[", "task lines": "- \n", "done lines": "done:", "lazy markers": "# ... ",
    "strong markers": "**", "emphasis": "*a ", "links": "[", "headings": "# ", "surrogates": "\ud800", "NUL": "\x00",
    "one huge line": "x", "escapes": "\\", "quotes": '"', "backticks": "`", "dashes": "-", "dots": ".",
}
FILES = {"contents": [{"parts": [{"text": "the codebase\n\n" + answers.FILES_FORMAT}]}]}
JSON = {"contents": [{"parts": [{"text": "the codebase"}]}]}


def readers(page=False):
    """(name, function of a text) of every reader of untrusted text fuzzed here (`page`: the page's Markdown)."""
    if page:
        return [("render_goal", report.render_goal), ("markdown", report.markdown), ("inline", report.inline)]
    def body(text):
        return {"candidates": [{"content": {"parts": [{"text": text}]}, "finishReason": "STOP"}]}

    def cleaned(sent):
        def read(text):
            answer, _ = answers.clean_answer(body(text), sent)
            return answers.drop_unusable(answer, sent)
        return read
    return [("read_files", formats.read_files), ("read_json", lambda text: formats.read_json(text, "the codebase")),
            ("clean_answer, plain text asked", cleaned(FILES)), ("clean_answer, JSON asked", cleaned(JSON)),
            ("refusal", names.refusal), ("refusal of a mirrored tree", lambda t: names.refusal(t, visible_only=False))]


def read_within_bounds(text, what, page=None):
    """Every reader on the text (`page`: the page's alone, or with the others when None): nothing but a ValueError
    raised, and no more time than its length allows (the CPU time of this process: other work on the machine does
    not count against it)."""
    allowed = SECONDS_PER_100KB * max(1.0, len(text) / 100_000)
    for name, read in readers(False) * (page is not True) + readers(True) * (page is not False):
        began = time.process_time()
        try:
            read(text)
        except ValueError:
            pass  # a parser's own "what is wrong", the contract
        took = time.process_time() - began
        assert took <= allowed, f"{name} took {took:.2f} s on {what} ({len(text):,} characters)"


def random_text(rng, size):
    return "".join(rng.choice(PIECES) for _ in range(size))


@pytest.mark.parametrize("shape", SHAPES)
def test_every_parser_takes_linear_time_on_100_kb_of_an_adversarial_shape(shape):
    unit = SHAPES[shape]
    read_within_bounds(unit * (100_000 // len(unit)), shape, page=False)
    read_within_bounds("- task\n" + unit * (100_000 // len(unit)) + "\n</file>", f"{shape}, after a task", page=False)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_pages_markdown_takes_linear_time_on_100_kb_of_an_adversarial_shape(shape):
    read_within_bounds(SHAPES[shape] * (100_000 // len(SHAPES[shape])), shape, page=True)


@pytest.mark.parametrize("shape", ["[", "*a ", "**a ", "_a ", '{"tasks":[', " #"])
def test_the_pages_markdown_takes_linear_time_on_many_lines_of_openings_that_never_close(shape):
    """Read on to the line's end from every opening, 100 KB of "[" took minutes on one line, and seconds in lines."""
    read_within_bounds(((shape * (500 // len(shape))) + "\n") * 200, f"lines of {shape!r}", page=True)


def test_deeply_nested_json_is_a_parsers_error_and_nothing_worse():
    for depth in (100, 5_000, 50_000):
        read_within_bounds('{"tasks": [], "files": [' * depth, f"JSON {depth} deep", page=False)
        read_within_bounds('[' * depth + '{"path": "a.py", "content": "x"}', f"a file {depth} deep", page=False)


def test_random_answers_raise_nothing_but_the_parsers_error():
    rng = random.Random(20261206)
    for n in range(150):
        read_within_bounds(random_text(rng, rng.randrange(1, 400)), f"random answer {n} (seed 20261206)")


@pytest.mark.soak
def test_soak_many_more_random_and_mixed_answers():
    rng = random.Random()
    seed = rng.randrange(1 << 32)
    rng.seed(seed)
    for n in range(20_000):
        shapes = [SHAPES[rng.choice(list(SHAPES))] * rng.randrange(1, 5000) for _ in range(rng.randrange(1, 4))]
        text = "".join(shapes) + random_text(rng, rng.randrange(0, 2000))
        read_within_bounds(text[:rng.randrange(1, 200_000)], f"soak answer {n} (seed {seed})", page=False)
