# The machine's own files at their worst (FIFOs, implausible values), through the CLI. The
# ROCm plugin reads the DRM cards, so the suite needs it (ACCELKIT_PLUGIN_ROCM).
if(TARGET accelkit-plugin-rocm)
  accelkit_add_cli_test(host_files_test SOURCES core/host/host_files_test.cpp)
endif()
