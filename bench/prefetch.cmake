# accelkit_bench_prefetch: accelkit::Prefetcher vs producing each batch in the step.
add_executable(accelkit_bench_prefetch "${CMAKE_CURRENT_LIST_DIR}/prefetch_bench.cpp")
target_link_libraries(accelkit_bench_prefetch PRIVATE accelkit_torch)
target_include_directories(accelkit_bench_prefetch PRIVATE "${PROJECT_SOURCE_DIR}/core/include")
accelkit_warnings(accelkit_bench_prefetch)
set_target_properties(accelkit_bench_prefetch PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")
