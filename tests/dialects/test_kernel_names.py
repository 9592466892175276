"""Kernel names as tables show them: a demangled C++ signature on one line, the full name kept in JSON."""

from __future__ import annotations

import json

import pytest
from conftest import DATA

from perftool.common.names import readable

REAL = DATA / "real"
FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
    "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
)


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        (FILL, "vectorized_elementwise_kernel<4, FillFunctor<…>, Array<…>>"),
        ("void at::native::(anonymous namespace)::softmax_warp_forward<float, float, 7>(float*, int)",
         "softmax_warp_forward<float, float, 7>"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
         "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        ("aten::addmm", "aten::addmm"),  # an op's namespace is part of its name
        ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),  # words in brackets stay
        ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"),
        (  # vLLM's kernel (the real B200 capture's): a return type chosen by enable_if, whose '>' is an operator
            "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
            "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, float, int)",
            "fused_add_rms_norm_kernel<BFloat16, 8>",
        ),
        ("void f<((8)>(0)), decltype(g)>(int)", "f<((8)>(0)), decltype(g)>"),  # still in its template arguments
        ("<frozen os>(674): __getitem__", "<frozen os>(674): __getitem__"),  # Python's, no return type before it
        # an occurrence's name around a call: its words are no return type, a compiled call keeps its function
        ("idle while host runs PjitFunction(add)", "idle while host runs PjitFunction(add)"),
        ("idle while host runs at::native::f<int>(float*)", "idle while host runs f<int>"),
    ],
)  # fmt: skip
def test_a_signature_keeps_its_function_and_first_template_arguments(name, shown):
    assert readable(name) == shown


def test_a_name_longer_than_its_width_is_cut_once():
    assert readable(FILL, 30) == "vectorized_elementwise_kernel…" and len(readable(FILL, 30)) == 30
    assert readable("aten::addmm", 30) == "aten::addmm"


def test_info_prints_one_line_a_kernel_at_80_columns_and_json_keeps_the_full_name(run, monkeypatch):
    """A real DLRM-style capture whose kernels carry whole signatures (embedding kernels of ~400 characters)."""
    monkeypatch.setenv("COLUMNS", "80")
    capture = REAL / "ddp_v100_rank1.json.gz"
    text = run("info", capture).stdout
    table = text[text.index("Top device ops by time") :].splitlines()
    rows = table[4 : table.index(next(line for line in table if line.startswith("└")))]
    assert len(rows) == 10 and all(len(line) <= 80 and line.rstrip().endswith("% │") for line in rows)
    assert any("…" in line for line in rows)  # a name cut, not wrapped onto the next line
    document = json.loads(run("info", capture, "--format", "json").stdout)
    assert max(len(op["name"]) for op in document["top_ops"]["ops"]) > 200
