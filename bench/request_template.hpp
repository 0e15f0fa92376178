#pragma once
// The request bytes, built once per run: per request only the key line changes, so sending costs
// one string assembly into a reused buffer and no header-map work.
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
  std::string head_;        // request line and the fixed header fields
  std::string key_prefix_;  // "Idempotency-Key: "
  std::string tail_;        // blank line and body
};

}  // namespace idem::bench
