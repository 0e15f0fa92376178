#pragma once
// A destination name built from a row (stream name, subject, URL target): literal text and
// {field} placeholders, and its rendering for one row. config/ parses the text into these types
// (config::parse_message_template), which is why this header stays plain: std and OutboxRow only.
#include <optional>
#include <string>
#include <vector>

#include "relay/outbox_row.hpp"

namespace idem::relay {

enum class MessageField { event_id, event_type, aggregate_type, aggregate_id };

struct TemplatePiece {
  std::string literal;  // used when field is empty
  std::optional<MessageField> field;
};

struct MessageTemplate {
  std::string text;  // as written, for messages
  std::vector<TemplatePiece> pieces;
};

enum class TemplateEscaping {
  none,         // stream names: the values as they are
  url_segment,  // URL targets: each value percent-encoded (RFC 3986 unreserved kept)
};

std::string render(const MessageTemplate& message_template, const OutboxRow& row, TemplateEscaping escaping);

}  // namespace idem::relay
