#!/usr/bin/env python3
"""Writes src/costs/h200.rs: what each NVML call the fake exports costs on a real H200.

The numbers are measurements, not estimates, wherever the reference has one:

* costs/nvml-profile-h200.json: a verbatim copy of shared/reference/h200-nvml/nvml-profile.json
  (wall and CPU time per call, mean of 50 calls, 5 for PCIe throughput, one thread; one
  NVIDIA H200, driver 580.159.04, in a Firecracker VM).
* costs/field-costs-h200.json: three keys of shared/reference/h200-nvml/gpm-h200.json,
  copied verbatim: the field ids the H200 answers, and the cost of reading all of them
  batched and one by one.
* costs/gpm-costs-h200.json: two more values of gpm-h200.json, copied verbatim under their
  dotted paths: load.gpm.sample_get_us (one nvmlGpmSampleGet under load) and
  load.gpm.metrics_get_us (one nvmlGpmMetricsGet). The reference times them by the wall
  clock only; a sample read is the driver's work, so it is charged as CPU time too
  (wall = CPU), as every cheap call of the profile has it.

How a measurement becomes a table entry (MEASURED below says which profile key feeds which
function):

* A function measured under several keys (nvmlDeviceGetPcieThroughput: TX and RX) gets the
  mean. The deprecated and the current name of one NVML entry point share one measurement
  (nvmlDeviceGetComputeRunningProcesses, _v2 and _v3 all cost GetComputeRunningProcesses,
  timed on an idle GPU; through nvml-wrapper a GPU with processes takes two calls, the
  size query and the read, and each pays it).
* nvmlGpmSampleGet and nvmlGpmMigSampleGet (a sample of one GPU instance, not measured
  on its own) cost load.gpm.sample_get_us, nvmlGpmMetricsGet load.gpm.metrics_get_us
  (GPM_MEASURED below).
* A function not measured gets DEFAULT: the median wall and the median CPU time of the
  measured calls under 100 us ("most others 2-30 us").
* nvmlDeviceGetFieldValues pays per field id asked for, none per call:
  - the energy ids 83 (TOTAL_ENERGY_CONSUMPTION) and 191 (ENERGY) cost what
    nvmlDeviceGetTotalEnergyConsumption costs (the reference: "4.3 ms each");
  - every other id the H200 answers costs the rest of the one-by-one read of all of them,
    shared equally: (one_by_one - 2 x energy) / (ids - 2), wall and CPU alike (every cheap
    call in the profile has CPU = wall). The batched read was slower (12.0 ms against
    10.1 ms); the reference attributes both to the energy ids, so the smaller is used;
  - an id the H200 does not answer costs what field 91 (NVLINK_LINK_COUNT, NOT_SUPPORTED on
    this GPU) cost in a call of its own (GetFieldValues_91): FIELD_DEFAULT.
  Ids are those the C function receives: the driver's numbering, which differs from
  nvml-wrapper-sys 0.10's only for ids 251-273.

Usage:
    python3 costs/generate.py                  rewrite src/costs/h200.rs
    python3 costs/generate.py --check          fail when src/costs/h200.rs differs from what
                                               would be written
    python3 costs/generate.py --reference DIR  also check that the copies in costs/ match
                                               DIR (shared/reference/h200-nvml)

Stdlib only, deterministic.
"""

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CRATE = HERE.parent
PROFILE = HERE / "nvml-profile-h200.json"
FIELDS = HERE / "field-costs-h200.json"
GPM = HERE / "gpm-costs-h200.json"
LIB_RS = CRATE / "src" / "lib.rs"
OUT = CRATE / "src" / "costs" / "h200.rs"

