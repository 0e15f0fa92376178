#include "relay/message_template.hpp"

namespace idem::relay {
namespace {

void append_escaped(std::string& out, std::string_view value, TemplateEscaping escaping) {
  switch (escaping) {
    case TemplateEscaping::none: out.append(value); return;
    case TemplateEscaping::url_segment: {
      static constexpr char kHex[] = "0123456789ABCDEF";
      for (const char c : value) {
        const auto byte = static_cast<unsigned char>(c);
        const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                                c == '-' || c == '.' || c == '_' || c == '~';
        if (unreserved) {
          out.push_back(c);
        } else {
          out.push_back('%');
          out.push_back(kHex[byte >> 4]);
          out.push_back(kHex[byte & 0xF]);
        }
      }
      return;
    }
  }
}

}  // namespace

std::string render(const MessageTemplate& message_template, const OutboxRow& row, TemplateEscaping escaping) {
  std::string out;
  for (const TemplatePiece& piece : message_template.pieces) {
    if (!piece.field) {
      out.append(piece.literal);
      continue;
    }
    switch (*piece.field) {
      case MessageField::event_id: out.append(std::to_string(row.id)); break;
      case MessageField::event_type: append_escaped(out, row.event_type, escaping); break;
      case MessageField::aggregate_type: append_escaped(out, row.aggregate_type, escaping); break;
      case MessageField::aggregate_id: append_escaped(out, row.aggregate_id, escaping); break;
    }
  }
  return out;
}

}  // namespace idem::relay
