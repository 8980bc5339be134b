#include "table.hpp"

#include <algorithm>

namespace accelkit::cli {

std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

Table::Table(std::vector<std::string> headers, std::string indent)
    : headers_(std::move(headers)), right_(headers_.size(), false), indent_(std::move(indent)) {}

Table& Table::right_align(std::size_t column) {
  if (column < right_.size()) right_[column] = true;
  return *this;
}

Table& Table::add_row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back({std::move(cells), {}});
  return *this;
}

Table& Table::add_note(std::string note) {
  if (!rows_.empty()) rows_.back().notes.push_back(std::move(note));
  return *this;
}

void Table::print(std::ostream& out) const {
  const std::size_t n = headers_.size();
  std::vector<std::size_t> width(n, 0);
  for (std::size_t c = 0; c < n; ++c) width[c] = header_ ? display_width(headers_[c]) : 0;
  for (const auto& row : rows_)
    for (std::size_t c = 0; c < n; ++c) width[c] = std::max(width[c], display_width(row.cells[c]));

  auto line = [&](const std::vector<std::string>& cells) {
    std::string text = indent_;
    for (std::size_t c = 0; c < n; ++c) {
      const std::size_t pad = width[c] - display_width(cells[c]);
      const bool last = c + 1 == n;
      if (right_[c]) text.append(pad, ' ');
      text += cells[c];
      if (!right_[c] && !last) text.append(pad, ' ');
      if (!last) text += "  ";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << '\n';
  };
  if (header_) line(headers_);
  const std::string note_indent = indent_ + std::string(n > 1 ? width[0] + 2 : 2, ' ');
  for (const auto& row : rows_) {
    line(row.cells);
    for (const auto& note : row.notes) out << note_indent << note << '\n';
  }
}

}  // namespace accelkit::cli
