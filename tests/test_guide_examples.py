"""The guide's examples run as written: the quickstart's files and commands from an empty folder,
and the testing guide's test file under pytest. Each block is read from the page itself, so an
edit to the page is what is tested."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from labqueue import JobQueue
from labqueue.website.reference import command_parser

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "docs" / "package" / "quickstart.md"
TESTING = ROOT / "docs" / "package" / "howto" / "testing.md"
BLOCK = re.compile(r"^```(?P<language>\w+)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
FILE_NAME = re.compile(r"# (?P<name>[\w.]+\.py)\b")  # a block whose first line names its file
# The install block is the one step the test does not run: it runs in the test environment,
# where labqueue is installed already (from this checkout) and there is no network.
INSTALL = ("python -m venv .venv && . .venv/bin/activate", "pip install labqueue")


def blocks(page: Path) -> list[tuple[str, str]]:
    return [(m["language"], m["body"]) for m in BLOCK.finditer(page.read_text(encoding="utf-8"))]


def environment() -> dict[str, str]:
    """This interpreter's python and labqueue first on PATH, no LABQUEUE_* setting inherited."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("LABQUEUE_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def test_the_quickstart_runs_as_written_from_an_empty_folder(tmp_path):
    env = environment()
    said: dict[str, str] = {}
    steps = blocks(QUICKSTART)
    install = [line for line in steps[0][1].splitlines() if line.strip()]
    assert [line.split("  #")[0].strip() for line in install] == list(INSTALL)
    assert list(tmp_path.iterdir()) == []
    for language, body in steps[1:]:
        if language == "python":
            name = FILE_NAME.match(body)
            assert name, f"a python block of the quickstart names no file: {body[:60]!r}"
            (tmp_path / name["name"]).write_text(body, encoding="utf-8")
            continue
        assert language == "bash", language
        for command in filter(None, (line.strip() for line in body.splitlines())):
            done = subprocess.run(
                command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
            said[command] = done.stdout

    # What the page says each step shows.
    assert said['labqueue enqueue jobs.db greet \'{"name": "barbara"}\''].strip() == "4"
    stats = dict(line.split()[:2] for line in said["labqueue stats jobs.db"].splitlines()[:5])
    assert stats["queued"] == "4" and stats["ready_now"] == "4"
    worker = next(out for command, out in said.items() if command.startswith("labqueue worker"))
    assert sorted(worker.splitlines()) == [f"hello, {n}" for n in ("ada", "barbara", "edsger", "grace")]
    rows = said["labqueue jobs jobs.db"].splitlines()[1:]
    assert len(rows) == 4 and all(" done " in row and " 1/5 " in row for row in rows)
    with JobQueue(tmp_path / "jobs.db", create=False) as q:
        assert q.counts() == {"queued": 0, "running": 0, "done": 4, "dead": 0, "cancelled": 0}


def test_the_testing_guides_example_passes_under_pytest(tmp_path):
    [(_, body)] = [(lang, body) for lang, body in blocks(TESTING) if lang == "python"]
    name = FILE_NAME.match(body)
    assert name and name["name"].startswith("test_")
    (tmp_path / name["name"]).write_text(body, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name["name"]],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "3 passed" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("page", [QUICKSTART, TESTING])
def test_every_python_block_of_the_examples_names_its_file(page):
    for language, body in blocks(page):
        if language == "python":
            assert FILE_NAME.match(body), (page.name, body[:60])


def command_lines() -> list[tuple[str, str]]:
    """Each `labqueue ...` line of a shell block in README and the guide: (page, line)."""
    pages = [
        ROOT / "README.md",
        ROOT / "docs" / "deploy.md",
        *sorted((ROOT / "docs" / "package").rglob("*.md")),
    ]
    found = []
    for page in pages:
        for language, body in blocks(page):
            if language in ("bash", "sh", "console"):
                for line in body.splitlines():
                    words = line.strip()
                    while re.match(r"[A-Z_]+=\S+ ", words):  # VARIABLE=value before the command
                        words = words.split(" ", 1)[1]
                    if words.startswith("labqueue "):
                        found.append((page.relative_to(ROOT).as_posix(), words))
    return found


def test_the_guide_shows_labqueue_commands():
    assert len(command_lines()) >= 30


@pytest.mark.parametrize(("page", "line"), command_lines())
def test_every_labqueue_command_in_the_guide_parses(page, line):
    """The command's own parser accepts each command the pages show: a renamed or removed
    option, or a value it refuses, fails here (nothing is run)."""
    words = shlex.split(line.split(" < ")[0], comments=True)[1:]
    if words[0] in ("bench", "chaos"):
        pytest.skip("the tools parse their own arguments")
    try:
        command_parser().parse_args(words)
    except SystemExit as exc:
        pytest.fail(f"{page}: {line!r} is refused by labqueue's parser (exit {exc.code})")
