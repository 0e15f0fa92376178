#include "pg/connect_params.hpp"

#include <libpq-fe.h>

#include <string_view>

namespace idem::pg {

ConnectParams::ConnectParams(const std::string& dsn, const std::string& extra_options,
                             std::optional<int> connect_timeout_seconds) {
  char* error = nullptr;
  parsed_.reset(PQconninfoParse(dsn.c_str(), &error));
  if (!parsed_) {
    PQfreemem(error);
    return;
  }
  for (const PQconninfoOption* option = parsed_.get(); option->keyword != nullptr; ++option) {
    if (option->val == nullptr) continue;
    const std::string_view keyword = option->keyword;
    if (keyword == "options") {
      options_ = std::string(option->val) + " ";
      continue;
    }
    if (keyword == "connect_timeout") connect_timeout_seconds.reset();  // the DSN's own wins
    keywords_.push_back(option->keyword);
    values_.push_back(option->val);
  }
  options_ += extra_options;
  keywords_.push_back("options");
  values_.push_back(options_.c_str());
  if (connect_timeout_seconds) {
    connect_timeout_ = std::to_string(*connect_timeout_seconds);
    keywords_.push_back("connect_timeout");
    values_.push_back(connect_timeout_.c_str());
  }
  keywords_.push_back(nullptr);
  values_.push_back(nullptr);
}

}  // namespace idem::pg
