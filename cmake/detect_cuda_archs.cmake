# mixgemm_detect_cuda_archs(<var>): the CUDA architectures of this machine's GPUs, for MIXGEMM_CUDA_ARCHS=auto.
#
# Reads each GPU's compute capability from nvidia-smi (no CUDA program to compile and run at configure time).
# 9.0 becomes 90a, since the sm90 path's wgmma/TMA kernels need the arch-specific target (its sm_90a code runs on
# 9.0 only); capabilities from 8.0 to 9.0 their own arch; a newer GPU gets 80, whose PTX the driver compiles for
# it (the mma.sync paths run there; the sm90 path does not). Without a visible GPU, 80;90a: every path, every
# supported GPU.
function(mixgemm_detect_cuda_archs out_var)
  set(_archs "")
  find_program(_nvidia_smi nvidia-smi)
  if(_nvidia_smi)
    execute_process(COMMAND "${_nvidia_smi}" --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE _caps RESULT_VARIABLE _status ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_status EQUAL 0)
      string(REPLACE "\n" ";" _caps "${_caps}")
      foreach(_cap IN LISTS _caps)
        string(STRIP "${_cap}" _cap)
        if(_cap MATCHES "^([0-9]+)\\.([0-9]+)$")
          math(EXPR _number "${CMAKE_MATCH_1} * 10 + ${CMAKE_MATCH_2}")
          if(_number EQUAL 90)
            list(APPEND _archs 90a)
          elseif(_number GREATER_EQUAL 80 AND _number LESS 90)
            list(APPEND _archs ${_number})
          elseif(_number GREATER 90)
            list(APPEND _archs 80)
            message(STATUS "mixgemm: compute capability ${_cap} found: building sm_80 code (PTX included), which "
                           "the driver compiles for it; the sm90 path runs on 9.0 only")
          else()
            message(WARNING "mixgemm: a GPU of compute capability ${_cap} was found; mixgemm needs 8.0 or newer")
          endif()
        endif()
      endforeach()
    endif()
  endif()
  list(REMOVE_DUPLICATES _archs)
  if(_archs)
    message(STATUS "mixgemm: MIXGEMM_CUDA_ARCHS=auto: this machine's GPUs need ${_archs} (set MIXGEMM_CUDA_ARCHS to "
                   "build for others, e.g. \"80;90a\")")
  else()
    set(_archs 80 90a)
    message(STATUS "mixgemm: MIXGEMM_CUDA_ARCHS=auto and no GPU visible: building for 80;90a (every path)")
  endif()
  set(${out_var} "${_archs}" PARENT_SCOPE)
endfunction()
