"""`bench/sampler.py` runs a module as ``python -m`` would and writes where its CPU went."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.kit.paths import REPO


def test_the_sampler_runs_the_module_and_names_the_function_that_spent_the_cpu(
    tmp_path: Path,
) -> None:
    (tmp_path / "burner.py").write_text(
        "import sys, time\n"
        "def burn_cpu():\n"
        "    end = time.process_time() + 0.3\n"
        "    while time.process_time() < end:\n"
        "        pass\n"
        "if __name__ == '__main__':\n"
        "    burn_cpu()\n"
        "    print(sys.argv[1:])\n"
    )
    out = tmp_path / "profile.txt"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "sampler.py"), str(out), "-m", "burner", "a", "b"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['a', 'b']"  # the module's own arguments
    report = out.read_text()
    samples = int(report.split()[0])
    assert samples >= 10  # 300 ms of CPU: 75 ticks at the coarsest common timer (4 ms)
    own = report.split("own:", 1)[1].split("under", 1)[0]
    assert "(burn_cpu)" in own.splitlines()[1]  # the top line
