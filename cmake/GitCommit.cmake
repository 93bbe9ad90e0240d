# Writes OUT with the commit of the source tree SRC (`git rev-parse --short=12
# HEAD`; "unknown" outside git), and only when it changed: run at every build
# (src/common/CMakeLists.txt), so a results file names the commit its binary
# was built from, not the one the build folder was configured at.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit unknown)
endif()
set(text "#pragma once\n#define ASGD_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
