# Locates the CUTLASS headers (DESIGN.md section 5; third_party/README.md says why and which version).
#
# Order:
#   1. -DCUTLASS_DIR / $CUTLASS_DIR (a CUTLASS checkout: its include/ is used);
#   2. the pinned nvidia-cutlass wheel unpacked into third_party/cutlass/ (the README's setup: pip install
#      --no-deps --target third_party/cutlass nvidia-cutlass==4.2.0.0), found inside an isolated build too and
#      invisible to pip's dependency checks;
#   3. the wheel installed in the Python environment (cutlass_library/source/include), found with importlib's
#      find_spec, which locates the package without running its __init__ (that needs cuda-python, which we
#      don't). Under `pip install .` pip builds in an isolated environment that hides the user's packages (it
#      sets PYTHONPATH to its own site and PYTHONNOUSERSITE), so the lookup is retried without those variables.
set(MIXGEMM_CUTLASS_VERSION "4.2.0" CACHE STRING "CUTLASS version mixgemm is pinned to")
set(_cutlass_wheel_dir "${CMAKE_CURRENT_LIST_DIR}/cutlass")
string(CONCAT _cutlass_find_spec
       "import importlib.util, pathlib; s = importlib.util.find_spec('cutlass_library'); "
       "print(pathlib.Path(list(s.submodule_search_locations)[0]) / 'source' / 'include' if s else '')")

if(NOT DEFINED CUTLASS_DIR AND DEFINED ENV{CUTLASS_DIR})
  set(CUTLASS_DIR "$ENV{CUTLASS_DIR}")
endif()

if(DEFINED CUTLASS_DIR)
  set(_cutlass_include "${CUTLASS_DIR}/include")
elseif(EXISTS "${_cutlass_wheel_dir}/cutlass_library/source/include/cutlass/version.h")
  set(_cutlass_include "${_cutlass_wheel_dir}/cutlass_library/source/include")
else()
  find_package(Python REQUIRED COMPONENTS Interpreter)
  execute_process(COMMAND "${Python_EXECUTABLE}" -c "${_cutlass_find_spec}" OUTPUT_VARIABLE _cutlass_include
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _cutlass_include)
    execute_process(COMMAND "${CMAKE_COMMAND}" -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE
                            "${Python_EXECUTABLE}" -c "${_cutlass_find_spec}"
                    OUTPUT_VARIABLE _cutlass_include OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
endif()

if(NOT _cutlass_include OR NOT EXISTS "${_cutlass_include}/cutlass/version.h")
  message(FATAL_ERROR
    "mixgemm: CUTLASS headers not found. From the repository's root run\n"
    "  python -m pip install --no-deps --target third_party/cutlass nvidia-cutlass==4.2.0.0\n"
    "and build again (pip install .), or pass CUTLASS_DIR=/path/to/cutlass (a checkout of "
    "v${MIXGEMM_CUTLASS_VERSION}).")
endif()

file(STRINGS "${_cutlass_include}/cutlass/version.h" _cutlass_version_lines
     REGEX "#define CUTLASS_(MAJOR|MINOR|PATCH) ")
foreach(_line IN LISTS _cutlass_version_lines)
  if(_line MATCHES "#define CUTLASS_(MAJOR|MINOR|PATCH) ([0-9]+)")
    set(_cutlass_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
  endif()
endforeach()
set(_cutlass_found_version "${_cutlass_MAJOR}.${_cutlass_MINOR}.${_cutlass_PATCH}")
if(NOT _cutlass_found_version VERSION_EQUAL MIXGEMM_CUTLASS_VERSION)
  message(WARNING "mixgemm: CUTLASS ${_cutlass_found_version} found at ${_cutlass_include}; "
                  "mixgemm is tested with ${MIXGEMM_CUTLASS_VERSION}")
endif()

set(MIXGEMM_CUTLASS_INCLUDE "${_cutlass_include}")
message(STATUS "mixgemm: CUTLASS ${_cutlass_found_version} headers at ${MIXGEMM_CUTLASS_INCLUDE}")
