package redact

import "strings"

// maskSelectors are plain CSS, so Playwright accepts them as screenshot
// masks in any frame. Attribute matches on names and ids are
// case-insensitive ("i") where pages vary the spelling.
var maskSelectors = []string{
	// Passwords and one-time codes.
	`input[type="password" i]`,
	`input[autocomplete~="current-password" i]`,
	`input[autocomplete~="new-password" i]`,
	`input[autocomplete~="one-time-code" i]`,
	// Payment fields by autofill token.
	`input[autocomplete~="cc-number" i]`,
	`input[autocomplete~="cc-csc" i]`,
	`input[autocomplete~="cc-exp" i]`,
	`input[autocomplete~="cc-exp-month" i]`,
	`input[autocomplete~="cc-exp-year" i]`,
	`input[autocomplete~="cc-name" i]`,
	`input[autocomplete~="cc-type" i]`,
	// Payment fields by name or id, for forms without autocomplete.
	`input[name*="card" i]`, `input[id*="card" i]`,
	`input[name*="cc-" i]`, `input[id*="cc-" i]`,
	`input[name*="ccnum" i]`, `input[id*="ccnum" i]`,
	`input[name*="cvc" i]`, `input[id*="cvc" i]`,
	`input[name*="cvv" i]`, `input[id*="cvv" i]`,
	`input[name*="csc" i]`, `input[id*="csc" i]`,
	`input[name*="securitycode" i]`, `input[id*="securitycode" i]`,
	`input[name*="security-code" i]`, `input[id*="security-code" i]`,
	`input[name*="security_code" i]`, `input[id*="security_code" i]`,
	`input[name="pan" i]`, `input[id="pan" i]`,
	`input[name*="expir" i]`, `input[id*="expir" i]`,
	`input[name*="password" i]`, `input[id*="password" i]`,
	`input[name*="passwd" i]`, `input[id*="passwd" i]`,
	`input[name*="otp" i]`, `input[id*="otp" i]`,
	`input[name*="totp" i]`, `input[id*="totp" i]`,
	`input[data-elements-stable-field-name]`,
	// Payment providers' iframes: their whole surface is masked.
	`iframe[src*="stripe.com" i]`,
	`iframe[name^="__privateStripeFrame"]`,
	`iframe[title*="payment" i]`,
	`iframe[title*="card" i]`,
	`iframe[src*="braintreegateway.com" i]`,
	`iframe[src*="adyen.com" i]`,
	`iframe[src*="checkout.com" i]`,
	`iframe[src*="paypal.com" i]`,
	`iframe[src*="squareup.com" i]`,
	`iframe[src*="shopifycs.com" i]`,
	`iframe[name*="card-fields" i]`,
	`iframe[src*="recurly.com" i]`,
	`iframe[src*="chargebee.com" i]`,
	`iframe[src*="paddle.com" i]`,
	`iframe[src*="klarna.com" i]`,
	`iframe[src*="mollie.com" i]`,
	`iframe[src*="worldpay.com" i]`,
	`iframe[src*="authorize.net" i]`,
	`iframe[src*="cybersource.com" i]`,
	`iframe[src*="globalpay" i]`,
	`iframe[src*="payment" i]`,
	// Anything the page itself marks as sensitive.
	`[data-sensitive]`, `[data-private]`, `.sensitive`,
}

// MaskSelectors returns the CSS selectors of fields a screenshot must mask
// at the source (P19): password and one-time-code inputs, card number, CVV
// and expiry fields by autocomplete token, name or id, and payment
// providers' iframes. The browser passes them to Playwright's screenshot
// Mask option. The slice is a fresh copy.
func MaskSelectors() []string {
	return append([]string(nil), maskSelectors...)
}

// MaskSelectorList is MaskSelectors joined into one CSS selector list, for a
// caller that would rather locate every mask with a single query.
func MaskSelectorList() string {
	return strings.Join(maskSelectors, ", ")
}
