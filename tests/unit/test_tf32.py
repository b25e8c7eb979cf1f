"""``BuilderFlag.TF32``: set in a new config as in TensorRT, recorded in the plan, and PyTorch's switches scoped."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
from plugrt.backends.cpu import CpuBackend
from plugrt.backends.tf32 import TF32Scope, tf32_scope
from plugrt.engine.plan import EnginePlan
from plugrt.engine.plan_format import PlanFormatError

LOGGER = trt.Logger(trt.Logger.ERROR)


def _plan(clear: bool) -> EnginePlan:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 3))
    network.mark_output(network.add_activation(x, trt.ActivationType.RELU).get_output(0))
    config = builder.create_builder_config()
    if clear:
        config.clear_flag(trt.BuilderFlag.TF32)
    return builder.build_plan(network, config)


def test_a_new_config_allows_tf32_as_tensorrt_does() -> None:
    config = trt.Builder(LOGGER).create_builder_config()
    assert config.get_flag(trt.BuilderFlag.TF32)
    assert config.flags == 1 << int(trt.BuilderFlag.TF32)
    config.flags = 1 << int(trt.BuilderFlag.FP16)  # the samples' way of setting flags clears it, as in TensorRT
    assert not config.get_flag(trt.BuilderFlag.TF32)


@pytest.mark.parametrize("clear", [False, True])
def test_the_plan_records_the_flag_through_its_file(clear: bool) -> None:
    plan = _plan(clear)
    assert plan.tf32 is not clear
    assert EnginePlan.from_bytes(plan.to_bytes()).tf32 is not clear


def test_a_plan_without_the_entry_runs_strict_fp32() -> None:
    plan = _plan(False)
    contents = plan._contents(dict(plan.weights))
    del contents.header["tf32"]
    from plugrt.engine.plan import _checked_decode

    assert _checked_decode(contents).tf32 is False


def test_a_plan_with_a_bad_entry_is_refused() -> None:
    plan = _plan(False)
    contents = plan._contents(dict(plan.weights))
    contents.header["tf32"] = "yes"
    from plugrt.engine.plan import _checked_decode

    with pytest.raises(PlanFormatError, match="tf32"):
        _checked_decode(contents)


def test_the_cpu_has_no_tf32_and_runs_the_same() -> None:
    with CpuBackend().math_scope(True):
        pass
    for clear in (False, True):
        engine = trt.Runtime(LOGGER).deserialize_cuda_engine(_plan(clear).to_bytes())
        context = engine.create_execution_context()
        x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        y = np.full((2, 3), 7, np.float32)
        context.set_tensor_address(engine.get_tensor_name(0), x.ctypes.data)
        context.set_tensor_address(engine.get_tensor_name(1), y.ctypes.data)
        context.execute_async_v3(0)
        assert np.array_equal(y, np.maximum(x, 0))


class _Legacy:
    """A PyTorch switch holder with the legacy attribute."""

    def __init__(self, value: bool) -> None:
        self.allow_tf32 = value
        self.fp32_precision = "none"


class _Modern:
    """A holder whose legacy read raises, as PyTorch's does once the caller used ``fp32_precision``."""

    def __init__(self, value: str) -> None:
        self.fp32_precision = value
        self.legacy_writes = 0

    @property
    def allow_tf32(self) -> bool:
        raise RuntimeError("mix of the legacy and new APIs")

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        self.legacy_writes += 1


class _Torch:
    def __init__(self, matmul: object, cudnn: object) -> None:
        self.backends = type("B", (), {})()
        self.backends.cuda = type("C", (), {"matmul": matmul})()
        self.backends.cudnn = cudnn


@pytest.mark.parametrize("allowed", [False, True])
def test_the_scope_sets_the_legacy_switches_and_restores_them(allowed: bool) -> None:
    matmul, cudnn = _Legacy(False), _Legacy(True)
    with TF32Scope(_Torch(matmul, cudnn), allowed):
        assert matmul.allow_tf32 is allowed and cudnn.allow_tf32 is allowed
        with TF32Scope(_Torch(matmul, cudnn), not allowed):  # nested: the inner one restores the outer's
            assert matmul.allow_tf32 is not allowed
        assert matmul.allow_tf32 is allowed
    assert matmul.allow_tf32 is False and cudnn.allow_tf32 is True


def test_the_scope_keeps_to_the_new_switches_where_the_caller_used_them() -> None:
    matmul, cudnn = _Modern("ieee"), _Modern("tf32")
    with TF32Scope(_Torch(matmul, cudnn), True):
        assert matmul.fp32_precision == "tf32" and cudnn.fp32_precision == "tf32"
    with TF32Scope(_Torch(matmul, cudnn), False):
        assert matmul.fp32_precision == "ieee" and cudnn.fp32_precision == "ieee"
    assert (matmul.fp32_precision, cudnn.fp32_precision) == ("ieee", "tf32")
    assert matmul.legacy_writes == cudnn.legacy_writes == 0  # never mixed


def test_without_torch_the_scope_changes_nothing() -> None:
    with tf32_scope(None, True):
        pass


def test_the_scope_on_pytorch_itself() -> None:
    torch = pytest.importorskip("torch")
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    with tf32_scope(torch, not before[0]):
        assert torch.backends.cuda.matmul.allow_tf32 is (not before[0])
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


class _Counted(_Legacy):
    """A legacy holder that counts writes of its switch."""

    def __init__(self, value: bool) -> None:
        self.writes = 0
        super().__init__(value)
        self.writes = 0

    def __setattr__(self, name: str, value: object) -> None:
        if name == "allow_tf32":
            self.__dict__["writes"] = self.__dict__.get("writes", 0) + 1
        super().__setattr__(name, value)


def test_the_scope_writes_no_switch_that_already_holds_the_wanted_value() -> None:
    """An eager run enters the scope once: switches already as wanted are neither set nor restored."""
    matmul, cudnn = _Counted(False), _Counted(True)
    with TF32Scope(_Torch(matmul, cudnn), False):
        assert matmul.allow_tf32 is False and cudnn.allow_tf32 is False
    assert matmul.writes == 0 and cudnn.writes == 2  # cuDNN's set, then restored
    assert cudnn.allow_tf32 is True
