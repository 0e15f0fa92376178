#pragma once
// The request bytes, built once per run: per request only the key line changes (and, for a body
// with a `{key}` in it, the body and its length), so sending costs one string assembly into a
// reused buffer and no header-map work.
#include <string>
#include <string_view>

#include "loadgen_options.hpp"

namespace idem::bench {

class RequestTemplate {
 public:
  explicit RequestTemplate(const LoadgenOptions& options);

  // Writes the complete request into `out` (its capacity is reused); an empty key sends no key header.
  void render(std::string_view key, std::string& out) const;

 private:
  std::string head_;        // request line, Host, Content-Type
  std::string length_;      // "Content-Length: N\r\n" of a body without `{key}`
  std::string fields_;      // the other fixed header fields
  std::string key_prefix_;  // "Idempotency-Key: "
  std::string body_;        // the body, or its part before `{key}`
  std::string body_after_;  // the part after `{key}`
  bool key_in_body_ = false;
};

}  // namespace idem::bench
