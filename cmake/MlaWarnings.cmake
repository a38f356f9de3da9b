# Warnings every target of the project compiles with; errors when
# MLA_WARNINGS_AS_ERRORS is on (CI turns it on).
function(mla_set_warnings target)
  set(cxx_flags -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion)
  if(MLA_WARNINGS_AS_ERRORS)
    list(APPEND cxx_flags -Werror)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${cxx_flags}>)
  # HIP sources go through clang, which takes the same flags for host and device code.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:HIP>:${cxx_flags}>)
  if(MLA_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>)
  endif()
endfunction()
