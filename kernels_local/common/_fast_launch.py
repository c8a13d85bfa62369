"""Launch a @triton.jit kernel without binding and specialising its arguments again on every call.

`kernel[grid](...)` binds every argument, works out what Triton specialises on and looks the
compiled kernel up by a string key, on every call.  Calls from one launch plan differ only in
their tensors' addresses, so the compiled kernel Triton returned on the first call is kept under
a key of what Triton specialises on, and later calls launch it directly:

- tensors: dtype and whether the address is 16-byte aligned;
- integers: equal to 1, divisible by 16, beyond 32 bits;
- tensor descriptors: base dtype and alignment, block shape, which shape and stride entries are
  divisible by 16;
- anything else (booleans, floats, constexprs): its type and value.

A caller whose scalars, constexprs and options are fixed by a plan of its own (the kernels'
planned eager paths) calls `Launcher.planned` with that plan's token: only the tensors' alignment
then varies, so the plan is the key (for aligned tensors), and the compiled kernel is launched with the current
stream, as Triton's own launcher does, without building its closure.

Under torch.compile the kernels' ops are `torch.library.triton_op`s whose bodies launch through
`torch.library.wrap_triton`, so that Inductor launches the kernel from its generated code;
`traceable` gives those bodies a kernel that wrap_triton accepts, also under the interpreter.

Each kernel repository is loaded, and published, as a package of its own, so each carries a
copy of this file, which kernels_local/build.py writes from kernels_local/common/.  Under Triton's
CPU interpreter there is no compiled kernel and every call goes through `kernel[grid]`.
"""

import itertools

import torch
from triton.runtime.jit import JITFunction

try:
    from triton import knobs
except ImportError:  # pragma: no cover - Triton before knobs: launch through CompiledKernel[grid]
    knobs = None

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - Triton before host-side descriptors
    TensorDescriptor = None

try:
    from triton.runtime.interpreter import InterpretedFunction
except ImportError:  # pragma: no cover - a Triton without the interpreter
    InterpretedFunction = None

_INT32 = range(-(2**31), 2**31)
# Distinct plans a launcher keeps; past this it starts again (a workload of ever-new shapes).
MAX_KERNELS = 256
_TOKENS = itertools.count()


def token() -> int:
    """A plan's identity for Launcher.planned: never reused, unlike id() of a freed plan."""
    return next(_TOKENS)


# What the kernels' planned eager paths share: which calls may take them, and their plan caches.
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
MAX_PLANS = 1024  # keys a plan cache keeps; past this it starts again


def plain(tensors, interpreted: bool) -> bool:
    """Plain tensors where the kernels run (CUDA, or the CPU under the interpreter): a subclass (a
    fake or functional tensor while tracing, say) or another device (meta) goes through the op,
    which handles it."""
    for t in tensors:  # a loop, not all(...): this runs on every eager call
        if type(t) not in _PLAIN_TYPES or not (t.is_cuda or (interpreted and t.is_cpu)):
            return False
    return True


def plan_key(tensors, *extra) -> tuple:
    """What a plan depends on: each tensor's shape, strides, dtype and device, and `extra`."""
    key = list(extra)
    for t in tensors:
        key += (t.shape, t.stride(), t.dtype, t.get_device())
    return tuple(key)


def remember(plans: dict, key, plan) -> None:
    if len(plans) >= MAX_PLANS:
        plans.clear()
    plans[key] = plan


def _base(a):
    return a if isinstance(a, torch.Tensor) else a.base


def _spec(a):
    if isinstance(a, torch.Tensor):
        return a.dtype, a.data_ptr() % 16 == 0
    if type(a) is int:
        return a == 1, a % 16 == 0, a in _INT32
    if TensorDescriptor is not None and isinstance(a, TensorDescriptor):
        return (a.base.dtype, a.base.data_ptr() % 16 == 0, tuple(a.block_shape),
                tuple(s % 16 == 0 for s in a.shape), tuple(s % 16 == 0 for s in a.strides))
    return type(a), a


