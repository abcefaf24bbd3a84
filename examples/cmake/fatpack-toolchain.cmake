# Links every target of a CMake build through `fatpack ld`, with no change to the project's
# sources or compile flags:
#
#   cmake -S . -B build -DCMAKE_TOOLCHAIN_FILE=/path/to/fatpack-toolchain.cmake \
#         [-DFATPACK=/path/to/fatpack] [-DFATPACK_FLAGS=--fatpack-side-file]
#
# fatpack is FATPACK, else $FATPACK_BIN, else `fatpack` on PATH. The file makes a folder of
# `ld`, `ld.bfd`, `ld.gold`, `ld.lld`, `ld.mold` links to it and adds `-B<folder>` to the *link* flags
# (CMAKE_{EXE,SHARED,MODULE}_LINKER_FLAGS_INIT). With GCC or Clang as the link driver --
# which is what CMake uses for CXX targets and, through CMAKE_CUDA_HOST_LINK_LAUNCHER, for
# CUDA targets too -- the driver then runs fatpack as its linker, which runs the real one.
# `-fuse-ld=gold|lld|mold` keeps working (the driver looks for ld.gold/ld.lld/ld.mold in the
# same folder).
# Device-link steps (`nvcc -dlink`, separable compilation) do not call a host linker and
# are left alone. Compose with another toolchain file by including this one from it.

if(NOT FATPACK)
  if(DEFINED ENV{FATPACK_BIN} AND NOT "$ENV{FATPACK_BIN}" STREQUAL "")
    set(FATPACK "$ENV{FATPACK_BIN}")
  else()
    find_program(FATPACK_PROGRAM fatpack)
    set(FATPACK "${FATPACK_PROGRAM}")
  endif()
endif()
if(NOT FATPACK OR NOT EXISTS "${FATPACK}")
  message(FATAL_ERROR "fatpack-toolchain: fatpack not found (set -DFATPACK=... or FATPACK_BIN)")
endif()
get_filename_component(FATPACK "${FATPACK}" ABSOLUTE)
set(FATPACK "${FATPACK}" CACHE FILEPATH "fatpack binary used as the linker" FORCE)
set(FATPACK_FLAGS "${FATPACK_FLAGS}" CACHE STRING "fatpack options, e.g. --fatpack-side-file")

# One folder per build tree; try_compile projects reuse the outer one.
if(NOT FATPACK_WRAP_DIR)
  set(FATPACK_WRAP_DIR "${CMAKE_BINARY_DIR}/CMakeFiles/fatpack-wrap")
endif()
file(MAKE_DIRECTORY "${FATPACK_WRAP_DIR}")
foreach(_fp_name ld ld.bfd ld.gold ld.lld ld.mold)
  file(REMOVE "${FATPACK_WRAP_DIR}/${_fp_name}")
  file(CREATE_LINK "${FATPACK}" "${FATPACK_WRAP_DIR}/${_fp_name}" SYMBOLIC)
endforeach()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FATPACK FATPACK_FLAGS FATPACK_WRAP_DIR)

set(_fp_link "-B${FATPACK_WRAP_DIR}")
separate_arguments(_fp_flags UNIX_COMMAND "${FATPACK_FLAGS}")
foreach(_fp_flag IN LISTS _fp_flags)
  string(APPEND _fp_link " -Wl,${_fp_flag}")
endforeach()
# CMake reads a toolchain file more than once: add the flags once.
foreach(_fp_kind EXE SHARED MODULE)
  string(FIND " ${CMAKE_${_fp_kind}_LINKER_FLAGS_INIT} " " ${_fp_link} " _fp_at)
  if(_fp_at EQUAL -1)
    string(APPEND CMAKE_${_fp_kind}_LINKER_FLAGS_INIT " ${_fp_link}")
  endif()
  # A CMAKE_<kind>_LINKER_FLAGS given on the command line (-DCMAKE_EXE_LINKER_FLAGS=
  # -fuse-ld=mold) replaces the _INIT flags: fatpack's go into it as well, once, or such a
  # build would link without fatpack and say nothing.
  if(DEFINED CACHE{CMAKE_${_fp_kind}_LINKER_FLAGS})
    set(_fp_user "$CACHE{CMAKE_${_fp_kind}_LINKER_FLAGS}")
    string(FIND " ${_fp_user} " " ${_fp_link} " _fp_at)
    if(_fp_at EQUAL -1)
      set(CMAKE_${_fp_kind}_LINKER_FLAGS "${_fp_user} ${_fp_link}" CACHE STRING
          "Flags used by the linker (fatpack's added by fatpack-toolchain.cmake)" FORCE)
    endif()
  endif()
endforeach()
unset(_fp_user)
unset(_fp_link)
unset(_fp_at)
unset(_fp_flags)
