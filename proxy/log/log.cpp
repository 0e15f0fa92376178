#include "log/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace idem::log {
namespace {

std::atomic<int> g_min_level{static_cast<int>(Level::info)};

std::string_view level_name(Level level) {
  switch (level) {
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::warn: return "warn";
    case Level::error: return "error";
  }
  return "info";
}

void append_time(std::string& out) {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t secs = system_clock::to_time_t(now);
  const auto millis = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char text[32];
  const int n =
      std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                    utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(millis));
  out.append(text, static_cast<std::size_t>(n));
}

}  // namespace

void set_min_level(Level level) { g_min_level.store(static_cast<int>(level), std::memory_order_relaxed); }

bool enabled(Level level) { return static_cast<int>(level) >= g_min_level.load(std::memory_order_relaxed); }

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  out.push_back('"');
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out.push_back(hex[byte >> 4]);
          out.push_back(hex[byte & 0xF]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void write(Level level, std::string_view event, std::initializer_list<Field> fields) {
  if (!enabled(level)) return;
  std::string line;
  line.reserve(160);
  line += "{\"time\":\"";
  append_time(line);
  line += "\",\"level\":\"";
  line += level_name(level);
  line += "\",\"event\":";
  append_json_string(line, event);
  for (const Field& field : fields) {
    line.push_back(',');
    append_json_string(line, field.name);
    line.push_back(':');
    if (const auto* text = std::get_if<std::string_view>(&field.value)) {
      append_json_string(line, *text);
    } else {
      line += std::to_string(std::get<std::int64_t>(field.value));
    }
  }
  line += "}\n";
  // One write per line: atomic with respect to other threads' lines for any realistic length.
  const char* data = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, data, left);
    if (n <= 0) return;
    data += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace idem::log
