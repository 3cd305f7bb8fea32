"""The wheel works on its own, and the repository never points outside itself.

The wheel test builds kvfabric with ``python -m build`` (sdist, then the
wheel from it), installs it (not
editable, ``--no-deps``) into a fresh virtual environment and runs the
commands a new user runs first, from a directory that is not the checkout.
The fresh environment borrows the project venv's third-party packages through
a ``.pth`` path entry (nested ``.pth`` files there, such as the editable
finder of this checkout, are not processed), so it tests what the wheel
ships without downloading Amaranth and cocotb a second time.
"""

import ast
import io
import os
import re
import subprocess
import tokenize
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args, cwd, env=None, timeout=900):
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(map(str, args))} failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    # sdist first, then the wheel from the unpacked sdist (build's default): the
    # wheel holds exactly what a release would, never stale files that an
    # in-tree build/lib kept from an earlier layout.
    _run([sys.executable, "-m", "build", "--outdir", tmp / "dist", ROOT], cwd=tmp)
    wheels = list((tmp / "dist").glob("kvfabric-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheels[0]], cwd=tmp)
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=tmp).strip())
    (site / "_kvfabric_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    work = tmp / "work"
    work.mkdir()
    env = dict(os.environ, PATH=os.pathsep.join([str(env_dir / "bin"), os.environ.get("PATH", "")]))
    env.pop("PYTHONPATH", None)
    return {"bin": env_dir / "bin", "python": python, "site": site, "work": work, "env": env}


def test_wheel_imports_from_site_packages_not_the_checkout(installed):
    where = _run([installed["python"], "-c", "import kvfabric.model.channel as m, kvfabric.tb.tests.replay_tests; "
                  "print(m.__file__)"], cwd=installed["work"], env=installed["env"]).strip()
    assert Path(where).is_relative_to(installed["site"]), where


def test_wheel_compile_and_demo(installed):
    essay = installed["site"] / "kvfabric" / "examples" / "essay.toml"
    out = _run([installed["bin"] / "kvfabric", "compile", "--config", essay], cwd=installed["work"],
               env=installed["env"])
    assert "decode-a" in out and "INV_WEIGHT" in out
    out = _run([installed["bin"] / "kvfabric", "demo", "--cycles", "3000"], cwd=installed["work"],
               env=installed["env"])
    assert re.search(r"worst decode p99 wait: FCFS \d+ cycles, fabric \d+ cycles", out), out


@pytest.mark.cosim
def test_wheel_replays_on_icarus_with_builds_under_the_working_directory(installed):
    work = installed["work"]
    (work / "c.toml").write_text(
        '[fabric]\nclock_mhz = 1000\nchannels = 1\nchannel_gbps = 64\nadmission_limit = 0.85\ntenants = 2\n'
        '[[tenant]]\nid = 0\nname = "a"\nguaranteed_gbps = 16\nburst_gbps = 32\nburst_duration_ms = 0.01\n'
        'priority = 1\nlatency_slo_us = 1\n'
        '[[tenant]]\nid = 1\nname = "b"\nguaranteed_gbps = 16\nburst_gbps = 32\nburst_duration_ms = 0.01\n'
        'priority = 1\nlatency_slo_us = 1\n')
    rows = ["cycle,channel,tenant,bytes"] + [f"{3 * i},0,{i % 2},{64 << (i % 3)}" for i in range(40)]
    (work / "t.csv").write_text("\n".join(rows) + "\n")
    for engine in ("model", "icarus"):
        _run([installed["bin"] / "kvfabric", "replay", "--config", "c.toml", "--trace", "t.csv",
              "--out", f"{engine}.csv", "--engine", engine], cwd=work, env=installed["env"])
    assert (work / "model.csv").read_text() == (work / "icarus.csv").read_text()
    assert (work / "build" / "cocotb").is_dir()
    assert not (installed["site"] / "build").exists() and not (installed["site"].parent / "build").exists()


# Paths that lead out of a public clone: anything under the workplace's /work/, or a
# relative path climbing above the repository.
_OUTSIDE = re.compile(r"(?:\.\./shared|/work/|shared/(?:TOOLCHAIN|STYLE|HBM3)\.md|shared/reference)")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _tracked_text_files():
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    for name in names:
        path = ROOT / name
        if path.suffix in (".py", ".md", ".toml", ".sh", ".vlt", ".rdl", "") and path.is_file():
            yield path


def test_no_file_names_a_path_outside_the_repository():
    errors = []
    for path in _tracked_text_files():
        if path == Path(__file__).resolve():
            continue  # the patterns above would match themselves
        text = path.read_text(errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if _OUTSIDE.search(line):
                errors.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
            if path.suffix == ".md":
                for target in _LINK.findall(line):
                    if re.match(r"[a-z]+:", target):
                        continue  # a URL
                    resolved = (path.parent / target).resolve()
                    if not resolved.is_relative_to(ROOT) or not resolved.exists():
                        errors.append(f"{path.relative_to(ROOT)}:{n}: link {target} does not resolve in the repository")
    assert errors == []


# A document cited by name: a word ending in ".md" (the notes that slipped past the
# patterns above were cited bare, "(iface.md)", "(HBM3.md)", "TOOLCHAIN.md", after
# the /work/... prefix had been dropped from the comment).
_CITED = re.compile(r"(?<![\w.$-])((?:[\w.<>-]*/)*[\w.-]*\w\.md)\b")


def _prose(path, text):
    """``(line, text)`` of what a reader reads as prose: a Markdown file whole;
    Python comments and docstrings (not code, where ``args.md`` is an attribute
    and ``"f.md"`` a scratch file); ``#`` and ``//`` comments elsewhere."""
    if path.suffix == ".md":
        yield from enumerate(text.splitlines(), 1)
    elif path.suffix == ".py":
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                yield tok.start[0], tok.string
        for node in ast.walk(ast.parse(text)):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                for k, line in enumerate(body[0].value.value.splitlines()):
                    yield body[0].lineno + k, line
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if re.match(r"\s*(#|//)", line):
                yield n, line


def _resolves(name, path, tracked):
    """A cited document is in the repository: by its path (from the root or from
    the citing file), or by its file name (a generated report such as
    ``<out>/experiments.md`` is named after its tracked copy)."""
    for base in (ROOT, path.parent):
        target = (base / name.lstrip("/")).resolve()
        if target.is_relative_to(ROOT) and target.relative_to(ROOT).as_posix() in tracked:
            return True
    return Path(name).name in {Path(t).name for t in tracked}


def test_no_file_cites_a_document_outside_the_repository():
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split())
    errors = []
    for path in _tracked_text_files():
        if path == Path(__file__).resolve():
            continue  # the comment above names the notes it was written for
        for n, line in _prose(path, path.read_text(errors="replace")):
            for name in _CITED.findall(line):
                if not _resolves(name, path, tracked):
                    errors.append(f"{path.relative_to(ROOT)}:{n}: {name} is not a file of the repository")
    assert errors == []


def test_the_document_check_catches_the_citations_that_slipped_past(tmp_path):
    # What commit 4a18289 found by hand: a bare note name in a comment, a docstring
    # and Markdown; code that merely ends in ".md" is not prose.
    tracked = {"docs/toolchain.md", "reports/experiments.md"}
    source = tmp_path / "x.py"
    text = ('"""Credits (iface.md) and ``<out>/experiments.md``."""\n'
            "# HBM3 6400 (HBM3.md); binaries as TOOLCHAIN.md says, see docs/toolchain.md\n"
            "out = args.md\nopen('f.md')\n")
    cited = [name for _, line in _prose(source, text) for name in _CITED.findall(line)]
    assert sorted(cited) == sorted(["iface.md", "<out>/experiments.md", "HBM3.md", "TOOLCHAIN.md",
                                    "docs/toolchain.md"])
    assert sorted(name for name in cited if not _resolves(name, ROOT / "x.py", tracked)) == \
        ["HBM3.md", "TOOLCHAIN.md", "iface.md"]
    markdown = tmp_path / "x.md"
    assert [m for _, line in _prose(markdown, "as the project's notes (iface.md) say")
            for m in _CITED.findall(line)] == ["iface.md"]
