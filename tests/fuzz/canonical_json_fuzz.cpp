// Fuzzes the RFC 8785 canonicalizer (fingerprint/canonical_json).
// Input: a JSON text, optionally followed by '\0' and JSON Pointers to ignore, '\0'-separated
// (a JSON text never holds a raw NUL, so the split is unambiguous for valid documents).
// Invariants: no exception escapes (an uncaught one aborts: a finding), the canonical form is
// canonical (canonicalizing it again changes nothing), valid JSON to an independent parser,
// ignoring members only ever removes text, and looking a key up (key_from_json) changes nothing.
#include <algorithm>
#include <string>

#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>

#include "fingerprint/canonical_json.hpp"
#include "fuzz_support.hpp"

namespace {

using idem::fingerprint::canonicalize_json;

// Boost.JSON's own parser, allowing at least the canonicalizer's depth.
bool is_valid_json(const std::string& text) {
  boost::json::parse_options options;
  options.max_depth = 1024;
  boost::system::error_code ec;
  boost::json::parse(text, ec, {}, options);
  return !ec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = idem::fuzz::as_text(data, size);
  const std::size_t nul = input.find('\0');
  const std::string_view json = input.substr(0, nul);
  std::vector<std::string> ignore;
  if (nul != std::string_view::npos) {
    for (const std::string_view pointer : idem::fuzz::split(input.substr(nul + 1), '\0')) {
      ignore.emplace_back(pointer);
      // Config validation calls this on every ignore_json entry.
      (void)idem::fingerprint::json_pointer_error(pointer);
    }
  }

  const std::optional<std::string> canonical = canonicalize_json(json, ignore);
  const std::optional<std::string> unfiltered = ignore.empty() ? canonical : canonicalize_json(json);
  // Whether a body is JSON does not depend on the pointers.
  IDEM_FUZZ_CHECK(canonical.has_value() == unfiltered.has_value());
  // key_from_json reads its key in the same parse: the lookup changes nothing canonical, and a
  // document that parses says what the pointer addresses (at worst: nothing).
  if (!ignore.empty() && !ignore.front().empty()) {
    idem::core::BodyKeyLookup key;
    const std::optional<std::string> with_key =
        canonicalize_json(json, ignore, idem::fingerprint::JsonNumbers::ieee_double, ignore.front(), key);
    IDEM_FUZZ_CHECK(with_key == canonical);
    IDEM_FUZZ_CHECK((key.kind == idem::core::JsonKind::not_json) == !canonical.has_value());
    IDEM_FUZZ_CHECK(key.kind == idem::core::JsonKind::string || key.value.empty());
  }
  if (!canonical) return 0;

  // Empty only when the pointer "" ignored the whole document.
  const bool whole_document_ignored = std::find(ignore.begin(), ignore.end(), "") != ignore.end();
  IDEM_FUZZ_CHECK(canonical->empty() == whole_document_ignored);
  IDEM_FUZZ_CHECK(canonical->size() <= unfiltered->size());
  if (canonical->empty()) return 0;

  IDEM_FUZZ_CHECK(is_valid_json(*canonical));
  const std::optional<std::string> again = canonicalize_json(*canonical);
  IDEM_FUZZ_CHECK(again.has_value() && *again == *canonical);
  return 0;
}
