"""README.md and docs/ point only at what exists, and nothing cites a document outside the repo.

- every relative link (and its ``#anchor``, GitHub's heading slugs) in README.md and docs/*.md
  names a file or folder of the repository;
- every backticked repository path there (``agent/...``, ``docs/...``, ``pyproject.toml``...)
  exists; a ``*`` in it must match at least one file;
- every ``jetfleet ...`` / ``jetfleet-agent ...`` command shown in a fenced block names a
  subcommand that exists: ``--help`` of that command path runs in-process (click's CliRunner);
- no file of the repository cites the team's handbook, which a clone does not have.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from importlib import import_module
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP_LEVEL = ("agent", "controller", "shared", "tests", "bench", "docs", "packaging", "migrations")
TOP_FILES = ("pyproject.toml", "Makefile", "README.md", ".ci/run")

# Documents of the team's handbook (outside the repository) and the way code used to cite them.
OUTSIDE = re.compile(
    r"ARCHITECTURE(?:\.md| §)|DOMAIN\.md|tensorrt-notes|tensorrt_python_api\.md|handbook"
    r"|\.\./shared/"
)
SCANNED = {".py", ".md", ".toml", ".sh", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".service"}
SKIPPED_DIRS = {"node_modules", "build", "dist", "__pycache__"}

FENCE = re.compile(r"^```.*?$(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def _doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """The text without its fenced blocks."""
    return FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", _prose(path.read_text()), re.M)}


def _links() -> Iterator[tuple[str, str]]:
    for doc in DOCS:
        for target in LINK.findall(_prose(doc.read_text())):
            if not re.match(r"^[a-z]+:", target):
                yield _doc_id(doc), target


def _repo_paths() -> Iterator[tuple[str, str]]:
    for doc in DOCS:
        for code in CODE.findall(_prose(doc.read_text())):
            for word in code.split():
                word = word.strip(",;:()")
                if any(c in word for c in "<>{}$=|") or "..." in word:
                    continue
                if word in TOP_FILES or (word.split("/")[0] in TOP_LEVEL and "/" in word):
                    yield _doc_id(doc), word


def _commands() -> Iterator[tuple[str, list[str]]]:
    for doc in DOCS:
        for block in FENCE.findall(doc.read_text()):
            logical = re.sub(r"\\\n\s*", " ", block)
            for line in logical.splitlines():
                line = re.split(r"\s#", " " + line, maxsplit=1)[0].strip()
                program = None  # `jetfleet models ls | models show X`: the same program
                for part in line.split(" | "):
                    try:
                        words = shlex.split(part)
                    except ValueError:
                        words = part.split()
                    while words and ENV_ASSIGNMENT.match(words[0]):
                        words = words[1:]
                    if words and words[0] in ("jetfleet", "jetfleet-agent"):
                        program = words[0]
                    elif program and words:
                        words = [program, *words]
                    else:
                        continue
                    # `rollouts pause|resume 1`: one command per alternative
                    split = next((i for i, w in enumerate(words) if "|" in w), None)
                    if split is None:
                        yield _doc_id(doc), words
                        continue
                    for alternative in words[split].split("|"):
                        yield _doc_id(doc), [*words[:split], alternative, *words[split + 1 :]]


def _clis() -> dict[str, click.Command]:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    clis: dict[str, click.Command] = {}
    for name, target in scripts.items():
        module_name = target.split(":")[0]
        clis[name] = next(
            v
            for v in vars(import_module(module_name)).values()
            if isinstance(v, click.Group) and getattr(v.callback, "__module__", "") == module_name
        )
    return clis


def _command_path(root: click.Command, args: Sequence[str]) -> tuple[list[str], str | None]:
    """The subcommand words of ``args`` under ``root``, and a word naming no subcommand."""
    path: list[str] = []
    command = root
    for word in args:
        if not isinstance(command, click.Group) or word.startswith("-"):
            break
        if word not in command.commands:
            return path, word
        command = command.commands[word]
        path.append(word)
    return path, None


def test_docs_exist() -> None:
    assert (ROOT / "README.md").is_file()
    assert (ROOT / "docs" / "architecture.md").is_file()


@pytest.mark.parametrize(("doc", "target"), sorted(set(_links())))
def test_relative_link_exists(doc: str, target: str) -> None:
    file_part, _, anchor = target.partition("#")
    path = (ROOT / doc).parent / file_part if file_part else ROOT / doc
    assert path.exists(), f"{doc}: link to {target}: {path.relative_to(ROOT)} does not exist"
    if anchor and path.suffix == ".md":
        assert anchor in _anchors(path), f"{doc}: link to {target}: no heading #{anchor}"


@pytest.mark.parametrize(("doc", "path"), sorted(set(_repo_paths())))
def test_backticked_path_exists(doc: str, path: str) -> None:
    if "*" in path:
        assert list(ROOT.glob(path)), f"{doc}: `{path}` matches no file"
    else:
        assert (ROOT / path).exists(), f"{doc}: `{path}` does not exist"


COMMANDS = sorted({(doc, tuple(words)) for doc, words in _commands()})


@pytest.mark.parametrize(
    ("doc", "words"), COMMANDS, ids=[f"{doc}:{' '.join(words)}" for doc, words in COMMANDS]
)
def test_command_exists(doc: str, words: tuple[str, ...]) -> None:
    root = _clis()[words[0]]
    path, unknown = _command_path(root, words[1:])
    shown = " ".join(words)
    assert unknown is None, f"{doc}: `{shown}`: {words[0]} {' '.join(path)} has no {unknown!r}"
    result = CliRunner().invoke(root, [*path, "--help"])
    assert result.exit_code == 0, f"{doc}: `{shown}`: --help failed: {result.output}"


def _repository_files() -> Iterator[Path]:
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS]
        for name in files:
            path = Path(folder, name)
            if path.suffix in SCANNED or name == "Makefile":
                yield path


def test_no_file_cites_a_document_outside_the_repository() -> None:
    here = Path(__file__).resolve()
    found = []
    for path in _repository_files():
        if path == here:
            continue
        rel = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "cites a document outside the repository:\n" + "\n".join(found)
