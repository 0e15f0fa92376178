#include "fingerprint/canonical_json.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <system_error>
#include <utility>
#include <variant>

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/error.hpp>
#include <boost/json/parse_options.hpp>

namespace idem::fingerprint {
namespace {

// Deeper documents are treated as not-JSON (hashed raw). Bounds the parser's stack and our own
// recursive serializer; no real request payload nests this deep.
constexpr std::size_t kMaxJsonDepth = 64;

struct JsonValue;
struct JsonMember;
using JsonArray = std::vector<JsonValue>;
using JsonObject = std::vector<JsonMember>;  // kept in JCS order: sorted when the object closes

// A number, already in its canonical text (format_jcs_number or exact_number_form): the two
// schemes differ only there.
struct JsonNumber {
  std::string canonical;
};

struct JsonValue {
  std::variant<std::nullptr_t, bool, JsonNumber, std::string, JsonArray, JsonObject> data;
  bool ignored = false;  // addressed by an ignore pointer: left out of the canonical form
};

struct JsonMember {
  std::string name;
  JsonValue value;
};

template <class... Visitors>
struct Overloaded : Visitors... {
  using Visitors::operator()...;
};
template <class... Visitors>
Overloaded(Visitors...) -> Overloaded<Visitors...>;

// ---------------------------------------------------------------------------------------------
// UTF-16 ordering of member names (RFC 8785 section 3.2.3).

// Decodes the code point starting at `text[pos]` and advances `pos`. `text` is valid UTF-8:
// the parser rejected anything else.
char32_t next_code_point(std::string_view text, std::size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  std::size_t length = 1;
  char32_t code_point = lead;
  if (lead >= 0xF0) {
    length = 4;
    code_point = lead & 0x07;
  } else if (lead >= 0xE0) {
    length = 3;
    code_point = lead & 0x0F;
  } else if (lead >= 0xC0) {
    length = 2;
    code_point = lead & 0x1F;
  }
  for (std::size_t i = 1; i < length && pos + i < text.size(); ++i) {
    code_point = (code_point << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  }
  pos += length;
  return code_point;
}

// Rank of a code point in UTF-16 code-unit order. It differs from code point order only for
// supplementary characters: their surrogate pairs (D800-DBFF first) sort before U+E000-U+FFFF.
std::uint32_t utf16_rank(char32_t code_point) {
  if (code_point < 0xD800) return code_point;
  if (code_point >= 0x10000) return 0xD800 + (code_point - 0x10000);  // up to 0x10D7FF
  return code_point + 0x100000;                                       // U+E000.. -> 0x10E000..
}

bool utf16_less(std::string_view a, std::string_view b) {
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const std::uint32_t rank_a = utf16_rank(next_code_point(a, i));
    const std::uint32_t rank_b = utf16_rank(next_code_point(b, j));
    if (rank_a != rank_b) return rank_a < rank_b;
  }
  return i >= a.size() && j < b.size();
}

// Sorts members into JCS order. False when two members share a name (not I-JSON, RFC 7493).
bool sort_members(JsonObject& members) {
  std::sort(members.begin(), members.end(),
            [](const JsonMember& a, const JsonMember& b) { return utf16_less(a.name, b.name); });
  const auto duplicate = std::adjacent_find(members.begin(), members.end(),
                                            [](const JsonMember& a, const JsonMember& b) { return a.name == b.name; });
  return duplicate == members.end();
}

// ---------------------------------------------------------------------------------------------
// Numbers.

// True when a JSON number literal that does not fit a double is too small rather than too large
// (its leading significant digit is below the units position). JSON.parse rounds such literals
// to zero; too-large ones have no finite value and are rejected.
bool literal_underflows(std::string_view literal) {
  const std::size_t exponent_at = literal.find_first_of("eE");
  std::string_view mantissa = literal.substr(0, exponent_at);
  if (!mantissa.empty() && mantissa.front() == '-') mantissa.remove_prefix(1);

  // Saturate: any exponent beyond a billion decides the answer by its sign alone.
  constexpr long long kSaturation = 1'000'000'000;
  long long exponent = 0;
  if (exponent_at != std::string_view::npos) {
    std::string_view digits = literal.substr(exponent_at + 1);
    bool negative = false;
    if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
      negative = digits.front() == '-';
      digits.remove_prefix(1);
    }
    for (const char digit : digits) exponent = std::min(kSaturation, exponent * 10 + (digit - '0'));
    if (negative) exponent = -exponent;
  }

