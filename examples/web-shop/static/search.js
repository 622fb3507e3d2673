// The search box asks /api/search (a test may mock it) and lists the books it returns.
const form = document.getElementById("search");
const results = document.getElementById("results");
const status = document.getElementById("status");
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const q = document.getElementById("q").value;
  results.replaceChildren();
  status.textContent = "Searching…";
  const response = await fetch("/api/search?q=" + encodeURIComponent(q));
  const data = await response.json();
  for (const book of data.results) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.href = "/book/" + book.id;
    link.dataset.id = book.id;
    link.textContent = book.title;
    item.append(link, " by " + book.author);
    results.append(item);
  }
  status.textContent = data.results.length ? data.results.length + " found" : "No books found";
});
