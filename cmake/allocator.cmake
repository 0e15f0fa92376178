# The products' memory allocator: gperftools' tcmalloc (Debian 12: libgoogle-perftools-dev), the
# allocator Envoy ships with. Every request makes dozens of small, short-lived allocations (Beast's
# header fields, coroutine frames, strings); glibc's malloc and free were 15 % of a first request's
# and 17 % of a Redis replay's instructions, tcmalloc's per-thread caches cost a third of that
# (bench/README.md, "Instructions per request").
# Sanitizer builds keep the sanitizer's own allocator, which must see every allocation.
add_library(idem_allocator INTERFACE)
if(IDEM_SANITIZE STREQUAL "")
  pkg_check_modules(TCMALLOC REQUIRED IMPORTED_TARGET libtcmalloc_minimal)
  # Linked even though no symbol is named: it replaces malloc for the whole process.
  target_link_libraries(idem_allocator INTERFACE "-Wl,--push-state,--no-as-needed" PkgConfig::TCMALLOC
                                                 "-Wl,--pop-state")
endif()
