#include "pg/session_options.hpp"

#include <libpq-fe.h>

#include <string_view>

#include "pg/handles.hpp"

namespace idem::pg {
namespace {

std::string conninfo_quoted(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "'";
}

}  // namespace

std::string with_session_settings(const std::string& dsn, std::chrono::milliseconds timeout) {
  char* error = nullptr;
  const ConninfoHandle options(PQconninfoParse(dsn.c_str(), &error));
  if (!options) {
    PQfreemem(error);
    return dsn;
  }
  std::string result;
  std::string server_options;
  for (const PQconninfoOption* option = options.get(); option->keyword != nullptr; ++option) {
    if (option->val == nullptr) continue;
    if (std::string_view(option->keyword) == "options") {
      server_options = option->val;
      continue;
    }
    result += std::string(option->keyword) + "=" + conninfo_quoted(option->val) + " ";
  }
  if (!server_options.empty()) server_options += " ";
  server_options += "-c statement_timeout=" + std::to_string(timeout.count()) + " -c jit=off";
  return result + "options=" + conninfo_quoted(server_options);
}

}  // namespace idem::pg
