#include "core/request_framing.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/ascii.hpp"
#include "core/request_target.hpp"

namespace idem::core {
namespace {

// RFC 9110 §5.5: field-content is VCHAR, obs-text, SP and HTAB. The parser already refused CR,
// LF and NUL; a vertical tab or another control character is what some parsers read as white
// space ("Transfer-Encoding:\vchunked") and others do not.
bool is_control_character(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

// Eight bytes per step (every request's every field passes here): a word with no byte below
// 0x20 and none equal to 0x7f is clean; one that has (a tab, say) is looked at byte by byte. The
// last few bytes are checked as a word too, padded with a clean byte.
bool has_control_character(std::string_view value) {
  constexpr std::uint64_t kOnes = 0x0101010101010101;
  constexpr std::uint64_t kHighs = 0x8080808080808080;
  const auto suspect = [](std::uint64_t word) {
    const auto has_byte_below = [](std::uint64_t w, std::uint64_t n) { return ((w - kOnes * n) & ~w & kHighs) != 0; };
    return has_byte_below(word, 0x20) || has_byte_below(word ^ (kOnes * 0x7f), 1);
  };
  for (std::size_t i = 0; i < value.size(); i += 8) {
    const std::size_t size = std::min<std::size_t>(8, value.size() - i);
    std::uint64_t word = kOnes * 'a';
    if (size == 8) {
      std::memcpy(&word, value.data() + i, 8);  // a fixed size: one load
    } else {
      std::memcpy(&word, value.data() + i, size);
    }
    if (suspect(word) && std::any_of(value.begin() + static_cast<std::ptrdiff_t>(i),
                                     value.begin() + static_cast<std::ptrdiff_t>(i + size), is_control_character)) {
      return true;
    }
  }
  return false;
}

Problem refused(std::string_view why) { return bad_request_problem(why); }

}  // namespace

std::optional<Problem> request_framing_problem(const RequestHead& head) {
  int host_lines = 0;
  std::string_view host;
  int length_lines = 0;
  std::string_view length;
  int chunked_codings = 0;
  bool transfer_encoding = false;
  std::string other_coding;  // the first coding that is not chunked

  for (const auto& [name, value] : head.fields) {
    if (has_control_character(value)) {
      return refused("the value of " + std::string(name) + " holds a control character");
    }
    if (ascii::iequals(name, "Host")) {
      ++host_lines;
      host = ascii::trim_ows(value);
    } else if (ascii::iequals(name, "Content-Length")) {
      ++length_lines;
      length = ascii::trim_ows(value);
    } else if (ascii::iequals(name, "Transfer-Encoding")) {
      transfer_encoding = true;
      std::string_view list = value;
      while (true) {
        const std::size_t comma = list.find(',');
        const std::string_view item = ascii::trim_ows(list.substr(0, comma));
        // Empty list elements are allowed and ignored (RFC 9110 §5.6.1).
        if (!item.empty()) {
          // A coding may carry parameters ("gzip;q=1"): its name ends at the first ';'.
          const std::string_view coding = ascii::trim_ows(item.substr(0, item.find(';')));
          if (ascii::iequals(coding, "chunked")) {
            if (coding.size() != item.size()) return refused("Transfer-Encoding: chunked takes no parameters");
            ++chunked_codings;
          } else if (chunked_codings > 0) {
            return refused("Transfer-Encoding: chunked must be the final transfer coding");
          } else if (other_coding.empty()) {
            other_coding = std::string(coding);
          }
        }
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
    }
  }

  if (transfer_encoding) {
    if (head.version < 11) return refused("Transfer-Encoding is not allowed in an HTTP/1.0 request");
    if (length_lines > 0) return refused("a request must not carry both Transfer-Encoding and Content-Length");
    if (chunked_codings > 1) return refused("Transfer-Encoding lists chunked more than once");
    // The proxy decodes chunked only; a body in another coding could not be forwarded as sent.
    if (!other_coding.empty()) return transfer_coding_not_implemented_problem(other_coding);
    if (chunked_codings == 0) return refused("Transfer-Encoding is empty");
  }
  if (length_lines > 1) return refused("more than one Content-Length field");
  if (length_lines == 1) {
    if (length.empty()) return refused("Content-Length is empty");
    for (const char c : length) {
      if (!ascii::is_digit(c)) return refused("Content-Length must be a decimal number (digits only, one value)");
    }
  }
  // RFC 9112 §3.2: more than one Host is refused in any version; none only in HTTP/1.1.
  if (host_lines > 1) return refused("more than one Host field");
  if (head.version >= 11 && host_lines == 0) return refused("an HTTP/1.1 request must carry a Host field");
  if (host_lines == 1 && !host.empty() && !is_valid_host_port(host)) return refused("Host is not a valid host[:port]");
  if (head.method == "TRACE" &&
      (transfer_encoding || (length_lines == 1 && length.find_first_not_of('0') != std::string_view::npos))) {
    return refused("a TRACE request carries no content");
  }
  return std::nullopt;
}

}  // namespace idem::core
