# Trainer suite: trains small models on the built CPU plugin, checkpoints in temp dirs.
if(NOT TARGET accelkit-plugin-cpu)
  message(STATUS "train_test skipped: needs the CPU plugin")
  return()
endif()
accelkit_add_test(train_test SOURCES apps/train_test.cpp LINK accelkit::train GROUP runtime)
target_compile_definitions(${train_test_target} PRIVATE
  ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}"
  ACCELKIT_TRAIN_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures/train")
add_dependencies(${train_test_target} accelkit-plugin-cpu)
