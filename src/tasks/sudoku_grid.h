// Sudoku grid, geometry and text formats (paper Appendix C.3, C.3.1).
//
// A grid is 81 cells in row-major order (cell index i = 9 * (row - 1) + (col - 1)),
// each 0 (blank) or a digit 1..9. Cells are named "r<row>c<col>", rows and columns
// 1-based; boxes are numbered 1..9 row-major ("box1" top-left, "box9" bottom-right).
// Candidate sets are 10-bit masks with bit d set when digit d (1..9) is allowed.
//
// Text formats (whitespace-separated tokens, as in the appendix):
//   question  "Q : c1 ... c81"   with "." for a blank and the digit otherwise
//   answer    "A : d1 ... d81 <eos>"
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace lol::tasks {

/// 81 cells row-major, 0 = blank, 1..9 = digit.
using SudokuGrid = std::array<uint8_t, 81>;

/// Bit mask of digits 1..9 (bits 1..9; bit 0 unused).
using DigitMask = uint16_t;
constexpr DigitMask kAllDigits = 0x3FE;

/// Static geometry tables, built once.
struct SudokuGeometry {
  /// Unit u: rows 0..8 are "row1".."row9", 9..17 "col1".."col9", 18..26 "box1".."box9";
  /// each lists its 9 cells in row-major order.
  std::array<std::array<uint8_t, 9>, 27> units;
  /// The 20 peers of each cell (same row, column or box, itself excluded), ascending.
  std::array<std::array<uint8_t, 20>, 81> peers;
  std::array<uint8_t, 81> row, col, box;  ///< 0-based row / column / box of a cell
};
const SudokuGeometry& sudoku_geometry();

/// "r<row>c<col>" of cell index 0..80.
const std::string& sudoku_cell_name(int cell);
/// Inverse of sudoku_cell_name; -1 when the token is not a cell name.
int parse_sudoku_cell(const std::string& token);
/// "row1".."row9" (u 0..8), "col1".."col9" (9..17), "box1".."box9" (18..26).
const std::string& sudoku_unit_name(int unit);
/// Inverse of sudoku_unit_name; -1 when the token is not a unit name.
int parse_sudoku_unit(const std::string& token);
/// Digit 1..9 of a one-character token "1".."9"; 0 otherwise.
int parse_sudoku_digit(const std::string& token);

/// Digits allowed in a blank cell: not present in its row, column or box. The
/// cell's own content is ignored (so a filled cell yields the digits its peers allow).
DigitMask sudoku_candidates(const SudokuGrid& g, int cell);

/// True when no row, column or box holds a digit twice (blanks ignored).
bool sudoku_consistent(const SudokuGrid& g);
/// True when every cell holds a digit and the grid is consistent.
bool sudoku_complete(const SudokuGrid& g);
/// Number of non-blank cells.
int sudoku_givens(const SudokuGrid& g);

/// Number of solutions of g, counting up to `limit` (bitmask depth-first search with
/// the fewest-candidates cell first). When `first` is non-null and a solution
/// exists, the first one found is stored there.
int count_sudoku_solutions(const SudokuGrid& g, int limit = 2, SudokuGrid* first = nullptr);

/// "Q : . . 3 ..." (81 cell tokens, no trailing space, no label).
std::string sudoku_question(const SudokuGrid& puzzle);
/// "A : 8 2 7 ... <eos>".
std::string sudoku_answer(const SudokuGrid& solution);
/// The grid of a question "Q : <81 cells> [ label ] ..." ("Q :" optional; anything
/// after the 81st cell is ignored). Throws lol::InputError naming `where` and the
/// offending token when fewer than 81 cells follow or a cell is not "." or 1..9.
SudokuGrid parse_sudoku_question(const std::string& text, const std::string& where = "sudoku question");
/// 81 characters, '.' for blanks (compact form for logs and dedup keys).
std::string sudoku_compact(const SudokuGrid& g);
/// 64-bit FNV-1a hash of the 81 cells (the puzzle id of C.3's deduplication).
uint64_t sudoku_hash(const SudokuGrid& g);

}  // namespace lol::tasks
