#include "store/pg/statement.hpp"

#include <utility>

namespace idem::store::pg {
namespace {

// Binary integers go big-endian on the wire.
template <typename Unsigned>
std::string big_endian(Unsigned value) {
  std::string bytes(sizeof(Unsigned), '\0');
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i) {
    bytes[sizeof(Unsigned) - 1 - i] = static_cast<char>(value & 0xFFu);
    value = static_cast<Unsigned>(value >> 8);
  }
  return bytes;
}

}  // namespace

Param Param::text(std::string value) { return Param(oid::text, std::move(value), false); }
Param Param::bytea(std::string value) { return Param(oid::bytea, std::move(value), false); }
Param Param::int8(std::int64_t value) {
  return Param(oid::int8, big_endian(static_cast<std::uint64_t>(value)), false);
}
Param Param::int4(std::int32_t value) {
  return Param(oid::int4, big_endian(static_cast<std::uint32_t>(value)), false);
}
Param Param::boolean(bool value) { return Param(oid::boolean, std::string(1, value ? '\1' : '\0'), false); }
Param Param::null(Oid type) { return Param(type, std::string(), true); }

}  // namespace idem::store::pg
