"""Long run of the property-based fuzz test (tests/tooling/test_fuzz.py): random op chains over random
dtypes and shapes, exported and compared with eager PyTorch.

    python tools/sweeps/fuzz.py --examples 2000 [--seed N]

Prints every failing chain (hypothesis shrinks it to a small one first); add it to
``REGRESSIONS`` in tests/tooling/test_fuzz.py once understood.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from hypothesis import HealthCheck, given, seed as hypothesis_seed, settings  # noqa: E402

from fuzz_chains import chains, check_chain  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random)")
    parser.add_argument("--max-steps", type=int, default=4)
    options = parser.parse_args(argv)

    @settings(max_examples=options.examples, deadline=None, database=None, print_blob=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(chains(max_steps=options.max_steps))
    def run(chain):
        check_chain(chain)

    if options.seed is not None:
        run = hypothesis_seed(options.seed)(run)
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - the failing chain is the result
        print(f"FAILED: {exc}")
        return 1
    print(f"{options.examples} chains matched eager")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
