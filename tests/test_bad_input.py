"""Bad input is refused with a message naming the file, line or table, the field
and the allowed range (issue #16's list of cases still missing)."""

import copy

import pytest

from kvfabric.model.contract import ContractError, compile_contract, load_contract
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.model.trace import TraceError, parse_trace, read_log
from kvfabric.spec import FabricParams

HEADER = "cycle,channel,tenant,bytes\n"


@pytest.mark.parametrize("text, message", [
    ("", r"t\.csv: empty file, expected header cycle,channel,tenant,bytes"),
    (HEADER, r"t\.csv: no requests after the header"),
    (HEADER + "\n\n", r"t\.csv: no requests after the header"),
    (HEADER + "0,-1,0,64\n", r"t\.csv:2: channel = -1 out of range 0\.\.7"),
    (HEADER + "0,0,-3,64\n", r"t\.csv:2: tenant = -3 out of range 0\.\.15"),
    (HEADER + "0,0,0,-64\n", r"t\.csv:2: bytes = -64 out of range 0\.\.8191"),
    (HEADER + "1_000,0,0,64\n", r"t\.csv:2: cycle must be an integer in decimal digits \(0-9, no sign but -, no _\), not '1_000'"),
    (HEADER + "0,0,0,6_4\n", r"t\.csv:2: bytes must be an integer in decimal digits"),
    (HEADER + "0,+1,0,64\n", r"t\.csv:2: channel must be an integer in decimal digits"),
    (HEADER + "0,0,0,64.0\n", r"t\.csv:2: bytes must be an integer in decimal digits"),
    (HEADER + "0,0,0,True\n", r"t\.csv:2: bytes must be an integer in decimal digits"),
])
def test_trace_errors_name_line_field_and_range(text, message):
    with pytest.raises(TraceError, match=message):
        parse_trace(text.splitlines(keepends=True), FabricParams(), source="t.csv")


def test_trace_accepts_plain_digits_with_spaces():
    rows = parse_trace([HEADER, " 3, 1 ,2, 64\n"], FabricParams(), source="t.csv")
    assert (rows[0].cycle, rows[0].channel, rows[0].tenant, rows[0].bytes) == (3, 1, 2, 64)


def test_grant_log_errors_name_line_and_field(tmp_path):
    log = tmp_path / "g.csv"
    log.write_text("id,arrival_cycle,grant_cycle,channel,tenant,bytes,kind\n0,1_0,12,0,1,64,burst\n")
    with pytest.raises(TraceError, match=r"g\.csv:2: arrival_cycle must be an integer in decimal digits"):
        read_log(log)
    log.write_text("id,arrival_cycle,grant_cycle,channel,tenant,bytes,kind\n0,1,12,0\n")
    with pytest.raises(TraceError, match=r"g\.csv:2: expected 7 fields"):
        read_log(log)


@pytest.mark.parametrize("body, message", [
    ("0,1,12,0,1,64,bursty\n", r"g\.csv:2: kind = 'bursty' is not a kind \(allowed: guaranteed, burst, fcfs, "
                                r"urgent, dropped\)"),
    ("0,1,,0,1,64,burst\n", r"g\.csv:2: grant_cycle: empty with kind 'burst'; a dropped request has an "
                             r"empty grant cycle"),
    ("0,1,5,0,9,64,dropped\n", r"g\.csv:2: grant_cycle: '5' with kind 'dropped'"),
    ("0,1,12,0,1,-,burst\n", r"g\.csv:2: bytes must be an integer in decimal digits"),
])
def test_grant_log_kind_and_grant_cycle_agree(tmp_path, body, message):
    _refused(read_log, tmp_path / "g.csv", "id,arrival_cycle,grant_cycle,channel,tenant,bytes,kind\n" + body,
             message)
    _refused(read_log, tmp_path / "g.csv", "", r"g\.csv:1: header must be id,.*, got nothing \(empty file\)")


def _refused(reader, path, text, message):
    """``reader`` refuses the file ``path`` holding ``text`` with ``message``."""
    path.write_text(text)
    with pytest.raises(TraceError, match=message):
        list(reader(path))


