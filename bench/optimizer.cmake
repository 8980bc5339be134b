# accelkit_bench_optimizer: fused AdamW vs torch::optim::AdamW, with the copy-bandwidth floor.
if(NOT TARGET accelkit_cpu_adamw)
  include(${PROJECT_SOURCE_DIR}/plugins/cpu/fused_adamw.cmake)
endif()
add_executable(accelkit_bench_optimizer "${CMAKE_CURRENT_LIST_DIR}/optimizer_bench.cpp")
target_link_libraries(accelkit_bench_optimizer PRIVATE accelkit_cpu_adamw accelkit_torch)
accelkit_warnings(accelkit_bench_optimizer)
set_target_properties(accelkit_bench_optimizer PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")
# accelkit_bench_sgd: the CPU plugin's fused SGD vs torch::optim::SGD (plain and all cores).
add_executable(accelkit_bench_sgd "${CMAKE_CURRENT_LIST_DIR}/sgd_bench.cpp")
target_link_libraries(accelkit_bench_sgd PRIVATE accelkit_cpu_adamw accelkit_torch)
accelkit_warnings(accelkit_bench_sgd)
set_target_properties(accelkit_bench_sgd PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")
