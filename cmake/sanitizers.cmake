# Sanitizer builds (GCC or clang), applied to every target of the build: product, tests, tools.
#   -DIDEM_SANITIZE=address  AddressSanitizer + UndefinedBehaviorSanitizer
#   -DIDEM_SANITIZE=thread   ThreadSanitizer
# Every report is fatal (-fno-sanitize-recover=all): a sanitized test either passes clean or fails.
# tests/sanitizers.sh builds and runs both; tests/sanitizers/ holds the runtime options and the
# suppressions for third-party false positives.
set(IDEM_SANITIZE "" CACHE STRING "Sanitize the whole build: address (ASan+UBSan) or thread (TSan)")
set_property(CACHE IDEM_SANITIZE PROPERTY STRINGS "" address thread)

if(IDEM_SANITIZE STREQUAL "")
  return()
elseif(IDEM_SANITIZE STREQUAL "address")
  set(IDEM_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all)
elseif(IDEM_SANITIZE STREQUAL "thread")
  set(IDEM_SANITIZER_FLAGS -fsanitize=thread)
  # GCC warns (an error with -Werror) that TSan ignores std::atomic_thread_fence, which Boost.Asio's
  # fenced_block uses around handler invocation. TSan sees the mutexes Asio's queues use instead,
  # so the fence carries no ordering TSan would otherwise miss; the code stays as shipped.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-tsan)
  endif()
else()
  message(FATAL_ERROR "IDEM_SANITIZE must be empty, 'address' or 'thread', not '${IDEM_SANITIZE}'")
endif()
if(IDEM_FUZZ)
  message(FATAL_ERROR "IDEM_FUZZ brings its own sanitizers (ASan+UBSan); leave IDEM_SANITIZE empty")
endif()

# Frame pointers keep the reports' stack traces complete at -O2.
add_compile_options(${IDEM_SANITIZER_FLAGS} -fno-omit-frame-pointer)
# GCC's flow analysis runs on the instrumented code and reports libstdc++'s own std::regex and
# std::function internals as maybe-uninitialized (GCC documents sanitizer builds as prone to false
# warnings). The plain build keeps the warning; the sanitizers check the real thing at run time.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options(-Wno-maybe-uninitialized)
endif()
add_link_options(${IDEM_SANITIZER_FLAGS})
message(STATUS "idemproxy: sanitizers on (${IDEM_SANITIZE}): ${IDEM_SANITIZER_FLAGS}")
