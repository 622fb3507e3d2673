// Placing an order posts the form and shows the order number.
const form = document.getElementById("order");
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = Object.fromEntries(new FormData(form).entries());
  const response = await fetch("/api/order", {method: "POST", headers: {"Content-Type": "application/json"},
                                              body: JSON.stringify(body)});
  const data = await response.json();
  document.getElementById("confirmation").textContent =
    response.ok ? "Thank you, your order is " + data.order : "Sorry: " + data.error;
});
