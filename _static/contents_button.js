// The "On this page" button of the article header opens the page's contents in a dialog.
// The theme binds that dialog to the first such button in the page, which stands in the top
// header bar that book.css hides; this forwards a click on the visible button to it.
document.addEventListener("DOMContentLoaded", () => {
  const [bound, ...others] = document.querySelectorAll("button.secondary-toggle");
  for (const button of others) {
    button.addEventListener("click", (event) => {
      event.preventDefault();
      event.stopPropagation();
      bound.click();
    });
  }
});
