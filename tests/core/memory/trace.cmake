# accelkit::Trace and profile_scope (core/memory/include/accelkit/trace.hpp): training steps traced
# with each profiler this LibTorch has, the trace file read back as JSON, the tables checked.
# An executable of its own: LibTorch's profiler state is per process and thread.
accelkit_add_test(trace_test SOURCES core/memory/trace_test.cpp LINK accelkit_core nlohmann_json::nlohmann_json)
