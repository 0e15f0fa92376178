#pragma once
// Names no other test (or earlier run) uses: schemas, key prefixes, file names.
#include <cstddef>
#include <string>

namespace idem::test {

// `digits` random lowercase hex digits.
std::string random_hex(std::size_t digits);

}  // namespace idem::test
