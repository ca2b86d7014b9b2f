"""Modes: PCSampling, Default and MMA objects and their strings.

Each scenario is ``def name(proton, out, rec)`` (see ``__init__``).
"""


def pcsampling_interval(proton, out, rec):
    proton.mode.PCSampling(interval=0)


def mode_strings(proton, out, rec):
    m = proton.mode
    rec("pc", str(m.PCSampling(interval=10)))
    rec("default", str(m.Default()))
    rec("mma", str(m.MMA(granularity="warp_group", optimizations="clock32,time_shift", buffer_strategy="flush",
                         buffer_type="global", buffer_size=64)))
    for bad in ({"granularity": "nope"}, {"optimizations": "nope"}, {"buffer_type": "x"}):
        try:
            m.Default(**bad)
        except ValueError as e:
            rec(str(sorted(bad)), str(e))
