"""Prints the path of NVIDIA's own nvml.h for the NVML ABI check
(tests/c/nvml_abi/nvml_abi.c), or nothing when none is installed.
Where it looks: $NVML_HEADER; the wheel requirements-test.txt pins
(nvidia-nvml-dev: nvidia/cu13/include/nvml.h, older ones under another
nvidia/*/include); Debian's libnvidia-ml-dev and the CUDA toolkit."""
import glob
import os
import sys

cands = [os.environ.get("NVML_HEADER", "")]
for p in sys.path:
    cands += sorted(glob.glob(os.path.join(p, "nvidia", "*", "include", "nvml.h")), reverse=True)
cands += ["/usr/include/nvml.h", "/usr/local/cuda/include/nvml.h"]
for c in cands:
    if c and os.path.isfile(c):
        print(os.path.abspath(c))
        break
