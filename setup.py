"""Build the birsim._birsim extension: the C core (csrc/{core,ir,mem,vm,kernels}) plus
the CPython binding (csrc/py). Flags:
  BIRSIM_DEBUG=1                       -O0 -g -DBS_DEBUG
  BIRSIM_SANITIZE=address,undefined    add -fsanitize flags (preload the ASan runtime), and
                                       -fno-wrapv: Python's CFLAGS carry -fwrapv, which
                                       would hide signed overflow from UBSan (CI adds
                                       float-cast-overflow to the list)
  BIRSIM_WERROR=1                      -Werror (CI)
"""
import glob
import os

import numpy
from setuptools import Extension, setup

CORE_DIRS = ["core", "ir", "mem", "vm", "kernels"]
sources = []
for d in CORE_DIRS + ["py"]:
    sources += sorted(glob.glob(os.path.join("csrc", d, "*.c")))

cflags = ["-std=c11", "-pthread", "-ffp-contract=off", "-fno-strict-aliasing",
          "-Wall", "-Wextra", "-Wshadow", "-Wundef", "-Wstrict-prototypes",
          "-Wmissing-prototypes"]
ldflags = ["-pthread"]                   # core/pool.c
if os.environ.get("BIRSIM_DEBUG"):
    cflags += ["-O0", "-g", "-DBS_DEBUG", "-UNDEBUG"]
else:
    cflags += ["-O3"]
if os.environ.get("BIRSIM_SANITIZE"):
    san = "-fsanitize=" + os.environ["BIRSIM_SANITIZE"]
    cflags += [san, "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", "-fno-wrapv"]
    ldflags += [san]
if os.environ.get("BIRSIM_WERROR"):
    cflags += ["-Werror"]

ext = Extension(
    "birsim._birsim",
    sources=sources,
    include_dirs=["csrc", numpy.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_23_API_VERSION"),
                   ("NPY_TARGET_VERSION", "NPY_1_23_API_VERSION")],
    extra_compile_args=cflags,
    extra_link_args=ldflags,
    libraries=["m"],
    depends=glob.glob("csrc/**/*.h", recursive=True) + glob.glob("csrc/**/*.def", recursive=True),
)

setup(ext_modules=[ext])