# Exported function -> the nvml-profile keys that measured it.
MEASURED = {
    "nvmlDeviceGetClockInfo": ["GetClockInfo_SM"],
    "nvmlDeviceGetComputeRunningProcesses": ["GetComputeRunningProcesses"],
    "nvmlDeviceGetComputeRunningProcesses_v2": ["GetComputeRunningProcesses"],
    "nvmlDeviceGetComputeRunningProcesses_v3": ["GetComputeRunningProcesses"],
    "nvmlDeviceGetCount": ["DeviceGetCount"],
    "nvmlDeviceGetCount_v2": ["DeviceGetCount"],
    "nvmlDeviceGetCurrPcieLinkGeneration": ["GetCurrPcieLinkGeneration"],
    "nvmlDeviceGetCurrPcieLinkWidth": ["GetCurrPcieLinkWidth"],
    "nvmlDeviceGetCurrentClocksEventReasons": ["GetCurrentClocksThrottleReasons"],
    "nvmlDeviceGetCurrentClocksThrottleReasons": ["GetCurrentClocksThrottleReasons"],
    "nvmlDeviceGetEnforcedPowerLimit": ["GetEnforcedPowerLimit"],
    "nvmlDeviceGetHandleByIndex": ["GetHandleByIndex"],
    "nvmlDeviceGetHandleByIndex_v2": ["GetHandleByIndex"],
    "nvmlDeviceGetMaxClockInfo": ["GetMaxClockInfo_SM"],
    "nvmlDeviceGetMaxPcieLinkGeneration": ["GetMaxPcieLinkGeneration"],
    "nvmlDeviceGetMemoryInfo": ["GetMemoryInfo"],
    "nvmlDeviceGetMemoryInfo_v2": ["GetMemoryInfo_v2"],
    "nvmlDeviceGetPciInfo_v3": ["GetPciInfo"],
    "nvmlDeviceGetPcieReplayCounter": ["GetPcieReplayCounter"],
    "nvmlDeviceGetPcieThroughput": ["GetPcieThroughput_TX", "GetPcieThroughput_RX"],
    "nvmlDeviceGetPersistenceMode": ["GetPersistenceMode"],
    "nvmlDeviceGetPowerUsage": ["GetPowerUsage"],
    "nvmlDeviceGetRemappedRows": ["GetRemappedRows"],
    "nvmlDeviceGetTemperature": ["GetTemperature"],
    "nvmlDeviceGetTotalEccErrors": ["GetTotalEccErrors"],
    "nvmlDeviceGetTotalEnergyConsumption": ["GetTotalEnergyConsumption"],
    "nvmlDeviceGetUUID": ["GetUUID"],
    "nvmlDeviceGetUtilizationRates": ["GetUtilizationRates"],
    "nvmlDeviceGetViolationStatus": ["GetViolationStatus_power"],
    "nvmlDeviceGetEncoderUtilization": ["GetEncoderUtilization"],
}

# Exported function -> the gpm-costs key (a dotted path into gpm-h200.json) that timed it;
# wall time, charged as CPU time as well.
GPM_MEASURED = {
    "nvmlGpmSampleGet": "load.gpm.sample_get_us",
    "nvmlGpmMigSampleGet": "load.gpm.sample_get_us",
    "nvmlGpmMetricsGet": "load.gpm.metrics_get_us",
}

# Exported function -> the profile key of a comparable call, for a function the profile did
# not time: what it is compared with is named in the table.
# nvmlDeviceGetPlatformInfo copies a small struct of static board data, as
# nvmlDeviceGetPciInfo_v3 does; nvmlDeviceGetModuleId one static integer, as
# nvmlDeviceGetPersistenceMode does.
COMPARABLE = {
    "nvmlDeviceGetPlatformInfo": "GetPciInfo",
    "nvmlDeviceGetModuleId": "GetPersistenceMode",
}

# Timed profile keys the table does not use, and why.
UNUSED = {
    "GetBAR1MemoryInfo": "not exported by the fake",
    "GetFieldValues_91": "FIELD_DEFAULT",
    "GetFieldValues_energy_power_10": "which ten ids it read is not recorded",
}

ENERGY_FIELDS = (83, 191)
ENERGY_CALL = "GetTotalEnergyConsumption"
FIELD_DEFAULT_KEY = "GetFieldValues_91"
# Calls this cheap or cheaper make up DEFAULT.
CHEAP_US = 100.0
# Not NVML: the fake's own control export.
NOT_NVML = {"railscopeFakeNvmlSetFixture"}


