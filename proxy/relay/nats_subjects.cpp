#include "relay/nats_subjects.hpp"

#include <algorithm>

namespace idem::relay {
namespace {

// The next token of `text` from `position`, which moves past it and its dot; npos once the text is used up.
std::string_view next_token(std::string_view text, std::size_t& position) {
  const std::size_t dot = text.find('.', position);
  const std::size_t end = dot == std::string_view::npos ? text.size() : dot;
  const std::string_view token = text.substr(position, end - position);
  position = dot == std::string_view::npos ? std::string_view::npos : dot + 1;
  return token;
}

}  // namespace

bool subject_matches(std::string_view filter, std::string_view subject) {
  if (filter.empty() || subject.empty()) return false;
  std::size_t f = 0;
  std::size_t s = 0;
  while (f != std::string_view::npos) {
    const std::string_view wanted = next_token(filter, f);
    if (wanted == ">") return f == std::string_view::npos && s != std::string_view::npos;
    if (s == std::string_view::npos) return false;  // the subject has fewer tokens
    const std::string_view token = next_token(subject, s);
    if (token.empty()) return false;
    if (wanted != "*" && wanted != token) return false;
  }
  return s == std::string_view::npos;  // no subject tokens left over
}

bool stream_covers(const std::vector<std::string>& filters, std::string_view subject) {
  return std::any_of(filters.begin(), filters.end(),
                     [subject](const std::string& filter) { return subject_matches(filter, subject); });
}

std::string describe_filters(const std::vector<std::string>& filters) {
  std::string text;
  for (const std::string& filter : filters) {
    if (!text.empty()) text += ", ";
    text += filter;
  }
  return text;
}

}  // namespace idem::relay