@pytest.mark.parametrize("line, message", [
    ("5 10 0 1 64 0\n", r"s\.txt:2: expected 7 fields 'op cycle a b c d e', got 6"),
    ("12 10 0 1 64 0 0\n", r"s\.txt:2: op = 12 is not an op \(allowed: 1 RESET, 2 WRITE"),
    ("x 10 0 1 64 0 0\n", r"s\.txt:2: op must be an integer in decimal digits .*not 'x'"),
    ("2 10 4096 6_4 15 0 0\n", r"s\.txt:2: WRITE data must be an integer in decimal digits"),
    ("3 10 0 -1 0 0 0\n", r"s\.txt:2: MODE idle = -1 out of range >= 0"),
    ("2 10 4096 1 +15 0 0\n", r"s\.txt:2: WRITE strobes must be an integer"),
    ("3 10 0 0 0 0 x\n", r"s\.txt:2: MODE e \(unused by MODE\) must be an integer"),
    ("9 1e3 0 0 0 0 0\n", r"s\.txt:2: END cycle must be an integer"),
])
def test_stimulus_errors_name_line_and_field(tmp_path, line, message):
    """The trace-driven testbench's program (tb/trace_format.py) is refused like
    a trace: file, line, and the field by its meaning for the line's op (its
    requests are a CSV trace, refused by model/trace.py's reader)."""
    from kvfabric.tb.trace_format import read_program
    _refused(read_program, tmp_path / "s.txt", "7 0 1 0 0 0 0\n" + line, message)


@pytest.mark.parametrize("line, message", [
    ("X 3 0\n", r"l\.log:2: not a port-log line \(G, A, E or S\): 'X 3 0'"),
    ("G 3 0 1 64 5\n", r"l\.log:2: a G line has 6 fields \(cycle channel tenant bytes id kind\), got 5"),
    ("G 3 0 1 6x4 5 0\n", r"l\.log:2: G bytes must be an integer in decimal digits .*not '6x4'"),
    ("A 3 0x10\n", r"l\.log:2: A address must be an integer"),
    ("E\n", r"l\.log:2: a E line has 1 fields \(cycle\), got 0"),
    ("\n", r"l\.log:2: not a port-log line"),
])
def test_testbench_grant_log_errors_name_line_and_field(tmp_path, line, message):
    from kvfabric.tb.trace_compare import read_sim_log
    _refused(lambda path: [read_sim_log(path)], tmp_path / "l.log", "G 1 0 1 64 0 0\n" + line, message)


# ---- contracts -------------------------------------------------------------------------------

FABRIC = {"clock_mhz": 1000, "channels": 8, "channel_gbps": 400, "admission_limit": 0.85}
TENANT = {"id": 0, "name": "a", "guaranteed_gbps": 10, "burst_gbps": 40, "burst_duration_ms": 1.0,
          "priority": 1, "latency_slo_us": 25}


def contract(fabric=None, tenant=None, drop_fabric=(), drop_tenant=()):
    f = dict(FABRIC, **(fabric or {}))
    t = dict(TENANT, **(tenant or {}))
    for k in drop_fabric:
        del f[k]
    for k in drop_tenant:
        del t[k]
    return {"fabric": f, "tenant": [t]}