def exported_functions():
    """The NVML functions in lib.rs's EXPORTED_SYMBOLS, so the table follows the exports."""
    text = LIB_RS.read_text()
    body = re.search(r"EXPORTED_SYMBOLS: &\[&str\] = &\[(.*?)\];", text, re.S)
    if not body:
        sys.exit(f"{LIB_RS}: EXPORTED_SYMBOLS not found")
    names = re.findall(r'"([A-Za-z0-9_]+)"', body.group(1))
    return sorted(set(names) - NOT_NVML)


def ns(us):
    return round(us * 1000)


def cost(wall_us, cpu_us):
    return (ns(wall_us), ns(cpu_us))


def build():
    profile = json.loads(PROFILE.read_text())
    fields = json.loads(FIELDS.read_text())
    gpm = json.loads(GPM.read_text())
    timed = {k: v for k, v in profile.items() if isinstance(v, dict) and "wall_us" in v}
    exported = exported_functions()

    problems = []
    for function, keys in MEASURED.items():
        if function not in exported:
            problems.append(f"MEASURED names {function}, which lib.rs does not export")
        problems += [f"{function}: profile has no timed key {k}" for k in keys if k not in timed]
    for function, key in GPM_MEASURED.items():
        if function not in exported:
            problems.append(f"GPM_MEASURED names {function}, which lib.rs does not export")
        if not isinstance(gpm.get(key), (int, float)):
            problems.append(f"{function}: {GPM.name} has no number at {key}")
        if function in MEASURED:
            problems.append(f"{function} is in both MEASURED and GPM_MEASURED")
    for function, key in COMPARABLE.items():
        if function not in exported:
            problems.append(f"COMPARABLE names {function}, which lib.rs does not export")
        if function in MEASURED or function in GPM_MEASURED:
            problems.append(f"{function} is measured and in COMPARABLE")
        if key not in timed:
            problems.append(f"{function}: profile has no timed key {key}")
    used = {k for keys in MEASURED.values() for k in keys} | {ENERGY_CALL}
    for key in sorted(timed):
        if key not in used and key not in UNUSED:
            problems.append(f"profile key {key} is neither in MEASURED nor in UNUSED")
    if problems:
        sys.exit("\n".join(problems))

    cheap = [v for v in timed.values() if v["wall_us"] < CHEAP_US]
    default = cost(
        statistics.median(v["wall_us"] for v in cheap),
        statistics.median(v["cpu_us"] for v in cheap),
    )

    calls = []
    for function in exported:
        keys = MEASURED.get(function)
        if function == "nvmlDeviceGetFieldValues":
            calls.append((function, (0, 0), "paid per field id: FIELDS, FIELD_DEFAULT"))
        elif function in GPM_MEASURED:
            key = GPM_MEASURED[function]
            how = f"gpm-h200.json {key} (wall, charged as CPU too)"
            calls.append((function, cost(gpm[key], gpm[key]), how))
        elif keys:
            wall = statistics.mean(timed[k]["wall_us"] for k in keys)
            cpu = statistics.mean(timed[k]["cpu_us"] for k in keys)
            how = " and ".join(keys) + (" (mean)" if len(keys) > 1 else "")
            calls.append((function, cost(wall, cpu), how))
        elif function in COMPARABLE:
            key = COMPARABLE[function]
            how = f"not measured: as {key}, a comparable call"
            calls.append((function, cost(timed[key]["wall_us"], timed[key]["cpu_us"]), how))
        else:
            calls.append((function, default, "not measured: DEFAULT"))

    energy = timed[ENERGY_CALL]
    ids = fields["ok_field_ids"]
    others = [i for i in ids if i not in ENERGY_FIELDS]
    if not all(e in ids for e in ENERGY_FIELDS):
        sys.exit(f"{FIELDS}: the energy ids {ENERGY_FIELDS} are not all answered")
    rest_us = fields["one_by_one_fields_us_without_energy"] - len(ENERGY_FIELDS) * energy["wall_us"]
    per_id_us = rest_us / len(others)
    field_rows = []
    for i in sorted(ids):
        if i in ENERGY_FIELDS:
            field_rows.append((i, cost(energy["wall_us"], energy["cpu_us"]), ENERGY_CALL))
        else:
            field_rows.append((i, cost(per_id_us, per_id_us), "share of the one-by-one read"))
    field_default = cost(timed[FIELD_DEFAULT_KEY]["wall_us"], timed[FIELD_DEFAULT_KEY]["cpu_us"])
    return calls, default, field_rows, field_default, per_id_us, len(others)


