"""Hand-written CUDA kernels (compiled with NVRTC through CuPy on first use)."""