  const std::size_t point = std::min(mantissa.find('.'), mantissa.size());
  const std::size_t first_nonzero = mantissa.find_first_not_of("0.");
  if (first_nonzero == std::string_view::npos) return true;  // zero: cannot overflow
  // Decimal position of the leading significant digit: 0 for units, -1 for tenths, ...
  const long long position = first_nonzero < point ? static_cast<long long>(point - first_nonzero) - 1
                                                   : -static_cast<long long>(first_nonzero - point);
  return position + exponent < 0;
}

// Converts a JSON number literal to the nearest double (JCS works on IEEE-754 doubles: integers
// beyond 2^53 lose precision exactly as in JavaScript). std::nullopt when it overflows.
std::optional<double> literal_to_double(std::string_view literal) {
  double value = 0;
  const char* const end = literal.data() + literal.size();
  const auto [stop, error] = std::from_chars(literal.data(), end, value);
  if (stop != end) return std::nullopt;
  if (error == std::errc()) {
    if (!std::isfinite(value)) return std::nullopt;
    return value;
  }
  if (error == std::errc::result_out_of_range && literal_underflows(literal)) {
    return literal.front() == '-' ? -0.0 : 0.0;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Parsing: a Boost.JSON basic_parser handler that builds JsonValue, converts numbers from their
// literal text and rejects duplicate member names (boost::json::parse would keep the last one).
// Finished values wait on a stack until their container closes and moves them, so every array
// and object is allocated once at its exact size.

class TreeBuilder {
 public:
  explicit TreeBuilder(JsonNumbers numbers) : numbers_(numbers) {}

  static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);

  // The document's value once the parser is done.
  std::optional<JsonValue> take_root() {
    if (values_.size() != 1) return std::nullopt;
    return std::move(values_.back());
  }

  bool on_document_begin(boost::json::error_code&) { return true; }
  bool on_document_end(boost::json::error_code&) { return true; }

  bool on_array_begin(boost::json::error_code&) { return true; }
  bool on_array_end(std::size_t size, boost::json::error_code&) {
    JsonArray elements;
    elements.reserve(size);
    const auto first = values_.end() - static_cast<std::ptrdiff_t>(size);
    std::move(first, values_.end(), std::back_inserter(elements));
    values_.erase(first, values_.end());
    push(std::move(elements));
    return true;
  }

  bool on_object_begin(boost::json::error_code&) { return true; }
  bool on_object_end(std::size_t size, boost::json::error_code& ec) {
    JsonObject members;
    members.reserve(size);
    const auto first_value = values_.end() - static_cast<std::ptrdiff_t>(size);
    const auto first_name = names_.end() - static_cast<std::ptrdiff_t>(size);
    for (std::size_t i = 0; i < size; ++i) {
      members.push_back(JsonMember{std::move(first_name[static_cast<std::ptrdiff_t>(i)]),
                                   std::move(first_value[static_cast<std::ptrdiff_t>(i)])});
    }
    values_.erase(first_value, values_.end());
    names_.erase(first_name, names_.end());
    if (!sort_members(members)) {
      ec = boost::json::error::syntax;  // duplicate member name; the exact code is not reported
      return false;
    }
    push(std::move(members));
    return true;
  }

  bool on_string_part(boost::json::string_view part, std::size_t, boost::json::error_code&) {
    pending_.append(part.data(), part.size());
    return true;
  }
  bool on_string(boost::json::string_view last, std::size_t, boost::json::error_code&) {
    push(take_pending(last));
    return true;
  }
  bool on_key_part(boost::json::string_view part, std::size_t, boost::json::error_code&) {
    pending_.append(part.data(), part.size());
    return true;
  }
  bool on_key(boost::json::string_view last, std::size_t, boost::json::error_code&) {
    names_.push_back(take_pending(last));
    return true;
  }

  bool on_number_part(boost::json::string_view part, boost::json::error_code&) {
    pending_.append(part.data(), part.size());
    return true;
  }
  // Boost.JSON's own integer/double values are ignored: the literal is converted again with
  // std::from_chars, which rounds correctly (Boost 1.81's fast double conversion can be one ulp
  // off; its precise mode arrived in 1.83).
  bool on_int64(std::int64_t, boost::json::string_view last, boost::json::error_code& ec) {
    return on_number(last, ec);
  }
  bool on_uint64(std::uint64_t, boost::json::string_view last, boost::json::error_code& ec) {
    return on_number(last, ec);
  }
  bool on_double(double, boost::json::string_view last, boost::json::error_code& ec) { return on_number(last, ec); }

  bool on_bool(bool flag, boost::json::error_code&) {
    push(flag);
    return true;
  }
  bool on_null(boost::json::error_code&) {
    push(nullptr);
    return true;
  }

  // Comments are disabled in the parse options; these are never called.
  bool on_comment_part(boost::json::string_view, boost::json::error_code&) { return true; }
  bool on_comment(boost::json::string_view, boost::json::error_code&) { return true; }

 private:
  template <class Payload>
  void push(Payload&& payload) {
    values_.emplace_back().data = std::forward<Payload>(payload);
  }

  std::string take_pending(boost::json::string_view last) {
    pending_.append(last.data(), last.size());
    std::string text = std::move(pending_);
    pending_.clear();
    return text;
  }

  bool on_number(boost::json::string_view last, boost::json::error_code& ec) {
    const std::string literal = take_pending(last);
    std::optional<std::string> canonical;
    switch (numbers_) {
      case JsonNumbers::ieee_double:
        if (const std::optional<double> number = literal_to_double(literal)) canonical = format_jcs_number(*number);
        break;
      case JsonNumbers::exact_decimal: canonical = exact_number_form(literal); break;
    }
    if (!canonical) {
      ec = boost::json::error::exponent_overflow;
      return false;
    }
    push(JsonNumber{std::move(*canonical)});
    return true;
  }

  JsonNumbers numbers_;

  std::vector<JsonValue> values_;   // finished values not yet moved into their container
  std::vector<std::string> names_;  // member names of the open objects, innermost last
  std::string pending_;             // string, key or number literal split across callbacks
};

std::optional<JsonValue> parse_strict(std::string_view json, JsonNumbers numbers) {
  boost::json::parse_options options;
  options.max_depth = kMaxJsonDepth;
  options.allow_comments = false;
  options.allow_trailing_commas = false;
  options.allow_invalid_utf8 = false;
  boost::json::basic_parser<TreeBuilder> parser(options, numbers);
  boost::json::error_code ec;
  const std::size_t consumed = parser.write_some(false, json.data(), json.size(), ec);
  if (ec || consumed != json.size() || !parser.done()) return std::nullopt;
  return parser.handler().take_root();
}

// ---------------------------------------------------------------------------------------------
// JSON Pointers (RFC 6901).

struct ParsedPointer {
  std::vector<std::string> tokens;  // unescaped reference tokens
  std::string error;                // empty when the pointer is valid
};

ParsedPointer parse_pointer(std::string_view pointer) {
  ParsedPointer parsed;
  if (pointer.empty()) return parsed;  // the whole document
  if (pointer.front() != '/') {
    parsed.error = "a JSON Pointer must be empty or start with '/'";
    return parsed;
  }
  for (std::size_t i = 0; i < pointer.size(); ++i) {
    const char c = pointer[i];
    if (c == '/') {
      parsed.tokens.emplace_back();
    } else if (c == '~') {
      const char escaped = i + 1 < pointer.size() ? pointer[i + 1] : '\0';
      if (escaped != '0' && escaped != '1') {
        parsed.error = "'~' at offset " + std::to_string(i) + " must be followed by '0' or '1'";
        return parsed;
      }
      parsed.tokens.back().push_back(escaped == '0' ? '~' : '/');
      ++i;
    } else {
      parsed.tokens.back().push_back(c);
    }
  }
  return parsed;
}

// RFC 6901 array index: "0" or a decimal without leading zeros. "-" (past the end) and anything
// else address no element.
std::optional<std::size_t> array_index(std::string_view token, std::size_t size) {
  if (token.empty() || (token.size() > 1 && token.front() == '0')) return std::nullopt;
  std::size_t index = 0;
  const auto [stop, error] = std::from_chars(token.data(), token.data() + token.size(), index);
  if (error != std::errc() || stop != token.data() + token.size() || index >= size) return std::nullopt;
  return index;
}

// The value `tokens` address, or nullptr when nothing is there.
JsonValue* find_value(JsonValue& root, const std::vector<std::string>& tokens) {
  JsonValue* node = &root;
  for (const std::string& token : tokens) {
    node = std::visit(Overloaded{
                          [&](JsonObject& members) -> JsonValue* {
                            const auto member = std::find_if(members.begin(), members.end(),
                                                             [&](const JsonMember& m) { return m.name == token; });
                            return member == members.end() ? nullptr : &member->value;
                          },
                          [&](JsonArray& elements) -> JsonValue* {
                            const std::optional<std::size_t> index = array_index(token, elements.size());
                            return index ? &elements[*index] : nullptr;
                          },
                          [](auto&) -> JsonValue* { return nullptr; },  // a scalar has no children to address
                      },
                      node->data);
    if (node == nullptr) return nullptr;
  }
  return node;
}

void mark_ignored(JsonValue& root, const std::vector<std::string>& tokens) {
  if (JsonValue* node = find_value(root, tokens)) node->ignored = true;
}

core::BodyKeyLookup look_up(JsonValue& root, std::string_view pointer) {
  core::BodyKeyLookup found;
  found.kind = core::JsonKind::absent;
  const ParsedPointer parsed = parse_pointer(pointer);
  const JsonValue* node = parsed.error.empty() ? find_value(root, parsed.tokens) : nullptr;
  if (node == nullptr) return found;
  std::visit(Overloaded{
                 [&](std::nullptr_t) { found.kind = core::JsonKind::null; },
                 [&](bool) { found.kind = core::JsonKind::boolean; },
                 [&](const JsonNumber&) { found.kind = core::JsonKind::number; },
                 [&](const std::string& text) {
                   found.kind = core::JsonKind::string;
                   found.value = text;
                 },
                 [&](const JsonArray&) { found.kind = core::JsonKind::array; },
                 [&](const JsonObject&) { found.kind = core::JsonKind::object; },
             },
             node->data);
  return found;
}

// ---------------------------------------------------------------------------------------------
// Serialization (RFC 8785 section 3.2.2).

void write_string(std::string_view text, std::string& out) {
  static constexpr std::array<char, 16> kHex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                                '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  out.push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out.push_back(kHex[static_cast<unsigned char>(c) >> 4]);
          out.push_back(kHex[static_cast<unsigned char>(c) & 0x0F]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void write_value(const JsonValue& value, std::string& out) {
  std::visit(Overloaded{
                 [&](std::nullptr_t) { out += "null"; },
                 [&](bool flag) { out += flag ? "true" : "false"; },
                 [&](const JsonNumber& number) { out += number.canonical; },
                 [&](const std::string& text) { write_string(text, out); },
                 [&](const JsonArray& elements) {
                   out.push_back('[');
                   bool first = true;
                   for (const JsonValue& element : elements) {
                     if (element.ignored) continue;
                     if (!first) out.push_back(',');
                     first = false;
                     write_value(element, out);
                   }
                   out.push_back(']');
                 },
                 [&](const JsonObject& members) {
                   out.push_back('{');
                   bool first = true;
                   for (const JsonMember& member : members) {
                     if (member.value.ignored) continue;
                     if (!first) out.push_back(',');
                     first = false;
                     write_string(member.name, out);
                     out.push_back(':');
                     write_value(member.value, out);
                   }
                   out.push_back('}');
                 },
             },
             value.data);
}

}  // namespace

std::optional<std::string> canonicalize_json(std::string_view json, const std::vector<std::string>& ignore,
                                             JsonNumbers numbers) {
  core::BodyKeyLookup unused;
  return canonicalize_json(json, ignore, numbers, {}, unused);
}

std::optional<std::string> canonicalize_json(std::string_view json, const std::vector<std::string>& ignore,
                                             JsonNumbers numbers, std::string_view pointer,
                                             core::BodyKeyLookup& pointee) {
  pointee = {};
  std::optional<JsonValue> root = parse_strict(json, numbers);
  if (!root) return std::nullopt;
  // Before the ignore marks: a pointer the fingerprint leaves out still addresses its value.
  if (!pointer.empty()) pointee = look_up(*root, pointer);
  for (const std::string& pointer : ignore) {
    const ParsedPointer parsed = parse_pointer(pointer);
    if (parsed.error.empty()) mark_ignored(*root, parsed.tokens);  // invalid pointers address nothing
  }
  // Pointer "" ignores the whole document: the canonical form is then empty, which no JSON text
  // is, so every valid JSON body of such a route fingerprints the same and none collides with a
  // non-ignored document.
  std::string canonical;
  if (!root->ignored) {
    canonical.reserve(json.size());
    write_value(*root, canonical);
  }
  return canonical;
}

std::string format_jcs_number(double value) {
  // ECMAScript Number::toString for the values JSON cannot hold, for completeness.
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  if (value == 0) return "0";  // also -0

  std::array<char, 40> buffer{};
  // Fast path for integers, the common case: below 2^53 every digit is significant and there is
  // no exponent (n <= 16), so the ECMAScript layout is the plain decimal.
  constexpr double kTwoToThe53 = 9007199254740992.0;
  if (std::fabs(value) < kTwoToThe53 && value == std::trunc(value)) {
    const auto [end, error] =
        std::to_chars(buffer.data(), buffer.data() + buffer.size(), static_cast<std::int64_t>(value));
    (void)error;  // 40 characters hold any int64
    return std::string(buffer.data(), end);
  }

  // Shortest round-trip digits and their exponent: "d.ddde+XX" (ECMA-262 7.1.12.1 steps 5-6:
  // k as small as possible, s * 10^(n-k) the value).
  const auto [end, error] =
      std::to_chars(buffer.data(), buffer.data() + buffer.size(), std::fabs(value), std::chars_format::scientific);
  (void)error;  // 40 characters hold any double in scientific notation (at most 24)
  const std::string_view scientific(buffer.data(), static_cast<std::size_t>(end - buffer.data()));
  const std::size_t e_at = scientific.find('e');
  std::string digits(1, scientific[0]);
  if (e_at > 1) digits.append(scientific.substr(2, e_at - 2));
  std::string_view exponent_text = scientific.substr(e_at + 1);
  const bool negative_exponent = exponent_text.front() == '-';
  exponent_text.remove_prefix(1);  // to_chars always writes the sign
  int exponent = 0;
  std::from_chars(exponent_text.data(), exponent_text.data() + exponent_text.size(), exponent);
  if (negative_exponent) exponent = -exponent;

  const int k = static_cast<int>(digits.size());
  const int n = exponent + 1;  // the decimal point sits after n digits
  std::string out;
  if (value < 0) out.push_back('-');
  if (k <= n && n <= 21) {
    out += digits;
    out.append(static_cast<std::size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out.append(digits, 0, static_cast<std::size_t>(n));
    out.push_back('.');
    out.append(digits, static_cast<std::size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out += digits;
  } else {
    out.push_back(digits[0]);
    if (k > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    out.push_back('e');
    out.push_back(n - 1 < 0 ? '-' : '+');
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

std::optional<std::string> exact_number_form(std::string_view literal) {
  // Grammar (RFC 8259 section 6): [-] int [. frac] [(e|E) [+|-] digits], int "0" or no leading 0.
  std::string_view rest = literal;
  const bool negative = !rest.empty() && rest.front() == '-';
  if (negative) rest.remove_prefix(1);
  const auto digits_prefix = [&rest] {
    const std::size_t end = std::min(rest.find_first_not_of("0123456789"), rest.size());
    const std::string_view digits = rest.substr(0, end);
    rest.remove_prefix(end);
    return digits;
  };
  const std::string_view integer = digits_prefix();
  if (integer.empty() || (integer.size() > 1 && integer.front() == '0')) return std::nullopt;
  std::string_view fraction;
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    fraction = digits_prefix();
    if (fraction.empty()) return std::nullopt;
  }
  // The exponent saturates (its digit count is unbounded): anything beyond the bound is rejected
  // by its sign and size alone, whatever the mantissa, in time linear in the literal.
  constexpr std::int64_t kSaturation = 1'000'000'000'000;
  std::int64_t exponent = 0;
  if (!rest.empty() && (rest.front() == 'e' || rest.front() == 'E')) {
    rest.remove_prefix(1);
    bool negative_exponent = false;
    if (!rest.empty() && (rest.front() == '+' || rest.front() == '-')) {
      negative_exponent = rest.front() == '-';
      rest.remove_prefix(1);
    }
    const std::string_view digits = digits_prefix();
    if (digits.empty()) return std::nullopt;
    for (const char digit : digits) exponent = std::min(kSaturation, exponent * 10 + (digit - '0'));
    if (negative_exponent) exponent = -exponent;
  }
  if (!rest.empty()) return std::nullopt;

  // value = (integer fraction) * 10^(exponent - |fraction|); strip the zeros on both ends.
  std::string significand;
  significand.reserve(integer.size() + fraction.size());
  significand.append(integer).append(fraction);
  exponent -= static_cast<std::int64_t>(fraction.size());
  const std::size_t first = significand.find_first_not_of('0');
  if (first == std::string::npos) return "0";  // every zero, -0 included, is 0
  const std::size_t last = significand.find_last_not_of('0');
  exponent += static_cast<std::int64_t>(significand.size() - 1 - last);
  significand = significand.substr(first, last - first + 1);
  if (significand.size() > kMaxExactDigits) return std::nullopt;
  if (exponent > kMaxExactExponent || exponent < -kMaxExactExponent) return std::nullopt;

  std::string form;
  form.reserve(significand.size() + 16);
  if (negative) form.push_back('-');
  form += significand;
  if (exponent != 0) {
    form.push_back('e');
    form += std::to_string(exponent);
  }
  return form;
}

std::string json_pointer_error(std::string_view pointer) { return parse_pointer(pointer).error; }

}  // namespace idem::fingerprint