class Launcher:
    """launcher(grid, args, constexprs, **options): kernel[grid](*args, **constexprs, **options),
    from the second call of a plan on through the compiled kernel.  `args` are the kernel's leading
    parameters, in the order of its signature; `constexprs` (a dict) all the parameters after them;
    `options` are num_warps, num_stages and the like."""

    def __init__(self, kernel):
        self.kernel = kernel
        # Only a real @triton.jit function returns a compiled kernel to keep (a test's stand-in
        # for one, or the interpreter's function, is called every time).
        self.names = kernel.arg_names if isinstance(kernel, JITFunction) else None
        self.compiled = {}
        self.fast_calls = 0  # launches that skipped Triton's binding (the tests read it)

    def __call__(self, grid, args, constexprs, **options):
        first = args[0]
        device = first.device if isinstance(first, torch.Tensor) else getattr(first, "base", first).device
        if self.names is None or device.type != "cuda":
            self.kernel[grid](*args, **constexprs, **options)
            return
        key = (device.index, tuple(constexprs.values()), tuple(options.items()), tuple(map(_spec, args)))
        hit = self.compiled.get(key)
        if hit is None:
            compiled = self.kernel[grid](*args, **constexprs, **options)
            if len(self.compiled) >= MAX_KERNELS:
                self.compiled.clear()
            self.compiled[key] = compiled, tuple(constexprs[name] for name in self.names[len(args):])
            return
        compiled, tail = hit
        self.fast_calls += 1
        compiled[(*grid, 1, 1)[:3]](*args, *tail)  # a compiled kernel takes all three grid dimensions

    def planned(self, plan: int, grid, tensors, scalars, constexprs, **options):
        """self(grid, (*tensors, *scalars), constexprs, **options) for a caller whose grid, scalars,
        constexprs and options are the same whenever it passes `plan` (a token()), and whose tensors'
        dtypes, shapes and strides are too (descriptors: their blocks).  The compiled kernel kept
        is the one for 16-byte aligned tensors, the common case; other calls go through Triton."""
        base = _base(tensors[0])
        if self.names is None or not base.is_cuda:
            self.kernel[grid](*tensors, *scalars, **constexprs, **options)
            return
        addresses = 0
        for t in tensors:
            addresses |= _base(t).data_ptr()
        hit = self.compiled.get(plan)
        if addresses % 16:  # a tensor off 16-byte alignment (a view at an odd offset): Triton's own path
            self.kernel[grid](*tensors, *scalars, **constexprs, **options)
            return
        if hit is None:
            compiled = self.kernel[grid](*tensors, *scalars, **constexprs, **options)
            if len(self.compiled) >= MAX_KERNELS:
                self.compiled.clear()
            names = self.names[len(tensors) + len(scalars):]
            self.compiled[plan] = (compiled, (*grid, 1, 1)[:3], base.device.index,
                                  (*scalars, *(constexprs[name] for name in names)))
            return
        compiled, (g0, g1, g2), index, tail = hit
        self.fast_calls += 1
        if knobs is None:
            compiled[(g0, g1, g2)](*tensors, *tail)
            return
        stream = torch._C._cuda_getCurrentRawStream(index)
        args = (*tensors, *tail)
        compiled.run(g0, g1, g2, stream, compiled.function, compiled.packed_metadata,
                     compiled.launch_metadata((g0, g1, g2), stream, *args),
                     knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *args)


def gpu_table(tables, index: int):
    """The launch table of CUDA device `index` from `tables`, ((name fragment, table), ...): the
    first whose fragment is in the device's name, the last (fragment None) for every other GPU."""
    name = torch.cuda.get_device_name(index)
    for fragment, table in tables:
        if fragment is None or fragment in name:
            return table
    raise AssertionError("unreachable: the last entry of a kernel's _GPU_TABLES serves every GPU")


_LAUNCHERS = {}


def launcher(kernel) -> Launcher:
    """The one Launcher of `kernel` (looked up on every call, so a kernel replaced in its module,
    as tests do, gets its own)."""
    entry = _LAUNCHERS.get(id(kernel))
    if entry is None or entry[0] is not kernel:
        entry = _LAUNCHERS[id(kernel)] = kernel, Launcher(kernel)
    return entry[1]


class _InterpretedJIT(JITFunction):
    """A JITFunction of an interpreted kernel's source whose launches run in Triton's interpreter."""

    def __init__(self, interpreted):
        super().__init__(interpreted.fn)
        self.interpreted = interpreted

    @property
    def cache_key(self) -> str:
        # What a JITFunction hashes by; its own walks the kernel's callees, which the interpreter
        # made InterpretedFunctions that it refuses.  The source names this stand-in well enough.
        return f"interpreted {self.fn.__module__}.{self.fn.__qualname__} {self.src}"

    def run(self, *args, grid, warmup=False, **kwargs):
        return self.interpreted[grid](*args, **kwargs)


def traceable(kernel):
    """What a `torch.library.triton_op` body hands to `torch.library.wrap_triton` for `kernel`.

    A @triton.jit kernel is itself.  Under Triton's CPU interpreter @triton.jit gives an
    InterpretedFunction, which wrap_triton cannot put in a graph; the stand-in is a JITFunction of
    the same source whose launches run in the interpreter, so that tests on a CPU can trace the ops
    and run their graphs eagerly (torch.compile's aot_eager backend).  Inductor compiles a kernel's
    source for a GPU, which the interpreter does not have: under the interpreter the packages
    register their ops with custom_op instead (each package's _define_ops).
    """
    if InterpretedFunction is not None and isinstance(kernel, InterpretedFunction):
        return _InterpretedJIT(kernel)
    return kernel
