package merchant

import (
	"html/template"
	"net/http"
)

// A checkout paid with the shopper's saved card: the page asks for no card
// field, only an optional email for the receipt, so an agent can place an
// order without filling a token (seed 004's receipt image).

func (s *shop) savedRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /saved/checkout", func(w http.ResponseWriter, r *http.Request) { render(w, savedCheckoutTmpl, nil) })
	mux.HandleFunc("POST /saved/checkout", func(w http.ResponseWriter, r *http.Request) { render(w, savedDoneTmpl, nil) })
}

var savedCheckoutTmpl = template.Must(template.New("saved").Parse(`<!doctype html><html><head><title>Checkout</title></head><body>
<h1>Checkout</h1>
<form method="post" action="/saved/checkout">
<p>Pay with your saved Visa card.</p>
<label for="email">Email for the receipt (optional)</label> <input id="email" name="email" type="email">
<button id="place-order" type="submit">Place order</button>
</form></body></html>`))

var savedDoneTmpl = template.Must(template.New("saved-done").Parse(`<!doctype html><html><head><title>Order placed</title></head><body>
<div id="order-success"><h1>Thank you</h1><p>Your order is placed and paid with your saved card.</p></div>
</body></html>`))
