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

# bench_pt2_test: accelkit bench and report --model with a .pt2 package, through the CLI: the
# packages exported at test time (core/inference/model_file.cmake's model_fixtures, where the
# build found the matching PyTorch); LibTorch < 2.6 refuses them in one line.
accelkit_add_cli_test(bench_pt2_test SOURCES apps/bench_pt2_test.cpp)
if(TEST bench_pt2_test)
  set_property(TEST bench_pt2_test APPEND PROPERTY ENVIRONMENT
    "ACCELKIT_TEST_MODEL_FIXTURES=${CMAKE_CURRENT_BINARY_DIR}/model-fixtures")
  set_tests_properties(bench_pt2_test PROPERTIES FIXTURES_REQUIRED model_fixtures)
endif()

# model_damage_test: damaged and wrong model files through load_torchscript, load_model_file,
# bench --model (inference and training) and report --model: one line naming the file, exit 2.
accelkit_add_cli_test(model_damage_test SOURCES apps/model_damage_test.cpp LINK accelkit::core)
if(TEST model_damage_test)
  set_property(TEST model_damage_test APPEND PROPERTY ENVIRONMENT
    "ACCELKIT_TEST_MODEL_FIXTURES=${CMAKE_CURRENT_BINARY_DIR}/model-fixtures")
  if(TEST model_fixtures_export)
    set_tests_properties(model_damage_test PROPERTIES FIXTURES_REQUIRED model_fixtures)
  endif()
endif()
