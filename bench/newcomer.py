"""A newcomer's way in, scripted and timed: from a fresh clone to a first recall through an MCP client.

Each step is what the README tells a person to do, run as written:
1. clone:    `git clone` of this repository into a temporary folder;
2. install:  the README's *Run it* command up to the server's start (a venv, torch, the package);
3. plug in:  `corrigenda install vscode` into a home of its own (the entry VS Code would run);
4. recall:   the entry launched in a fresh git folder (the Inspector's CLI sends no roots, so the
             folder the server starts in names the scope, as a root of it would), calling
             `recall_chains` first, as the server's instructions tell an agent: a new project's first
             recall must answer, empty, not fail;
5. remember: the same, calling `remember`;
6. recall:   the same, calling `recall_chains`, which must answer with the note as NOW.
Every tool call's result is checked for `isError`; the results file counts the tool errors (0).

Run from the repository root (needs git and Node.js's npx; reaches only the package registries):

    .venv/bin/python bench/newcomer.py [--json bench/results/newcomer.json]

It prints a table of the steps' seconds and, with --json, writes them with the first recall's lines
(bench/harness.py adds the run record: the commit cloned, the date, the machine's load).
pip's cache is whatever the machine has: a first install on a new machine downloads ~2 GB more.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script

ROOT = harness.ROOT
INSPECTOR = "@modelcontextprotocol/inspector@0.17.5"  # the 0.x CLI runs on Node 20
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def run_it_install_command() -> str:
    """The README's *Run it* command without its last step (which starts the server and waits)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Run it (fresh machine)", 1)[1]
    command = re.search(r"```sh\n(.+?)\n```", section, re.S).group(1).strip()  # type: ignore[union-attr]
    install, serve = command.rsplit(" && ", 1)
    assert serve == ".venv/bin/corrigenda serve", serve
    return install


def step(name: str, steps: dict[str, float], *command: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    steps[name] = round(time.perf_counter() - started, 1)
    if done.returncode != 0:
        sys.exit(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done  # type: ignore[no-any-return]


def table(result: dict[str, Any]) -> str:
    """Each step's seconds, the total, and the tool errors the calls met."""
    rows: list[list[object]] = [[name, seconds] for name, seconds in result["seconds"].items()]
    if "tool_errors" in result:
        rows.append(["tool errors in the calls (count)", result["tool_errors"]])
    return harness.markdown_table(["step", "seconds"], rows)


TABLES = {"main": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures here (e.g. bench/results/newcomer.json)")
    args = parser.parse_args()
    steps: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="newcomer-") as tmp:
        work = Path(tmp)
        clone = work / "corrigenda"
        # A newcomer's shell has no PYTHONPATH; one set for this checkout would make the clone's venv run
        # this checkout's code instead of what it installed.
        shell = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
        step("clone", steps, "git", "clone", "-q", str(ROOT), str(clone), env=shell)
        step("install (README's Run it)", steps, "bash", "-c", run_it_install_command(), cwd=clone, env=shell)
        installed = subprocess.run(
            [clone / ".venv/bin/python", "-c", "import corrigenda.server; print(corrigenda.server.__file__)"],
            capture_output=True, text=True, env=shell, check=True,
        ).stdout.strip()  # fmt: skip
        if not Path(installed).is_relative_to(clone):
            sys.exit(f"the clone's venv imports corrigenda from {installed}, not from the clone")
        home, project = work / "home", work / "code" / "billing"
        project.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        env = {**shell, **OFFLINE, "HOME": str(home)}
        env.pop("XDG_CONFIG_HOME", None)
        step("corrigenda install vscode", steps, str(clone / ".venv/bin/corrigenda"), "install", "vscode", env=env)
        entry = json.loads((home / ".config/Code/User/mcp.json").read_text())["servers"]["corrigenda"]
        launch = [entry["command"], *(a.replace("${workspaceFolder}", str(project)) for a in entry["args"])]
        inspector = ["npx", "-y", INSPECTOR, "--cli", *launch, "--method", "tools/call", "--tool-name"]
        text = "The billing service retries failed charges three times"
        query = "query=how often are failed charges retried?"
        calls = [
            ("first recall_chains, nothing stored (Inspector CLI)", ["recall_chains", "--tool-arg", query]),
            ("remember (Inspector CLI)", ["remember", "--tool-arg", f"text={text}"]),
            ("recall_chains (Inspector CLI)", ["recall_chains", "--tool-arg", query]),
        ]
        try:  # every call after the first reaches the engine the first started (README, "Command line")
            answers = [
                json.loads(step(name, steps, *inspector, *call, env=env, cwd=project).stdout) for name, call in calls
            ]
        finally:  # the newcomer's engine goes with the clone it runs from
            subprocess.run(
                [clone / ".venv/bin/corrigenda", "engine", "stop"], env=env, capture_output=True, check=False
            )
        errors = sum(bool(a.get("isError")) for a in answers)
        first, answer = answers[0]["content"][0]["text"], answers[-1]["content"][0]["text"]
        assert errors == 0, answers
        assert "Nothing is stored in scope" in first and "NOW" in answer and text in answer, (first, answer)
    steps["total"] = round(sum(steps.values()), 1)
    result = {"seconds": steps, "tool_errors": errors, "first_recall": first.splitlines()[:3],
              "recall_after_remember": answer.splitlines()[:3]}  # fmt: skip
    if args.json:
        harness.write_results(args.json, result)
    print(table(result))


if __name__ == "__main__":
    main()
