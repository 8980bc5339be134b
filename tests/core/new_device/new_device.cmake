# A brand-new device type from a plugin (sdk/include/accelkit/sdk/device_runtime.hpp): the
# hostmem reference plugin through the host's PrivateUse1 registration, in a process of its
# own (LibTorch keeps one PrivateUse1 backend per process). Variants of the plugin, built from
# its sources into their own directories: a second new-device plugin, one whose table lacks
# `copy`, and one without native kernels (everything through the CPU fallback).
if(NOT TARGET accelkit-plugin-hostmem OR NOT TARGET accelkit-plugin-cpu)
  return()
endif()
set(_variants_dir "${CMAKE_CURRENT_BINARY_DIR}/new-device-plugins")
foreach(_case IN ITEMS hostmem2 hostmem_nocopy hostmem_nokernels)
  accelkit_add_plugin(${_case} NO_INSTALL OUTPUT_DIRECTORY "${_variants_dir}/${_case}"
    SOURCES ${ACCELKIT_HOSTMEM_SOURCES})
  target_compile_definitions(accelkit-plugin-${_case} PRIVATE HOSTMEM_NAME="${_case}")
endforeach()
target_compile_definitions(accelkit-plugin-hostmem_nocopy PRIVATE HOSTMEM_LACKS_COPY=1)
target_compile_definitions(accelkit-plugin-hostmem_nokernels PRIVATE HOSTMEM_WITHOUT_KERNELS=1)

accelkit_add_test(new_device_test SOURCES core/new_device/new_device_test.cpp LINK accelkit::core accelkit_bench)
target_compile_definitions(new_device_test PRIVATE
  ACCELKIT_TEST_PLUGIN_DIR="${ACCELKIT_PLUGIN_OUTPUT_DIR}"
  ACCELKIT_NEW_DEVICE_VARIANTS_DIR="${_variants_dir}")
add_dependencies(new_device_test accelkit-plugin-cpu accelkit-plugin-hostmem accelkit-plugin-hostmem2
  accelkit-plugin-hostmem_nocopy accelkit-plugin-hostmem_nokernels)
set_tests_properties(new_device_test PROPERTIES TIMEOUT 600)
