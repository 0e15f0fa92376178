#include "pg/prepared_statements.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace idem::pg {
namespace {

constexpr std::uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;

std::uint64_t fnv1a(std::uint64_t hash, const unsigned char* bytes, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= kFnvPrime;
  }
  return hash;
}

}  // namespace

std::string prepared_statement_name(const char* sql, std::span<const Oid> types) {
  // The text, a NUL as separator, then each type OID in a fixed byte order.
  std::uint64_t hash = fnv1a(kFnvOffsetBasis, reinterpret_cast<const unsigned char*>(sql), std::strlen(sql) + 1);
  for (const Oid type : types) {
    const unsigned char bytes[4] = {static_cast<unsigned char>(type >> 24), static_cast<unsigned char>(type >> 16),
                                    static_cast<unsigned char>(type >> 8), static_cast<unsigned char>(type)};
    hash = fnv1a(hash, bytes, sizeof(bytes));
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = "idem_";
  for (int shift = 60; shift >= 0; shift -= 4) name.push_back(kHex[(hash >> shift) & 0xF]);
  return name;
}

std::size_t PreparedStatements::prepared_count() const {
  return static_cast<std::size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const Entry& entry) { return entry.prepared; }));
}

PreparedStatements::Entry& PreparedStatements::find_or_add(const char* sql, std::span<const Oid> types) {
  for (Entry& entry : entries_) {
    if (entry.sql == sql && std::equal(entry.types.begin(), entry.types.end(), types.begin(), types.end())) {
      return entry;
    }
  }
  return entries_.emplace_back(
      Entry{sql, std::vector<Oid>(types.begin(), types.end()), prepared_statement_name(sql, types), false});
}

}  // namespace idem::pg
