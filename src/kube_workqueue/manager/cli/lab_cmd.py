"""`workqueue lab`: watch the workqueue absorb a firehose of adds (`manager.views.lab` runs it)."""

from __future__ import annotations

from .argtypes import at_most, duration, fraction, positive_float, workers

MAX_KEYS = 10_000  # the lab shows dedup on a few hot keys; it drains them all at its end


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "lab",
        help="the firehose lab: watch the queue absorb adds",
        description="Fire adds at a rate onto a few keys and watch the queue dedup them.",
    )
    p.add_argument("--rate", type=positive_float, help="adds per second (default 50000)")
    p.add_argument("--keys", type=at_most(MAX_KEYS, "a lab of hot keys"),
                   help="distinct hot keys (default 20)")  # fmt: skip
    p.add_argument("--duration", type=duration, default=10.0, help="how long (default 10s)")
    p.add_argument("--workers", type=workers, default=5, help="workers (default 5)")
    p.add_argument("--work-ms", type=positive_float, help="reconcile time in ms (default 5)")
    p.add_argument("--fail-rate", type=fraction, default=0.1, help="failure share (0.1)")
    p.add_argument("--slow", action="store_true", help="slow motion, one line per event")
    p.add_argument("--seed", type=int, help="random seed for a repeatable run")
    p.set_defaults(func=run_lab_command)


def run_lab_command(args) -> int:
    from ..views.lab import SLOW_DEFAULTS, LabConfig, run_lab

    defaults = SLOW_DEFAULTS if args.slow else {}
    config = LabConfig(
        rate=args.rate or defaults.get("rate", 50_000.0),
        keys=args.keys or defaults.get("keys", 20),
        duration=args.duration,
        workers=args.workers,
        work_ms=args.work_ms or defaults.get("work_ms", 5.0),
        fail_rate=args.fail_rate,
        slow=args.slow,
        seed=args.seed,
    )
    run_lab(config)
    return 0
