"""Every fenced code block in README.md and docs/*.md runs as written.

CONTRIBUTING — how a code block in the docs is checked. One test per page; its blocks run
in page order in a fresh temp dir laid out like a clone after `make demo`: a copy of
examples/, `.venv` linking to the test's venv, `plait` on PATH, the default store
(`sqlite:///.plait/plait.db`), no PLAIT_* or provider variables, and the files the page
wrote before the block. By the fence's language:

- ```python   runs as a script (`python BLOCK.py`) and must exit 0.
- ```sh / ```console   runs in bash, each command in turn (a `console` block runs only its
  `$ ` lines; the other lines are its output). Each command must exit 0 or 3 (parked,
  queued), or a code its comment announces (`plait resume r2   # ends canceled: exit 1`).
  Shell variables and functions carry from one command to the next within a block.
- ```yaml / ```json   must parse; one with a `nodes:` list is a workflow and must pass
  `plait check`. JSON output samples may shorten strings with `…` (inside quotes).
- ```text / ```mermaid   output, synopses, grammars, diagrams: not code, not run.
- A fence without a language fails: tag output `text`.

Markers, an HTML comment on the line just before the fence (invisible on the page):

- `<!-- file: NAME -->` writes the block to NAME (`tools.py`, `workflow.yaml`,
  `answers.json`) for the page's later blocks; a workflow file is also `plait check`ed,
  after the whole page ran (so it may name a `tools.py` defined below it). Say the file's
  name in the prose too: readers do not see the marker.
- `<!-- excerpt: PATH -->` says the block is an abridged copy of a repository file (e.g.
  `examples/orders/workflow.yaml`): a YAML/JSON excerpt must be part of that file's data
  (every key and list item it shows is there); any other, each line (comments aside).
- `<!-- not-run: REASON -->` skips a block that cannot run offline as written (it installs
  packages, needs PostgreSQL, a server or a provider key, or runs until stopped). Say why,
  and keep these rare: a block that can be made whole should be.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
BIN = Path(sys.executable).parent

FENCE = re.compile(
    r"(?:^<!--\s*(?P<marker>[\w-]+):\s*(?P<arg>.*?)\s*-->\n)?"
    r"^(?P<indent>[ ]{0,3})(?P<fence>```|~~~)(?P<lang>[^\n`]*)\n"
    r"(?P<body>.*?)^[ ]{0,3}(?P=fence)[ \t]*$",
    re.M | re.S,
)
RUNNABLE_EXIT_CODES = (0, 3)  # docs/cli.md#exit-codes: done, or parked/queued
TIMEOUT_S = 120


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, with the marker that precedes it, if any."""

    page: Path
    line: int
    lang: str
    body: str
    marker: str | None
    arg: str

    @property
    def where(self) -> str:
        shown = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page.name
        return f"{shown}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    text = page.read_text(encoding="utf-8")
    for match in FENCE.finditer(text):
        indent = len(match["indent"])
        body = "".join(line[indent:] for line in match["body"].splitlines(keepends=True))
        fence_at = match.start("fence")
        yield Block(
            page=page,
            line=text.count("\n", 0, fence_at) + 1,
            lang=match["lang"].strip().split()[0] if match["lang"].strip() else "",
            body=body,
            marker=match["marker"],
            arg=match["arg"] or "",
        )


