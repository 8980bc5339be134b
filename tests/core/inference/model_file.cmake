# Model files (core/inference/include/accelkit/model_file.hpp): TorchScript and .pt2 packages.
if(NOT TARGET accelkit_fixture_plugins)
  set(ACCELKIT_FIXTURE_PLUGIN_DIR "${CMAKE_CURRENT_BINARY_DIR}/fixture-plugins")
  add_subdirectory(fixtures/plugins)
endif()
set(_accelkit_model_fixtures "${CMAKE_CURRENT_BINARY_DIR}/model-fixtures")
accelkit_add_test(model_file_test SOURCES core/inference/model_file_test.cpp LINK accelkit::core GROUP runtime)
target_compile_definitions(${model_file_test_target} PRIVATE
  ACCELKIT_MODEL_FIXTURES="${_accelkit_model_fixtures}"
  ACCELKIT_FIXTURE_PLUGIN_DIR="${ACCELKIT_FIXTURE_PLUGIN_DIR}"
  ACCELKIT_AOTI_MISSING_LIB="$<TARGET_FILE:accelkit-fixture-aoti-missing>")
add_dependencies(${model_file_test_target} accelkit_fixture_plugins)

# The fixtures are exported at test time by a Python whose torch is this LibTorch's release:
# ACCELKIT_TORCH_PYTHON, or the venv around a wheel's LibTorch (.../lib/pythonX/site-packages/torch).
set(ACCELKIT_TORCH_PYTHON "" CACHE FILEPATH "Python with the torch matching this LibTorch (exports model fixtures)")
set(_accelkit_py "${ACCELKIT_TORCH_PYTHON}")
if(NOT _accelkit_py AND TORCH_INSTALL_PREFIX MATCHES "/lib/python3[^/]*/site-packages/torch$")
  get_filename_component(_accelkit_venv "${TORCH_INSTALL_PREFIX}/../../../.." ABSOLUTE)
  if(EXISTS "${_accelkit_venv}/bin/python3")
    set(_accelkit_py "${_accelkit_venv}/bin/python3")
  endif()
endif()
set(_accelkit_py_torch "")
if(_accelkit_py)
  execute_process(COMMAND "${_accelkit_py}" -W ignore -c "import torch; print(torch.__version__)"
    OUTPUT_VARIABLE _accelkit_py_torch ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _accelkit_rc)
  if(NOT _accelkit_rc EQUAL 0)
    set(_accelkit_py_torch "")
  endif()
endif()
string(REGEX MATCH "^[0-9]+\\.[0-9]+" _accelkit_py_mm "${_accelkit_py_torch}")
string(REGEX MATCH "^[0-9]+\\.[0-9]+" _accelkit_lt_mm "${ACCELKIT_TORCH_VERSION}")
if(_accelkit_py_mm AND _accelkit_py_mm STREQUAL _accelkit_lt_mm)
  message(STATUS "accelkit tests: model fixtures exported at test time by ${_accelkit_py} (torch ${_accelkit_py_torch})")
  add_test(NAME model_fixtures_export
    COMMAND "${_accelkit_py}" "${CMAKE_CURRENT_SOURCE_DIR}/fixtures/models/export_models.py" "${_accelkit_model_fixtures}")
  set_tests_properties(model_fixtures_export PROPERTIES FIXTURES_SETUP model_fixtures TIMEOUT 1200)
  set_tests_properties(model_file_test PROPERTIES FIXTURES_REQUIRED model_fixtures)
else()
  message(STATUS "accelkit tests: no Python with torch ${_accelkit_lt_mm} (found '${_accelkit_py_torch}'): "
    "model_file_test runs without exported fixtures")
  file(REMOVE_RECURSE "${_accelkit_model_fixtures}")
endif()
