"""The store at scale: the same operations timed as PostgreSQL grows from thousands of events to
millions.

    python -m bench.scale                           # steps 10k, 1M, 10M (docs/benchmarks.md)
    python -m bench.scale --steps 10k,1M            # the first two only
    python -m bench.scale --nice                    # fill at nice 19, backend included

It fills a dedicated database (``chatapp_scale_bench`` on ``--server``; created on first use,
``--fresh`` drops it) with a deployment's data in steps, and at each step times the same
operations on the same subjects while the rest of the tables grow around them (``fill``,
``measures``). The fill is server-side SQL (``generate_series`` over a few arrays a block), one
user's data a block and a transaction, its progress kept in the database: a run stopped at
any point continues where it stopped, and a step already measured under ``--label`` is not
measured again (``--remeasure`` does). With ``--nice`` the fill, and the database backend
that does its work, run at nice 19 and measurements at the priority they had: a measurement at
nice 19 on a busy machine times the other work, not the product. Figures go to
build/bench-scale.json, a plot to docs/bench-scale.png (``report``). Timings are printed, never
asserted.
"""
