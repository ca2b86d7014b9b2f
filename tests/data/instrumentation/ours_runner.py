"""Run a decode scenario through proton_ctypes in a fresh process (see scenarios.py).

Usage: python ours_runner.py <scenario.json> <out_base>; an exception is written to
``<out_base>.error`` as ``Type: message``.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))


def main():
    import warnings
    warnings.simplefilter("ignore")
    import triton
    import instr_scenarios as scenarios
    triton.runtime.driver.set_active(scenarios.fake_driver())
    scenario_path, out_base = sys.argv[1:3]
    out, err = scenarios.run_ours(scenario_path, out_base)
    if err:
        with open(out_base + ".error", "w") as f:
            f.write(err)


if __name__ == "__main__":
    main()
