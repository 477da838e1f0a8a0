// Every admin page: a list cell that admin.css cut short (an ellipsis) shows its whole text on hover.
document.addEventListener("DOMContentLoaded", function () {
  for (const cell of document.querySelectorAll("#result_list td, #result_list tbody th")) {
    if (cell.scrollWidth > cell.clientWidth + 1 && !cell.title) {
      cell.title = cell.innerText.trim();
    }
  }
});
