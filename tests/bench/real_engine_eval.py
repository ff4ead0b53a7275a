"""eval-real-engine: the question set through the agent on the real tiny engine (llama-server + SmolLM2-135M),
native and constrained tool calling, then `agent-eval compare` of the two runs.

A 135M model: its accuracy says nothing about a model anyone would deploy. What it shows is what constrained
decoding guarantees whatever the model (every decision valid) and what a round costs. Usage:
scripts/eval-real-engine [--modes native,constrained] [--out DIR] [agent-eval run options such as --tag core]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent.eval import cli as eval_cli
from tests.support.real_engine import MODEL, agent_stack, engine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--modes", default="native,constrained")
    parser.add_argument("--out", type=Path, default=Path("evals/results/smollm2"))
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--n-predict", type=int, default=96, help="the engine's token limit per round")
    args, rest = parser.parse_known_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    with engine(args.ctx, args.n_predict) as url:
        for mode in modes:
            with agent_stack(url, mode) as api:
                out = args.out / mode
                code = eval_cli.main(["run", "--base-url", api, "--model", MODEL, "--tool-calling", mode,
                                      "--out", str(out), *rest])  # fmt: skip
                if code not in (0, 1):
                    return code
    if len(modes) == 2:
        before, after = (args.out / m / "smollm2_135m.json" for m in modes)
        return eval_cli.main(["compare", str(before), str(after), "--out", str(args.out / "compare.md")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
