"""Start-up time of ``import psheads`` and the command line, as ratios to ``import torch``.

Each command runs in a fresh interpreter; the best of ``--repeat`` runs counts (the least
disturbed by other load on the machine)::

    python benchmarks/startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

COMMANDS = {
    "import torch": [sys.executable, "-c", "import torch"],
    "import psheads": [sys.executable, "-c", "import psheads"],
    "psheads --help": [sys.executable, "-m", "psheads", "--help"],
    "psheads.score_heads": [sys.executable, "-c", "import psheads; psheads.score_heads"],
}


def best_seconds(command: list[str], repeat: int) -> float:
    """The shortest wall time of ``repeat`` runs of ``command``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per command (the best counts)")
    args = parser.parse_args()
    seconds = {name: best_seconds(command, args.repeat) for name, command in COMMANDS.items()}
    torch_s = seconds["import torch"]
    print(f"{'command':<22} {'best s':>7} {'/ import torch':>14}   (best of {args.repeat}, fresh interpreters)")
    for name, value in seconds.items():
        print(f"{name:<22} {value:>7.3f} {value / torch_s:>14.2f}")


if __name__ == "__main__":
    main()