@pytest.mark.parametrize("doc, message", [
    ({"tenant": [TENANT]}, r"c\.toml: missing \[fabric\] table"),
    ({"fabric": FABRIC}, r"c\.toml: at least one \[\[tenant\]\] table is required"),
    (contract({"admission_limit": 0}), r"\[fabric\]\.admission_limit must be in \(0, 1\], not 0"),
    (contract({"admission_limit": -0.5}), r"\[fabric\]\.admission_limit must be in \(0, 1\], not -0\.5"),
    (contract({"admission_limit": 1.01}), r"\[fabric\]\.admission_limit must be in \(0, 1\], not 1\.01"),
    (contract({"clock_mhz": 0}), r"\[fabric\]\.clock_mhz must be > 0, not 0"),
    (contract({"channel_gbps": 0}), r"\[fabric\]\.channel_gbps must be > 0"),
    (contract({"channels": 2.0}), r"\[fabric\]\.channels must be an integer, not 2\.0"),
    (contract({"channels": True}), r"\[fabric\]\.channels must be a number, not True"),
    (contract({"fcfs_bypass": 1}), r"\[fabric\]\.fcfs_bypass must be true or false, not 1"),
    (contract({"channels": 17}), r"\[fabric\]: .*channels"),
    (contract(tenant={"id": 1.0}), r"tenant 'a': id must be an integer, not 1\.0"),
    (contract(tenant={"id": -1}), r"tenant 'a': id must be >= 0, not -1"),
    (contract(tenant={"priority": True}), r"tenant 'a': priority must be a number, not True"),
    (contract(tenant={"priority": 1.5}), r"tenant 'a': priority must be an integer"),
    (contract(tenant={"weight": 0}), r"tenant 'a': weight must be > 0, not 0"),
    (contract(tenant={"weight": -2}), r"tenant 'a': weight must be > 0"),
    (contract(tenant={"guaranteed_gbps": 100000, "burst_gbps": 100000}),
     r"tenant 'a': guaranteed_gbps is unrepresentable: .* 16-bit register holds at most 65535"),
    (contract({"admission_limit": 1}, tenant={"guaranteed_gbps": 380, "burst_gbps": 100000}),
     r"tenant 'a': burst_gbps is unrepresentable"),
    (contract({"starvation_limit_us": 10**5}), r"\[fabric\]\.starvation_limit_us is unrepresentable"),
    (contract(drop_tenant=("name",)), r"tenant #1: missing key\(s\) name"),
])
def test_contract_errors_name_file_table_field_and_range(tmp_path, doc, message):
    import tomllib  # noqa: F401  (documents that the dict is what TOML would give)
    path = tmp_path / "c.toml"
    path.write_text(_toml(doc))
    with pytest.raises(ContractError, match=message) as info:
        load_contract(path)
    assert str(info.value).startswith(f"{path}: "), f"no file name in: {info.value}"


