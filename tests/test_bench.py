"""``python -m jittape bench``: the benchmark runner against references and other frameworks."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "benchmarks")
sys.path.insert(0, BENCHMARKS)

import runner  # noqa: E402
import workloads  # noqa: E402

WORKLOADS = ["seed_toy", "logreg"]
OURS = ["eager", "compiled", "numpy", "numba"]
# framework (import name) -> (label in the notes, its systems)
PEERS = {"jax": ("JAX", ["jax"]),
         "tensorflow": ("TensorFlow", ["tf_eager", "tf_function"]),
         "torch": ("PyTorch", ["torch_eager"]),
         "autograd": ("HIPS autograd", ["autograd"])}
# torch.compile compiles C++ for ~20 s cold on this machine: the full run covers it
SYSTEMS = OURS + [s for _, systems in PEERS.values() for s in systems]


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    json_path, plot_path = out / "bench.json", out / "bench.png"
    proc = subprocess.run(
        [sys.executable, "-m", "jittape", "bench", "--workloads", ",".join(WORKLOADS),
         "--systems", ",".join(SYSTEMS), "--repeat", "2", "--quick",
         "--json", str(json_path), "--plot", str(plot_path)],
        capture_output=True, text=True, timeout=600)
    report = json.loads(json_path.read_text()) if json_path.exists() else None
    return proc, report, plot_path


def test_bench_exits_0_and_prints_the_table(bench_run):
    proc, _, _ = bench_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("workload"))
    assert "jt eager" in lines[header] and "jt compiled" in lines[header]
    assert "numpy" in lines[header] and "numba" in lines[header]
    for k, name in enumerate(WORKLOADS):
        row, ratios = lines[header + 1 + 2 * k], lines[header + 2 + 2 * k]
        assert row.split()[0] == name
        assert float(row.split()[2].replace(",", "")) > 0           # jt compiled, us
        assert ratios.split()[1] == "1.00x"                          # compiled / compiled
    assert "first call, milliseconds" in proc.stdout


def test_bench_json_has_every_figure(bench_run):
    _, report, _ = bench_run
    assert set(report["workloads"]) == set(WORKLOADS)
    for name in WORKLOADS:
        results = report["workloads"][name]["results"]
        for key in OURS:
            r = results[key]
            assert r["status"] == "ok", (name, key, r)
            assert r["median_us"] > 0 and r["min_us"] <= r["median_us"]
            assert len(r["rounds_us"]) == 2 and r["number"] >= 1
            assert r["first_call_s"] > 0
        assert results["compiled"]["ratio_to_compiled"] == pytest.approx(1.0)
        assert results["eager"]["ratio_to_compiled"] == pytest.approx(
            results["eager"]["median_us"] / results["compiled"]["median_us"])
        for key in ("compiled", "numpy", "numba"):                   # checked before timing
            assert all(c["ok"] for c in results[key]["check"].values()), (name, key)
    machine = report["machine"]
    for field in ("platform", "cpus", "python", "numpy", "numba", "peers"):
        assert machine[field], field
    assert machine["cpu"]["llvm"]                  # LLVM's name of the micro-architecture
    assert report["command"].startswith("python -m jittape bench --workloads seed_toy,logreg")
    assert report["date"][:2] == "20"
    assert report["failed"] == []


def test_cpu_info_reads_the_first_processor(tmp_path):
    import timing
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\ncpu family\t: 25\nmodel\t\t: 1\n"
                       "model name\t: AMD EPYC 7B13\nflags\t\t: fpu avx2\n\n"
                       "processor\t: 1\ncpu family\t: 6\nmodel\t\t: 85\n")
    assert timing.cpu_info("znver3", str(cpuinfo)) == {
        "llvm": "znver3", "cpu family": "25", "model": "1", "model name": "AMD EPYC 7B13"}
    assert timing.cpu_info("generic", str(tmp_path / "missing")) == {"llvm": "generic"}


def test_bench_names_missing_peers_or_times_them(bench_run):
    proc, report, _ = bench_run
    for module, (label, systems) in PEERS.items():
        if importlib.util.find_spec(module) is None:
            assert label in report["missing_peers"]
            note = next(line for line in proc.stdout.splitlines()
                        if line.startswith("peers not installed"))
            assert label in note and "pip install -e '.[peers]'" in note
        else:
            assert label not in report["missing_peers"]
            assert report["machine"]["peers"][module]
            for name in WORKLOADS:
                for key in systems:
                    r = report["workloads"][name]["results"][key]
                    assert r["status"] == "ok" and r["median_us"] > 0, (name, key, r)


def test_bench_saves_a_png_plot(bench_run):
    _, _, plot_path = bench_run
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_path.stat().st_size > 10_000


def test_bench_help():
    proc = subprocess.run([sys.executable, "-m", "jittape", "bench", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    assert "--workloads" in proc.stdout and "--json" in proc.stdout
    assert "median" in proc.stdout and "torch.compile" in proc.stdout


# -- failures: a system that disagrees, a peer that breaks -------------------------------------


def test_verify_rejects_a_wrong_gradient():
    w = workloads.build("seed_toy")
    value, grads = w.reference_result()
    assert runner.verify(w, value, grads, (value, grads))["ok"]
    wrong = [grads[0], grads[1] * np.float32(1.01)]
    result = runner.verify(w, value, wrong, (value, grads))
    assert not result["ok"] and not result["w2"]["ok"] and result["w1"]["ok"]
    assert "w2" in result["summary"]
    assert not runner.verify(w, value + np.float32(1), grads, (value, grads))["ok"]
    # a float64 gradient for a float32 parameter is not the same computation
    assert not runner.verify(w, value, [g.astype(np.float64) for g in grads],
                             (value, grads))["ok"]


def _fake(kind, make):
    return runner.System(f"fake_{kind}", f"fake {kind}", kind, make)


def _wrong_numpy(w):
    def to_numpy(out):
        value, grads = workloads.unpack_reference(out)
        return value, [g * np.float32(2) for g in grads]
    return w.numpy_step(), to_numpy


def _raises(w):
    raise RuntimeError("this peer cannot run")


@pytest.mark.parametrize("kind, make, status, exit_status", [
    ("reference", _wrong_numpy, "failed", 1),      # disagrees: failed, not timed, exit 1
    ("peer", _raises, "error", 0),                 # a peer that breaks: reported, exit 0
])
def test_a_failing_system_is_reported(kind, make, status, exit_status, tmp_path, monkeypatch,
                                      capsys):
    fake = _fake(kind, make)
    monkeypatch.setitem(runner.SYSTEMS, fake.key, fake)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    out = tmp_path / "bench.json"
    code = runner.main(["--workloads", "seed_toy", "--systems", f"numpy,{fake.key}",
                        "--threads", "0", "--repeat", "1", "--quick", "--json", str(out)])
    assert code == exit_status
    result = json.loads(out.read_text())["workloads"]["seed_toy"]["results"]
    assert result["numpy"]["status"] == "ok" and result["numpy"]["median_us"] > 0
    assert result[fake.key]["status"] == status
    assert "median_us" not in result[fake.key]                       # not timed
    printed = capsys.readouterr().out
    assert f"{status.upper()}: seed_toy, {fake.label}" in printed
    if status == "failed":
        assert "disagrees with jt eager" in printed
    else:
        assert "this peer cannot run" in printed
