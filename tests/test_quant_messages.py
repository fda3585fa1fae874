"""The quant input's words and the storages it accepts (engine/plan/quant.py): every weight scheme the Planner
lists is accepted, llama.cpp file types also with +imatrix / -imatrix (and only they), anything else is refused
with the reviewed message listing the choices (tests/golden/engine_texts.json, "quant ..." keys); a scheme that
does not quantize a tensor by itself says so when asked for its bytes."""
from __future__ import annotations

import pytest

from engine.plan import Setup, setup_problems
from engine.plan.gguf import FILE_TYPES
from engine.plan.quant import PLAIN_QUANTS, WEIGHT_QUANTS, quant_problem, quantized_bytes

from tests.golden import check_golden


def test_every_listed_scheme_is_accepted_and_file_types_take_either_suffix() -> None:
    assert WEIGHT_QUANTS == (*PLAIN_QUANTS, "checkpoint", *(f"gguf:{f}" for f in FILE_TYPES))
    for scheme in WEIGHT_QUANTS:
        assert quant_problem(scheme) is None, scheme
    for f in FILE_TYPES:
        for suffix in ("+imatrix", "-imatrix"):
            assert setup_problems(Setup(mode="infer", quant=f"gguf:{f}{suffix}")) == [], (f, suffix)


REFUSED = ["int3", "int8+imatrix", "nf4-imatrix", "checkpoint+imatrix", "gguf:Q4_K_X", "gguf:q4_k_m",
           "gguf:Q4_K_M+imatrix+imatrix", "gguf:Q4_K_M-imatrix+imatrix", "gguf:+imatrix", "Q4_K_M", "gguf:Q4_K_M imatrix"]


@pytest.mark.parametrize("scheme", REFUSED)
def test_a_scheme_not_listed_is_refused_with_the_reviewed_words(scheme: str) -> None:
    """The suffix is only a llama.cpp file type's (a plain scheme has no importance matrix), and only once."""
    problem = quant_problem(scheme)
    assert problem is not None and setup_problems(Setup(mode="infer", quant=scheme)) == [problem]
    check_golden("engine_texts", f"quant refused {scheme}", problem)


@pytest.mark.parametrize("scheme", ["none", "checkpoint", "gguf:Q4_K_M", "int3"])
def test_bytes_under_a_scheme_that_does_not_quantize_by_itself_say_why(scheme: str) -> None:
    with pytest.raises(ValueError) as e:
        quantized_bytes((64, 64), scheme)
    check_golden("engine_texts", f"quantized_bytes refused {scheme}", str(e.value))


def test_an_unknown_file_type_asked_of_the_gguf_module_is_refused_with_the_reviewed_words() -> None:
    from engine.plan.gguf import file_types
    from engine.presets import get_preset
    with pytest.raises(ValueError) as e:
        file_types(get_preset("microgpt").config, "Q4_K_X")
    check_golden("engine_texts", "gguf file type refused Q4_K_X", str(e.value))
