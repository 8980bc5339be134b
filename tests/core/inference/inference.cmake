# Inference and the user's model: optimize_for_inference, INT8, alignment, through the built CPU
# plugin.
if(NOT TARGET accelkit-plugin-cpu)
  message(STATUS "inference_test, quantize_test, alignment_test, report_model_test skipped: need the CPU plugin")
  return()
endif()
# accelkit::optimize_for_inference on TorchScript modules made in C++.
accelkit_add_test(inference_test SOURCES core/inference/inference_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${inference_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
# accelkit::quantize: dynamic INT8 Linear through the engine the CPU plugin names.
accelkit_add_test(quantize_test SOURCES core/inference/quantize_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${quantize_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
# check_alignment: model sizes against the multiples a device states.
accelkit_add_test(alignment_test SOURCES core/inference/alignment_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${alignment_test_target} PRIVATE ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}")
# accelkit report --model FILE: the alignment through the CLI.
accelkit_add_cli_test(report_model_test SOURCES core/inference/report_model_test.cpp LINK accelkit::core)
