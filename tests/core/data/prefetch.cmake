# accelkit::Prefetcher (core/data/include/accelkit/prefetch.hpp): order, errors at their batch,
# stopping mid-epoch, torch::data DataLoaders. Device staging to a new device type is in
# new_device_test, the CUDA side stream in cuda_torch_gpu_test.
accelkit_add_test(prefetch_test SOURCES core/data/prefetch_test.cpp LINK accelkit_core)
# Its own executable: LibTorch's DataLoader (detail/sequencers.h, OrderedSequencer::next) moves
# an optional<Example> that GCC takes for maybe-uninitialized once inlined; a false positive in
# LibTorch's header, silenced for this suite only.
target_compile_options(prefetch_test PRIVATE -Wno-maybe-uninitialized)