def num(n):
    """A Rust integer literal with `_` every three digits."""
    s = str(n)
    groups = []
    while len(s) > 3:
        groups.insert(0, s[-3:])
        s = s[:-3]
    groups.insert(0, s)
    return "_".join(groups)


def lit(c):
    return f"Cost::ns({num(c[0])}, {num(c[1])})"


def render():
    calls, default, field_rows, field_default, per_id_us, n_others = build()
    out = [
        "// @generated by tests/fake-nvml/costs/generate.py from costs/nvml-profile-h200.json,",
        "// costs/field-costs-h200.json and costs/gpm-costs-h200.json. Do not edit: change the",
        "// script, then run `python3 tests/fake-nvml/costs/generate.py` (`--check` verifies this",
        "// file).",
        "",
        "//! What each exported NVML function costs on one NVIDIA H200 (driver 580.159.04), as",
        "//! `Cost::ns(wall, cpu)` in nanoseconds. Measured means of one thread's calls; how each",
        "//! entry was derived is in the generator's docstring and the comment above it.",
        "",
        "use super::Cost;",
        "",
        "/// What a call the profile did not measure costs: the median of the measured calls",
        f"/// under {CHEAP_US:.0f} µs.",
        f"pub(crate) const DEFAULT: Cost = {lit(default)};",
        "",
        "/// Every NVML function the fake exports, sorted by name (`binary_search` relies on it).",
        "#[rustfmt::skip]",
        f"pub(crate) const CALLS: [(&str, Cost); {len(calls)}] = [",
    ]
    for function, c, how in calls:
        out.append(f"    // {how}")
        out.append(f'    ("{function}", {lit(c)}),')
    out += [
        "];",
        "",
        "/// What one id costs `nvmlDeviceGetFieldValues`, for each id the H200 answers, sorted.",
        f"/// The {n_others} ids other than energy share the rest of the one-by-one read equally",
        f"/// ({per_id_us:.2f} µs each).",
        "#[rustfmt::skip]",
        f"pub(crate) const FIELDS: [(u32, Cost); {len(field_rows)}] = [",
    ]
    for i, c, how in field_rows:
        if how == ENERGY_CALL:
            out.append(f"    // energy: {how}")
        out.append(f"    ({i}, {lit(c)}),")
    out += [
        "];",
        "",
        "/// What an id the H200 does not answer costs (GetFieldValues_91: field 91 alone).",
        f"pub(crate) const FIELD_DEFAULT: Cost = {lit(field_default)};",
        "",
    ]
    return "\n".join(out)


def check_reference(directory):
    ref = Path(directory)
    problems = []
    if json.loads((ref / "nvml-profile.json").read_text()) != json.loads(PROFILE.read_text()):
        problems.append(f"{PROFILE.name} differs from {ref / 'nvml-profile.json'}")
    gpm = json.loads((ref / "gpm-h200.json").read_text())
    ours = json.loads(FIELDS.read_text())
    for key in ours:
        if key != "source" and gpm.get(key) != ours[key]:
            problems.append(f"{FIELDS.name}: {key} differs from gpm-h200.json")
    for key, value in json.loads(GPM.read_text()).items():
        if key == "source":
            continue
        theirs = gpm
        for part in key.split("."):
            theirs = theirs.get(part) if isinstance(theirs, dict) else None
        if theirs != value:
            problems.append(f"{GPM.name}: {key} differs from gpm-h200.json")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--reference", metavar="DIR", help="also compare the copies with DIR")
    args = parser.parse_args()
    problems = check_reference(args.reference) if args.reference else []
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            script = (HERE / "generate.py").relative_to(CRATE.parent.parent)
            problems.append(f"{OUT} is stale: run python3 {script}")
    else:
        OUT.write_text(text)
    if problems:
        sys.exit("\n".join(problems))


if __name__ == "__main__":
    main()