def _toml(doc):
    """Minimal TOML writer for the flat tables above (no third-party dependency)."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v + '"'
        return repr(v)
    out = []
    if "fabric" in doc:
        out.append("[fabric]")
        out += [f"{k} = {value(v)}" for k, v in doc["fabric"].items()]
    for t in doc.get("tenant", []):
        out.append("[[tenant]]")
        out += [f"{k} = {value(v)}" for k, v in t.items()]
    return "\n".join(out) + "\n"


def test_contract_dict_errors_without_a_file():
    with pytest.raises(ContractError, match=r"contract: missing \[fabric\] table"):
        compile_contract({"tenant": [copy.deepcopy(TENANT)]})
    with pytest.raises(ContractError, match=r"contract: at least one \[\[tenant\]\] table is required"):
        compile_contract({"fabric": dict(FABRIC), "tenant": []})


# ---- registers -------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, error, message", [
    ("rate", 1.7, TypeError, r"tenant register rate must be an integer, not 1\.7"),
    ("rate", True, TypeError, r"tenant register rate must be an integer, not True"),
    ("inv_weight", 256.0, TypeError, r"tenant register inv_weight must be an integer"),
    ("rate", 1 << 16, ValueError, r"rate = 65536 does not fit its 16-bit register \(allowed 0\.\.65535\)"),
    ("capacity", 1 << 28, ValueError, r"capacity = 268435456 does not fit its 28-bit register"),
    ("peak_rate", -1, ValueError, r"peak_rate = -1 does not fit .*allowed 0\.\.65535"),
    ("priority", 4, ValueError, r"priority = 4 does not fit its 2-bit register \(allowed 0\.\.3\)"),
    ("slo_cycles", 1 << 24, ValueError, r"slo_cycles = 16777216 does not fit its 24-bit register"),
])
def test_register_values_are_checked(field, value, error, message):
    with pytest.raises(error, match=message):
        TenantConfig(**{field: value})


@pytest.mark.parametrize("field, value, error, message", [
    ("starve_limit", 1 << 23, ValueError, r"starve_limit = 8388608 does not fit its 23-bit register"),
    ("starve_limit", 2.5, TypeError, r"starve_limit must be an integer, not 2\.5"),
    ("epoch_cycles", 1 << 32, ValueError, r"epoch_cycles = 4294967296 does not fit its 32-bit register"),
    ("fcfs_bypass", 2, ValueError, r"fcfs_bypass = 2 does not fit its 1-bit register"),
])
def test_fabric_register_values_are_checked(field, value, error, message):
    with pytest.raises(error, match=message):
        FabricConfig([TenantConfig()], **{field: value})


@pytest.mark.parametrize("fabric, message", [
    ({"credit_urgent": 256}, r"\[fabric\]\.credit_urgent must be an integer in 0\.\.255 \(.*\), not 256"),
    ({"credit_guaranteed": -1}, r"\[fabric\]\.credit_guaranteed must be an integer in 0\.\.255 .*not -1"),
    ({"credit_burst": 2.0}, r"\[fabric\]\.credit_burst must be an integer in 0\.\.255 .*not 2\.0"),
    ({"credit_burst": True}, r"\[fabric\]\.credit_burst must be an integer in 0\.\.255 .*not True"),
    ({"bulk_priorities": [4]}, r"\[fabric\]\.bulk_priorities must be a list of distinct priorities in 0\.\.3"),
    ({"bulk_priorities": [1, 1]}, r"\[fabric\]\.bulk_priorities must be .* not \[1, 1\]"),
    ({"bulk_priorities": 2}, r"\[fabric\]\.bulk_priorities must be a list .* not 2"),
    ({"arrival_priorities": [0, 4]}, r"\[fabric\]\.arrival_priorities must be a list of distinct priorities in "
                                     r"0\.\.3 \(conforming requests at these priorities are served oldest first\)"),
    ({"arrival_priorities": [1.5]}, r"\[fabric\]\.arrival_priorities must be .* not \[1\.5\]"),
    ({"arrival_priorities": "1"}, r"\[fabric\]\.arrival_priorities must be a list .* not '1'"),
    ({"bulk_run": 256}, r"\[fabric\]\.bulk_run must be an integer in 0\.\.255 .*not 256"),
    ({"bulk_run": -1}, r"\[fabric\]\.bulk_run must be an integer in 0\.\.255 .*not -1"),
    ({"bulk_run": 2.5}, r"\[fabric\]\.bulk_run must be an integer in 0\.\.255 .*not 2\.5"),
    ({"bulk_run": True}, r"\[fabric\]\.bulk_run must be an integer in 0\.\.255 .*not True"),
    ({"memory_round_trip_ns": 0}, r"\[fabric\]\.memory_round_trip_ns must be > 0, not 0"),
    ({"memory_request_bytes": 128}, r"\[fabric\]\.memory_request_bytes .* needs \[fabric\]\.memory_round_trip_ns"),
    ({"memory_round_trip_ns": 100, "memory_request_bytes": 8192},
     r"\[fabric\]\.memory_request_bytes must be an integer in 1\.\.4096 .*not 8192"),
    # 400 B/cycle x 1000 cycles / 4096 B = 97.7 fits; / 128 B = 3125 does not.
    ({"memory_round_trip_ns": 1000, "memory_request_bytes": 128},
     r"\[fabric\]\.memory_round_trip_ns is unrepresentable: .*credit_burst.* = 3125 .*allows 0\.\.255"),
])
def test_credit_key_errors_name_file_key_and_range(tmp_path, fabric, message):
    path = tmp_path / "c.toml"
    path.write_text(_toml(contract(fabric)))
    with pytest.raises(ContractError, match=message) as info:
        load_contract(path)
    assert str(info.value).startswith(f"{path}: "), f"no file name in: {info.value}"
