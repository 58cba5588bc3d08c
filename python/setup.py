"""`pip install --no-build-isolation ./python`: the inc_torch package with its C++ extension,
compiled against the torch that this Python imports and linked against an INC build's
libinc.so (it does not compile the library): build INC first (cmake --build build), or name
another build directory with INC_BUILD_DIR. The CMake build makes the same module
(build/python/inc_torch) without pip; see docs/PYTORCH.md."""

import os
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = Path(__file__).resolve().parent
build = Path(os.environ.get("INC_BUILD_DIR", here.parent / "build")).resolve()
libdir = build / "src" / "api"
if not (libdir / "libinc.so").exists():
    raise SystemExit(f"inc_torch: no libinc.so in {libdir}: build INC first (cmake --build build) "
                     "or set INC_BUILD_DIR to an INC build directory")

setup(
    name="inc_torch",
    version="0.1.0",
    description="INC's c10d backend for torch.distributed (CPU tensors)",
    packages=["inc_torch"],
    ext_modules=[CppExtension(
        "inc_torch._C",
        sources=["inc_torch/csrc/process_group_inc.cpp", "inc_torch/csrc/module.cpp"],
        include_dirs=[str(here.parent / "include")],
        library_dirs=[str(libdir)],
        libraries=["inc"],
        extra_compile_args=["-std=c++20", "-O2"],
        extra_link_args=[f"-Wl,-rpath,{libdir}"],
    )],
    cmdclass={"build_ext": BuildExtension},
)
