"""scripts/install_step.py with fake commands: a failing step shows its log's tail and path, a long one heartbeats."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP = ROOT / "scripts" / "install_step.py"


def step(tmp_path: Path, script: str, *extra: str) -> subprocess.CompletedProcess:
    # the system interpreter's way: a plain file, no package imports (the venv may not exist yet)
    return subprocess.run([sys.executable, "-S", str(STEP), "--step", "2/5", "--title", "fake step",
                           "--log", str(tmp_path / "logs" / "fake.log"), *extra, "--", "sh", "-c", script],
                          check=False, capture_output=True, text=True, timeout=60)


def test_a_failing_step_shows_the_tail_and_the_full_log_path(tmp_path):
    r = step(tmp_path, "for i in $(seq 1 100); do echo line$i; done; echo boom >&2; exit 3", "--tail", "5")
    assert r.returncode == 3
    out = r.stdout.splitlines()
    assert out[0] == "[2/5] fake step …"
    assert "[2/5] FAILED" in r.stdout and "exit status 3" in r.stdout
    shown = [ln.strip() for ln in out if ln.startswith("  ")]
    assert shown == ["line97", "line98", "line99", "line100", "boom"]   # the tail, stderr included, nothing earlier
    assert f"full log: {(tmp_path / 'logs' / 'fake.log').resolve()}" in r.stdout
    assert "line1\n" in (tmp_path / "logs" / "fake.log").read_text()     # the whole output is in the log


def test_a_long_step_prints_heartbeats_with_the_compilers_progress(tmp_path):
    script = "echo '[1/9] Building a.o'; sleep 0.7; echo '[7/9] Building b.o'; sleep 0.7"
    r = step(tmp_path, script, "--every", "0.3")
    assert r.returncode == 0, r.stdout
    beats = [ln for ln in r.stdout.splitlines() if ln.startswith("    … ")]
    assert len(beats) >= 3
    assert any("[1/9] Building a.o" in b for b in beats) and "[7/9] Building b.o" in beats[-1]
    assert r.stdout.splitlines()[-1].startswith("    done in ")
    assert not [ln for ln in r.stdout.splitlines() if "Building" in ln and ln not in beats]  # only in heartbeats


def test_output_stays_in_the_log_and_only_unknown_warnings_are_shown(tmp_path):
    script = ("echo \"WARNING: Location 'file:///opt/pypi/simple/x/' is ignored: it is neither a file nor a dir\"; "
              "echo 'SetuptoolsDeprecationWarning: `project.license` as a TOML table is deprecated'; "
              "echo 'Obtaining file:///work/main (editable install)'; echo 'Successfully installed x-1.0'; "
              "echo 'WARNING: the cache folder is not writable'; echo 'ERR finqa/dev.json could not be downloaded'")
    r = step(tmp_path, script)
    assert r.returncode == 0
    assert r.stdout.splitlines() == ["[2/5] fake step …", r.stdout.splitlines()[1],
                                     "    WARNING: the cache folder is not writable",
                                     "    ERR finqa/dev.json could not be downloaded"]
    assert "is ignored" not in r.stdout and "project.license" not in r.stdout and "Successfully" not in r.stdout


def test_a_command_that_cannot_start_is_a_failure_with_its_log(tmp_path):
    r = subprocess.run([sys.executable, "-S", str(STEP), "--title", "missing", "--log", str(tmp_path / "m.log"),
                        "--", str(tmp_path / "no-such-program")], check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 127 and "cannot start" in r.stdout and "full log:" in r.stdout
