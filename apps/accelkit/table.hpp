// An aligned text table: a header row, then rows; the last column is never padded.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace accelkit::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers, std::string indent = "  ");
  Table& right_align(std::size_t column);  // numbers
  Table& hide_header() { header_ = false; return *this; }  // key/value lists
  Table& add_row(std::vector<std::string> cells);
  // A line printed under the previous row, indented to its second column ("  reason: ...").
  Table& add_note(std::string note);
  bool empty() const noexcept { return rows_.empty(); }
  void print(std::ostream& out) const;

 private:
  struct Row {
    std::vector<std::string> cells;
    std::vector<std::string> notes;
  };
  std::vector<std::string> headers_;
  std::vector<bool> right_;
  std::vector<Row> rows_;
  std::string indent_;
  bool header_ = true;
};

// Display width of UTF-8 text (code points; good enough for the names we print).
std::size_t display_width(const std::string& s);

}  // namespace accelkit::cli
