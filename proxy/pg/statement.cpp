#include "pg/statement.hpp"

#include <utility>

namespace idem::pg {
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

// The binary array format of array_recv: dimensions, has-null flag, element type, then per
// dimension its length and lower bound, then each element as a length and its bytes.
template <typename Element, typename Encode>
std::string binary_array(std::span<const Element> values, Oid element_type, Encode encode) {
  std::string bytes;
  bytes += big_endian(std::uint32_t{1});  // one dimension
  bytes += big_endian(std::uint32_t{0});  // no NULL element
  bytes += big_endian(static_cast<std::uint32_t>(element_type));
  bytes += big_endian(static_cast<std::uint32_t>(values.size()));
  bytes += big_endian(std::uint32_t{1});  // lower bound
  for (const Element& value : values) {
    const std::string element = encode(value);
    bytes += big_endian(static_cast<std::uint32_t>(element.size()));
    bytes += element;
  }
  return bytes;
}

}  // namespace

Param Param::text(std::string value) { return Param(oid::text, std::move(value), false); }
Param Param::bytea(std::string value) { return Param(oid::bytea, std::move(value), false); }
Param Param::int8(std::int64_t value) { return Param(oid::int8, big_endian(static_cast<std::uint64_t>(value)), false); }
Param Param::int4(std::int32_t value) { return Param(oid::int4, big_endian(static_cast<std::uint32_t>(value)), false); }
Param Param::boolean(bool value) { return Param(oid::boolean, std::string(1, value ? '\1' : '\0'), false); }
Param Param::null(Oid type) { return Param(type, std::string(), true); }

Param Param::int8_array(std::span<const std::int64_t> values) {
  return Param(
      oid::int8_array,
      binary_array(values, oid::int8, [](std::int64_t value) { return big_endian(static_cast<std::uint64_t>(value)); }),
      false);
}

Param Param::int4_array(std::span<const std::int32_t> values) {
  return Param(
      oid::int4_array,
      binary_array(values, oid::int4, [](std::int32_t value) { return big_endian(static_cast<std::uint32_t>(value)); }),
      false);
}

Param Param::text_array(std::span<const std::string> values) {
  return Param(oid::text_array, binary_array(values, oid::text, [](const std::string& value) { return value; }), false);
}

}  // namespace idem::pg
