# Data-parallel training: the launchers' environments (a table), and real processes training
# over c10d's Gloo on loopback (the worker below), started directly and through mpirun.
add_executable(accelkit_dist_worker core/distributed/dist_worker.cpp)
target_link_libraries(accelkit_dist_worker PRIVATE accelkit::core)
target_compile_definitions(accelkit_dist_worker PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
accelkit_warnings(accelkit_dist_worker)
accelkit_add_test(distributed_test SOURCES core/distributed/distributed_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${distributed_test_target} PRIVATE ACCELKIT_DIST_WORKER="$<TARGET_FILE:accelkit_dist_worker>")
add_dependencies(${distributed_test_target} accelkit_dist_worker accelkit-plugin-cpu)
# A fixture plugin that makes its own process group (the contract path NCCL takes on a GPU).
if(NOT TARGET accelkit_fixture_plugins)
  set(ACCELKIT_FIXTURE_PLUGIN_DIR "${CMAKE_CURRENT_BINARY_DIR}/fixture-plugins")
  add_subdirectory(fixtures/plugins)
endif()
target_compile_definitions(${distributed_test_target} PRIVATE ACCELKIT_FIXTURE_PLUGIN_DIR="${ACCELKIT_FIXTURE_PLUGIN_DIR}")
add_dependencies(${distributed_test_target} accelkit_fixture_plugins)
# torch::data's loader (the ShardSampler case) trips GCC's maybe-uninitialized on LibTorch's
# own std::optional<Example> moves; a source with its own options also leaves the unity batch.
set_source_files_properties(core/distributed/distributed_test.cpp PROPERTIES
  COMPILE_OPTIONS "$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
# PyTorch's own launcher, where one comes with this build's LibTorch (the wheel's virtual
# environment, or Debian's python3-torch beside Debian's LibTorch): a real torchrun run.
find_program(ACCELKIT_TORCHRUN torchrun NO_DEFAULT_PATH
  HINTS "${TORCH_INSTALL_PREFIX}/../../../../bin" "${TORCH_INSTALL_PREFIX}/bin")
if(ACCELKIT_TORCHRUN)
  target_compile_definitions(${distributed_test_target} PRIVATE ACCELKIT_TORCHRUN="${ACCELKIT_TORCHRUN}")
endif()
