# Locates the CUTLASS headers (DESIGN.md section 5; third_party/README.md says why and which version).
#
# Order: -DCUTLASS_DIR / $CUTLASS_DIR (a CUTLASS checkout: its include/ is used), else the headers shipped
# inside the nvidia-cutlass wheel (cutlass_library/source/include), found with importlib's find_spec,
# which locates the package without running its __init__ (that needs cuda-python, which we don't).
set(MIXGEMM_CUTLASS_VERSION "4.2.0" CACHE STRING "CUTLASS version mixgemm is pinned to")

if(NOT DEFINED CUTLASS_DIR AND DEFINED ENV{CUTLASS_DIR})
  set(CUTLASS_DIR "$ENV{CUTLASS_DIR}")
endif()

if(DEFINED CUTLASS_DIR)
  set(_cutlass_include "${CUTLASS_DIR}/include")
else()
  find_package(Python REQUIRED COMPONENTS Interpreter)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
      "import importlib.util, pathlib; s = importlib.util.find_spec('cutlass_library'); print(pathlib.Path(list(s.submodule_search_locations)[0]) / 'source' / 'include' if s else '')"
    OUTPUT_VARIABLE _cutlass_include
    OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()

if(NOT _cutlass_include OR NOT EXISTS "${_cutlass_include}/cutlass/version.h")
  message(FATAL_ERROR
    "mixgemm: CUTLASS headers not found. Install the pinned wheel (pip install --no-deps "
    "nvidia-cutlass==4.2.0.0) or pass -DCUTLASS_DIR=/path/to/cutlass (a checkout of v${MIXGEMM_CUTLASS_VERSION}).")
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
