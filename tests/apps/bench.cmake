# bench_test: run_bench and the bench verb at tiny sizes against the built CPU plugin.
if(NOT TARGET accelkit-plugin-cpu)
  message(STATUS "bench_test skipped: needs the CPU plugin")
  return()
endif()
accelkit_add_test(bench_test SOURCES apps/bench_test.cpp LINK accelkit_cli nlohmann_json::nlohmann_json GROUP runtime)
target_compile_definitions(${bench_test_target} PRIVATE ACCELKIT_PLUGIN_OUTPUT_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
add_dependencies(${bench_test_target} accelkit-plugin-cpu)

# machine_load_test: what bench says about other processes on the machine (apps/bench's own
# load_report.hpp, from a fixture procfs and the real one).
accelkit_add_test(machine_load_test SOURCES apps/machine_load_test.cpp LINK accelkit::bench GROUP host)
target_include_directories(${machine_load_test_target} PRIVATE "${PROJECT_SOURCE_DIR}/apps/bench")
