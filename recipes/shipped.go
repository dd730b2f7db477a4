package recipes

import (
	"slices"

	"github.com/agentvault/agentvault/policy"
)

// Frame selectors of the card surfaces the shipped platform recipes name:
// the titles and names the integrations give their iframes (the same
// selectors the tool reference lists under list_frames).
const (
	StripePaymentFrame = `iframe[title="Secure payment input frame"]`
	StripeNumberFrame  = `iframe[title="Secure card number input frame"]`
	StripeExpiryFrame  = `iframe[title="Secure expiration date input frame"]`
	StripeCVCFrame     = `iframe[title="Secure CVC input frame"]`
	ShopifyNumberFrame = `iframe[name*="card-fields-number"]`
	ShopifyExpiryFrame = `iframe[name*="card-fields-expiry"]`
	ShopifyCVCFrame    = `iframe[name*="card-fields-verification_value"]`
	ShopifyNameFrame   = `iframe[name*="card-fields-name"]`
)

// cardOrder is the one fill order every card surface needs (mcpd enforces
// it): expiry and billing first, the number, then its code straight after.
const cardOrder = "Fill expiry and billing fields first, then the card number, then the security code in the very next fill_checkout call (or as the next field of the same batch)."

// Shipped returns the platform recipes that ship with the appliance, with
// their origins taken from policy's shipped payment integrations. A stored
// platform recipe with the same id replaces one of these.
func Shipped() []Recipe {
	return []Recipe{
		{
			ID: "stripe-payment-element", Kind: KindPlatform, Status: StatusVerified, CardSurface: "stripe-payment-element",
			Detection: []string{
				"One iframe titled \"Secure payment input frame\" served from js.stripe.com holds number, expiry and security code.",
				"The page loads https://js.stripe.com/v3/.",
			},
			Steps: []string{
				"Fill the page's own contact and address fields.",
				"Wait for the payment frame: wait_for_selector on the number field with frame set to the payment frame selector.",
				cardOrder,
				"Submit with the page's own pay button, then call get_session_outcome.",
			},
			Selectors: map[string]Target{
				"frame":      {Selector: StripePaymentFrame},
				"cardNumber": {Selector: `input[name="number"]`, Frame: StripePaymentFrame},
				"expiry":     {Selector: `input[name="expiry"]`, Frame: StripePaymentFrame},
				"cvc":        {Selector: `input[name="cvc"]`, Frame: StripePaymentFrame},
				"postalCode": {Selector: `input[name="postalCode"]`, Frame: StripePaymentFrame},
			},
			Origins: originsOf("stripe-payment-element"),
		},
		{
			ID: "stripe-card-element", Kind: KindPlatform, Status: StatusVerified, CardSurface: "stripe-card-element",
			Detection: []string{
				"Separate iframes titled \"Secure card number input frame\", \"Secure expiration date input frame\" and \"Secure CVC input frame\" from js.stripe.com (the legacy Card Element).",
			},
			Steps: []string{
				"Fill the page's own contact and address fields.",
				"Each card field has its own frame: pass the frame selector named beside it.",
				cardOrder,
				"Submit with the page's own pay button, then call get_session_outcome.",
			},
			Selectors: map[string]Target{
				"numberFrame": {Selector: StripeNumberFrame},
				"expiryFrame": {Selector: StripeExpiryFrame},
				"cvcFrame":    {Selector: StripeCVCFrame},
				"cardNumber":  {Selector: `input[name="cardnumber"]`, Frame: StripeNumberFrame},
				"expiry":      {Selector: `input[name="exp-date"]`, Frame: StripeExpiryFrame},
				"cvc":         {Selector: `input[name="cvc"]`, Frame: StripeCVCFrame},
			},
			Origins: originsOf("stripe-payment-element"),
		},
		{
			ID: "shopify", Kind: KindPlatform, Status: StatusVerified, CardSurface: "shopify-card-fields",
			Detection: []string{
				"The checkout runs under /checkouts/ on the shop's host or its myshopify.com host.",
				"Card fields are iframes named card-fields-number-…, card-fields-expiry-…, card-fields-verification_value-… and card-fields-name-… from checkout.shopifycs.com.",
			},
			Steps: []string{
				"Contact and delivery come first; the payment step shows the card fields once shipping is chosen.",
				"Each card field has its own frame: pass the frame selector named beside it.",
				cardOrder,
				"Submit with the Pay now button, then call get_session_outcome.",
			},
			Selectors: map[string]Target{
				"numberFrame": {Selector: ShopifyNumberFrame},
				"cardNumber":  {Selector: `input[name="number"]`, Frame: ShopifyNumberFrame},
				"expiry":      {Selector: `input[name="expiry"]`, Frame: ShopifyExpiryFrame},
				"cvc":         {Selector: `input[name="verification_value"]`, Frame: ShopifyCVCFrame},
				"nameOnCard":  {Selector: `input[name="name"]`, Frame: ShopifyNameFrame},
			},
			Origins: originsOf("shopify-card-fields"),
		},
	}
}

// originsOf copies an integration's frame patterns and posting origins
// from policy's shipped list, the one home of where card frames live.
func originsOf(integration string) *Origins {
	for _, in := range policy.ShippedIntegrations().List() {
		if in.Name == integration {
			return &Origins{Frames: slices.Clone(in.Frames), PostsTo: slices.Clone(in.PostsTo)}
		}
	}
	return nil
}
