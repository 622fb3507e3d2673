// "Add to cart" posts the book and updates the count in the header.
const add = document.getElementById("add");
add.addEventListener("click", async () => {
  const response = await fetch("/api/cart", {method: "POST", headers: {"Content-Type": "application/json"},
                                             body: JSON.stringify({id: add.dataset.id})});
  const data = await response.json();
  document.getElementById("cart-count").textContent = data.items.length;
  document.getElementById("added").textContent = "Added to your cart";
});