def clean_env(home: Path) -> dict[str, str]:
    """What a reader's fresh shell in a clone has: `plait` on PATH, no plait settings, no keys."""
    keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")}
    return {
        **keep,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "COLUMNS": "120",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=clean_env(cwd),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def shell_commands(block: Block) -> list[str]:
    """The commands of a sh/console block: `\\`-continued lines joined, comments kept."""
    lines = block.body.splitlines()
    if block.lang == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    commands: list[str] = []
    pending = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = (pending + line).strip()
        pending = ""
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def allowed_exit_codes(command: str) -> str:
    """0 and 3, and any code the command's comment announces (`# ends canceled: exit 1`)."""
    comment = command.partition(" #")[2]
    codes = {*RUNNABLE_EXIT_CODES, *map(int, re.findall(r"\bexit (\d+)", comment))}
    return "|".join(map(str, sorted(codes)))


def shell_script(commands: list[str]) -> str:
    checked = [
        f"{command}\nrc=$?; case $rc in {allowed_exit_codes(command)}) ;; "
        f'*) echo "exit $rc:" {shlex.quote(command)} >&2; exit 97;; esac'
        for command in commands
    ]
    return "set -o pipefail\n" + "\n".join(checked) + "\n"


def is_workflow(document: object) -> bool:
    return isinstance(document, dict) and isinstance(document.get("nodes"), list)


def code_lines(text: str) -> list[str]:
    """Lines without comments or blanks, stripped: what an excerpt must share with its file."""
    lines = (re.sub(r"(^|\s)#.*$", "", line).strip() for line in text.splitlines())
    return [line for line in lines if line]


def is_part_of(part: object, whole: object) -> bool:
    """Whether a parsed excerpt is in a parsed file: mappings by key, lists item by item."""
    if isinstance(part, dict) and isinstance(whole, dict):
        return all(key in whole and is_part_of(value, whole[key]) for key, value in part.items())
    if isinstance(part, list) and isinstance(whole, list):
        return all(any(is_part_of(item, other) for other in whole) for item in part)
    return part == whole


def excerpt_problem(block: Block) -> str | None:
    source = ROOT / block.arg
    if not source.is_file():
        return f"excerpt of {block.arg}: no such file in the repository"
    if block.lang in ("yaml", "yml", "json"):
        whole_data = yaml.safe_load(source.read_text(encoding="utf-8"))
        if is_part_of(parse_data(block), whole_data):
            return None
        return f"says more than, or differs from, {block.arg}"
    whole = set(code_lines(source.read_text(encoding="utf-8")))
    missing = [line for line in code_lines(block.body) if line not in whole]
    return f"lines not in {block.arg}: {missing}" if missing else None


def check_workflow(path: Path, cwd: Path) -> str | None:
    done = run([str(BIN / "plait"), "check", str(path)], cwd)
    if done.returncode != 0:
        return f"plait check failed:\n{done.stdout}{done.stderr}"
    return None


def parse_data(block: Block) -> object:
    if block.lang == "json":
        return json.loads(block.body)
    return yaml.safe_load(block.body)


def problem_of(block: Block, cwd: Path, index: int) -> str | None:
    """Run or check one block; a description of what went wrong, or None."""
    lang = block.lang
    if block.marker == "not-run":
        return None if block.arg else "a not-run marker must say why"
    if block.marker == "file":
        target = cwd / block.arg
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.body, encoding="utf-8")
        if lang in ("yaml", "yml", "json"):
            parse_data(block)  # checked with `plait check` once the page's files are all written
        if lang == "python":
            compile(block.body, block.where, "exec")
        return None
    if block.marker == "excerpt":
        return excerpt_problem(block)
    if block.marker is not None:
        return f"unknown marker {block.marker!r} (file:, excerpt: or not-run:)"
    if lang in ("text", "mermaid"):
        return None
    if lang == "python":
        script = cwd / f".doc_block_{index}.py"
        script.write_text(block.body, encoding="utf-8")
        done = run([sys.executable, script.name], cwd)
        return None if done.returncode == 0 else f"exit {done.returncode}:\n{done.stderr}"
    if lang in ("sh", "bash", "shell", "console"):
        commands = shell_commands(block)
        if not commands:
            return "no commands"
        done = run(["bash", "-c", shell_script(commands)], cwd)
        if done.returncode == 0:
            return None
        return f"exit {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    if lang in ("yaml", "yml", "json"):
        try:
            document = parse_data(block)
        except (json.JSONDecodeError, yaml.YAMLError) as error:
            return f"does not parse: {error}"
        if not is_workflow(document):
            return None
        path = cwd / f".doc_block_{index}.{lang}"
        path.write_text(block.body, encoding="utf-8")
        return check_workflow(path, cwd)
    if not lang:
        return "a fence without a language: tag it (`text` for output)"
    return f"no rule for language {lang!r}: see the top of tests/docs/test_doc_blocks.py"


def page_problems(page: Path, workdir: Path) -> list[str]:
    """Run every block of a page in order in workdir; what went wrong, one entry a block."""
    shutil.copytree(ROOT / "examples", workdir / "examples")
    (workdir / ".venv").symlink_to(BIN.parent, target_is_directory=True)  # as after `make demo`
    problems = []
    page_blocks = list(blocks(page))
    for index, block in enumerate(page_blocks):
        problem = problem_of(block, workdir, index)
        if problem is not None:
            problems.append(f"{block.where} ({block.lang or 'untagged'}): {problem}")
    for block in page_blocks:  # a workflow file may name files the page defines after it
        written = block.marker == "file" and block.lang in ("yaml", "yml", "json")
        if written and is_workflow(parse_data(block)):
            problem = check_workflow(workdir / block.arg, workdir)
            if problem is not None:
                problems.append(f"{block.where} ({block.lang}): {problem}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_block_runs_as_written(page: Path, tmp_path: Path) -> None:
    problems = page_problems(page, tmp_path)
    assert not problems, "\n\n".join(problems)


BROKEN_PAGE = """# A page with one mistake per block

<!-- file: tools.py -->
```python
def fetch(order_id: str) -> dict:
    return {"total": 42}
```

<!-- file: flow.yaml -->
```yaml
name: flow
nodes:
  - {id: fetch, tool: fetch}
  - {id: gone, tool: missing}
tools:
  fetch: {python: "tools:fetch"}
```

```python
raise SystemExit("the example is wrong")
```

```sh
plait show no-such-run
```

```sh
plait show no-such-run   # refused, as announced: exit 2
```

```json
{"run_id": "r1", ...}
```

<!-- excerpt: examples/orders/workflow.yaml -->
```yaml
nodes:
  - {id: load, tool: load_everything}
```

<!-- not-run: -->
```sh
rm -rf /
```

```
untagged
```
"""


def test_a_page_with_broken_blocks_names_each_one(tmp_path: Path) -> None:
    page = tmp_path / "broken.md"
    page.write_text(BROKEN_PAGE, encoding="utf-8")
    workdir = tmp_path / "work"
    workdir.mkdir()

    problems = page_problems(page, workdir)

    lines = [problem.split(" ", 1)[0] for problem in problems]
    assert lines == [
        "broken.md:19",  # the script exits 1
        "broken.md:23",  # PLAIT-E017, exit 2
        "broken.md:31",  # JSON with `...` outside a string
        "broken.md:36",  # not in the file it says it is from
        "broken.md:42",  # not-run without a reason
        "broken.md:46",  # no language
        "broken.md:10",  # plait check: unknown tool 'missing'
    ], problems
    assert "unknown tool 'missing'" in problems[-1]


def test_an_announced_exit_code_is_the_only_other_one_accepted() -> None:
    assert allowed_exit_codes("plait resume r2   # ends canceled: exit 1") == "0|1|3"
    assert allowed_exit_codes("plait run flow.yaml --input '{\"exit 1\": 2}'") == "0|3"


def test_the_block_parser_sees_every_fence_on_every_page() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        opening = len(re.findall(r"^[ ]{0,3}(```|~~~)", text, re.M)) // 2
        assert len(list(blocks(page))) == opening, page
