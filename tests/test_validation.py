"""The argument checks outside the config speak the config's language: the same value gets the same message
from validation helpers as from ModelConfig's own field check."""
import pytest

from engine.config import FIELDS, ConfigError, ModelConfig
from engine.validation import choice_problem, int_problem, number_problem, require, size_problems


def config_problem(**kw) -> str:
    with pytest.raises(ConfigError) as e:
        ModelConfig(**kw)
    return e.value.problems[0]


@pytest.mark.parametrize("value", [0, -3, "wide", 2.5, True, None])
def test_int_problem_reads_like_the_config(value):
    if value is None:
        assert int_problem("d_model", value) == "d_model: None is not an integer >= 1"
        return
    assert int_problem("d_model", value) == config_problem(d_model=value)


@pytest.mark.parametrize("value", ["batchnorm", 3, ""])
def test_choice_problem_reads_like_the_config(value):
    assert choice_problem("norm", value, FIELDS["norm"].choices) == config_problem(norm=value)


def test_valid_values_pass_and_problems_are_joined():
    assert int_problem("batch", 1) is None and choice_problem("dtype", "bf16", ("fp32", "bf16")) is None
    assert number_problem("eps", 0.0) is None and number_problem("cap", 0.0, strict=True) == "cap: 0.0 is not a number > 0"
    assert number_problem("coeff", float("nan")) == "coeff: nan is not a number >= 0"
    assert size_problems(1, 8) == [] and size_problems(0, "x") == ["batch: 0 is not an integer >= 1",
                                                                   "seq: 'x' is not an integer >= 1"]
    with pytest.raises(ValueError, match="^batch: 0 is not an integer >= 1; dtype: 'fp8' is not one of fp32$"):
        require(None, int_problem("batch", 0), choice_problem("dtype", "fp8", ("fp32",)))
    require(None, None)   # nothing to report: no error


_MOE_FIELDS = [n for n, s in FIELDS.items() if s.group == "moe" and s.type is int]


@pytest.mark.parametrize("preset", ["deepseek-v3", "qwen1.5-moe-a2.7b"])
@pytest.mark.parametrize("name", _MOE_FIELDS)
def test_a_word_in_an_moe_count_is_its_one_problem(preset, name):
    """A MoE count given as a word ("two") is reported once, by its own field check: the rules that tie it to
    the other MoE fields wait for it, neither crashing on the word nor adding a second message about it."""
    from engine.presets import get_preset
    with pytest.raises(ConfigError) as e:
        get_preset(preset).config.replace(**{name: "two"})
    assert len(e.value.problems) == 1 and e.value.problems[0].startswith(f"{name}: 'two' is not an integer")
