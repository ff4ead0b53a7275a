"""eval-real-engine: the question set through the agent on a real engine (llama-server + SmolLM2-135M, or a
Qwen2.5-Coder model by --model), native and constrained tool calling, then `agent-eval compare` of the two runs.

SmolLM2 is a 135M model: its accuracy says nothing about a model anyone would deploy; it shows what constrained
decoding guarantees whatever the model (every decision valid) and what a round costs. The Qwen2.5-Coder models
(qwen-0.5b, qwen-1.5b) do choose tools. Usage: scripts/eval-real-engine [--model smollm2|qwen-0.5b|qwen-1.5b]
[--modes native,constrained,name-first] [--out DIR] [agent-eval run options such as --tag core]; `name-first` is
TOOL_CALLING=constrained with TOOL_DECISION=name_first. Two modes: `agent-eval compare` of the first and second.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from agent.eval import cli as eval_cli
from tests.support.real_engine import agent_stack, engine, served_name

# A mode: TOOL_CALLING and the other settings it stands for.
MODES = {
    "native": ("native", {}),
    "constrained": ("constrained", {"TOOL_DECISION": "whole"}),
    "name-first": ("constrained", {"TOOL_DECISION": "name_first"}),
}


def stop_on_sigterm() -> None:
    """A SIGTERM (kill, pkill, a CI timeout) ends the run as Ctrl-C does, through the `with` blocks that stop the
    engine and the agent stack: by default it ended only this process, and they ran on under init (four
    llama-servers of the 1.5B, ~1.3 GB each, after two runs were stopped)."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def main(argv: list[str] | None = None) -> int:
    stop_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--model", default="qwen-1.5b", help="scripts/llama-server's --model")
    parser.add_argument("--modes", default="native,constrained")
    parser.add_argument("--out", type=Path, default=None, help="default evals/results/MODEL")
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--n-predict", type=int, default=96, help="the engine's token limit per round")
    args, rest = parser.parse_known_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"unknown mode {unknown[0]!r} (modes: {', '.join(MODES)})")
    out_root: Path = args.out or Path("evals/results") / args.model
    name = served_name(args.model)
    with engine(args.ctx, args.n_predict, args.model) as url:
        for mode in modes:
            tool_calling, extra = MODES[mode]
            with agent_stack(url, tool_calling, model_name=name, **extra) as api:
                out = out_root / mode
                code = eval_cli.main(["run", "--base-url", api, "--model", name, "--tool-calling", tool_calling,
                                      "--out", str(out), *rest])  # fmt: skip
                if code not in (0, 1):
                    return code
    if len(modes) >= 2:
        before, after = (out_root / m / f"{eval_cli.slug(name)}.json" for m in modes[:2])
        return eval_cli.main(["compare", str(before), str(after), "--out", str(out_root / "compare.md")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
